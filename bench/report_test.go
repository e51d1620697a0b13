package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a ')' must not shift the fields.
	line := "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 9 0 12345 1000 200"
	st, err := parseStat(line)
	require.NoError(t, err)
	require.Equal(t, 17, st.ppid)
	require.InDelta(t, 3.8, st.cpu, 1e-9)
	require.InDelta(t, 0, st.reaped, 1e-9)

	self, err := readStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), self.ppid)
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l := percentiles(d)
	require.Equal(t, Latency{P50: 50, P95: 95, P99: 99, Max: 100}, l)
	require.Equal(t, Latency{}, percentiles(nil))
	require.Equal(t, Latency{P50: 7, P95: 7, P99: 7, Max: 7}, percentiles([]time.Duration{7 * time.Millisecond}))
}

func TestSample(t *testing.T) {
	t.Parallel()
	ids := []string{"a", "b", "c", "d", "e", "f"}
	require.Equal(t, ids, sample(ids, 10))
	require.Equal(t, []string{"a", "c", "e"}, sample(ids, 3))
}
