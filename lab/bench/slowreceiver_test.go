package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSlowProxyHoldsThenPassesOn: the slow receiver's proxy answers every
// request its delay late with the receiver's own answer, passes the
// request on as it came (its signature headers and body), and counts the
// requests it held at once.
func TestSlowProxyHoldsThenPassesOn(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		got = append(got, req.URL.Path+" "+req.Header.Get("webhook-signature")+" "+string(body))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "applied")
	}))
	defer rcv.Close()
	const delay = 150 * time.Millisecond
	p, err := listenSlowProxy(delay)
	require.NoError(t, err)
	defer p.close()
	require.NoError(t, p.start(rcv.URL))

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, p.url(), bytes.NewReader([]byte(`{"id":"e1"}`)))
			require.NoError(t, err)
			req.Header.Set("webhook-signature", "v1,abc")
			t0 := time.Now()
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			answer, _ := io.ReadAll(resp.Body)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Equal(t, "applied", string(answer))
			require.GreaterOrEqual(t, time.Since(t0), delay, "held its delay")
		})
	}
	wg.Wait()
	require.Len(t, got, 3)
	for _, g := range got {
		require.Equal(t, `/webhook v1,abc {"id":"e1"}`, g)
	}
	require.EqualValues(t, 3, p.peak.Load(), "the three were held at once")
}

// TestLanesOver: the deliveries a second are counted from the first post
// to the last commit, whatever order the commits come in.
func TestLanesOver(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	times := []time.Time{t0.Add(4 * time.Second), t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second)}
	got := lanesOver(times, t0)
	require.Equal(t, FastLanes{Deliveries: 4, Seconds: 4, PerSec: 1}, got)
	require.Equal(t, FastLanes{}, lanesOver(nil, t0))
}

// TestSlowReceiverReportPrintsTheRatio: the table's summary line carries
// the fast lanes' rate in both runs and their ratio.
func TestSlowReceiverReportPrintsTheRatio(t *testing.T) {
	t.Parallel()
	rep := &SlowReceiverReport{Events: 150, Correlations: 30, DelaySeconds: 10,
		AllFast: FastLanes{Deliveries: 300, Seconds: 10, PerSec: 30}, BesideSlow: FastLanes{Deliveries: 300, Seconds: 12, PerSec: 25}}
	rep.Ratio = ratio(rep.BesideSlow.PerSec, rep.AllFast.PerSec)
	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	require.Contains(t, b.String(), "slow_receiver fast_lanes=25.0/s all_fast=30.0/s ratio=0.83")
}
