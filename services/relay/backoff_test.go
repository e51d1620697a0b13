package relay

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The pause after failures starts at MinBackoff, doubles up to MaxBackoff
// and is jittered by ±20 %; Reset starts it over.
func TestBackoffDoublesToTheCapWithJitter(t *testing.T) {
	t.Parallel()
	r := &Relay{cfg: Config{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}}
	b := r.newBackoff()
	within := func(d, around time.Duration) {
		t.Helper()
		require.GreaterOrEqual(t, d, around*8/10)
		require.LessOrEqual(t, d, around*12/10+time.Nanosecond)
	}
	for _, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		within(b.NextBackOff(), want*time.Millisecond)
	}
	b.Reset()
	within(b.NextBackOff(), 100*time.Millisecond)
}
