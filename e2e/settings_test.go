package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestEndpointSettingsHeadersTimeoutAndWindow: with the server's window at
// 5 minutes and its timeout at a minute, one endpoint gets its custom
// headers on every delivery, and another, whose receiver answers 200 after
// 10 s, is dead-lettered by its own settings: every attempt cut at its 1 s
// timeout (the server's minute would have delivered it) and the dead
// letter written when its own 20 s window ends, not the server's 5
// minutes.
//
// The figures leave a loaded machine room without letting a defect
// through: an attempt cut at 1 s is told from one that waited for the
// answer (10 s) or was cut only by the window (20 s); the window has room
// for the retry 1 s after the first attempt however late that comes; and
// the dead letter's time, read from the ledger, is bounded below by the
// window (counted from the acceptance, which precedes it) and above by minutes short of the server's.
func TestEndpointSettingsHeadersTimeoutAndWindow(t *testing.T) {
	t.Parallel()
	const answerAfter, window = 10 * time.Second, 20 * time.Second
	b := setup(t, options{window: 5 * time.Minute, timeout: time.Minute})

	rcv := newLedgerReceiver(t)
	var mu sync.Mutex
	got := map[string][]string{}
	rcv.headers = func(id string, h http.Header) {
		mu.Lock()
		defer mu.Unlock()
		got[id] = append(got[id], h.Get("Authorization")+"|"+h.Get("X-Tenant"))
	}
	ep := b.createEndpointWith(map[string]any{"url": rcv.URL(),
		"headers": map[string]string{"Authorization": "Bearer rcv-key-1", "X-Tenant": "acme"}})
	rcv.secret = ep.Secret
	corr := b.id("hdr")
	for seq := int64(1); seq <= 3; seq++ {
		code, _ := b.postEvent(b.id(fmt.Sprintf("hdr-%d", seq)), corr, seq, ep.ID, map[string]any{"n": seq})
		require.Equal(t, http.StatusAccepted, code)
	}
	waitFor(t, 5*time.Minute, "3 deliveries", func() bool { return len(rcv.appliedTo(corr)) == 3 })
	require.Equal(t, []int64{1, 2, 3}, rcv.appliedTo(corr))
	rcv.requireClean(t)
	mu.Lock()
	for seq := 1; seq <= 3; seq++ {
		id := b.id(fmt.Sprintf("hdr-%d", seq))
		require.NotEmpty(t, got[id], id)
		for _, h := range got[id] {
			require.Equal(t, "Bearer rcv-key-1|acme", h, "every attempt of %s carries the custom headers", id)
		}
	}
	mu.Unlock()

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(answerAfter):
		}
	}))
	t.Cleanup(slow.Close)
	slowEp := b.createEndpointWith(map[string]any{"url": slow.URL + "/hook", "timeout": "1s", "recovery_window": window.String()})
	id := b.id("slow-1")
	code, _ := b.postEvent(id, b.id("slow"), 1, slowEp.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(id, contract.StateDeadLettered, 5*time.Minute)

	dl := b.deadLetter(id)
	require.Contains(t, dl.Reason, "recovery window spent")
	require.GreaterOrEqual(t, len(dl.Attempts), 2, "the first attempt and the retries within %s", window)
	for _, at := range dl.Attempts {
		require.Nil(t, at.StatusCode, "no attempt waited for the %s answer: %+v", answerAfter, at)
		require.Less(t, at.LatencyMS, int32(answerAfter.Milliseconds()), "each attempt cut at its endpoint's 1 s timeout, not by the window")
	}
	took := dl.DeadLetteredAt.Sub(dl.Attempts[0].StartedAt)
	t.Logf("FIGURE per-endpoint window: dead-lettered %.1f s after the first attempt (window %s, server's 5 m)", took.Seconds(), window)
	require.GreaterOrEqual(t, dl.DeadLetteredAt.Sub(b.eventState(id).AcceptedAt), window, "not before its window ends (it starts after the acceptance)")
	require.Less(t, took, window+2*time.Minute, "its own window, not the server's")
}

// TestEndpointRateLimitKeepsOrderAndNeverDeadLetters: an endpoint limited to
// 5 deliveries a second, with a 2 s window, gets 20 correlations of 2 events
// posted at once: 20 heads compete for its slots, most wait far longer than
// the window on a timer, and none is dead-lettered for it. Each event is
// applied exactly once and in order in its lane; the deliveries are spread
// over at least the time the limit allows (the observed rate is printed),
// while an unlimited endpoint of the same events is not held back.
func TestEndpointRateLimitKeepsOrderAndNeverDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 5 * time.Minute})
	limited := newLedgerReceiver(t)
	free := newLedgerReceiver(t)
	var mu sync.Mutex
	var limitedAt, freeAt []time.Time
	limited.headers = func(string, http.Header) { mu.Lock(); limitedAt = append(limitedAt, time.Now()); mu.Unlock() }
	free.headers = func(string, http.Header) { mu.Lock(); freeAt = append(freeAt, time.Now()); mu.Unlock() }
	epL := b.createEndpointWith(map[string]any{"url": limited.URL(), "rate_limit": 5, "recovery_window": "2s", "event_types": []string{"rate.*"}})
	limited.secret = epL.Secret
	epF := b.createEndpointWith(map[string]any{"url": free.URL(), "event_types": []string{"rate.*"}})
	free.secret = epF.Secret

	const corrs, perCorr = 20, 2
	start := time.Now()
	var wg sync.WaitGroup
	for c := range corrs {
		wg.Go(func() {
			corr := b.id(fmt.Sprintf("rate-%d", c))
			for seq := int64(1); seq <= perCorr; seq++ {
				var st eventState
				code := b.call(http.MethodPost, "/v1/events", map[string]any{"id": fmt.Sprintf("%s-%d", corr, seq), "correlation_id": corr,
					"sequence": seq, "type": "rate.tick", "data": map[string]any{"n": seq}}, &st)
				require.Equal(t, http.StatusAccepted, code)
			}
		})
	}
	wg.Wait()
	const n = corrs * perCorr
	applied := func(r *ledgerReceiver) int {
		all, _ := r.snapshot()
		total := 0
		for _, seqs := range all {
			total += len(seqs)
		}
		return total
	}
	waitFor(t, 2*time.Minute, "every delivery", func() bool { return applied(limited) == n && applied(free) == n })

	for c := range corrs {
		corr := b.id(fmt.Sprintf("rate-%d", c))
		require.Equal(t, []int64{1, 2}, limited.appliedTo(corr), corr)
		require.Equal(t, []int64{1, 2}, free.appliedTo(corr), corr)
		for seq := 1; seq <= perCorr; seq++ {
			id := fmt.Sprintf("%s-%d", corr, seq)
			require.Equal(t, 1, limited.requestsFor(id), "%s was sent once: a throttled attempt sends nothing", id)
		}
	}
	limited.requireClean(t)
	free.requireClean(t)
	var dls struct {
		Items []any `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/dead-letters?endpoint_id="+epL.ID, nil, &dls))
	require.Empty(t, dls.Items, "waiting one's turn never spends the window")

	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(limitedAt, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(freeAt, func(a, b time.Time) int { return a.Compare(b) })
	span := limitedAt[n-1].Sub(limitedAt[0])
	rate := float64(n-1) / span.Seconds()
	freeSpan := freeAt[n-1].Sub(start)
	t.Logf("FIGURE rate limit 5/s: %d deliveries in %.2f s = %.2f/s; the unlimited endpoint got all %d within %.2f s of the first post",
		n, span.Seconds(), rate, n, freeSpan.Seconds())
	// The limiter's slots are 200 ms apart and nothing is sent before its
	// slot: a lower bound on the span that holds however slow the machine
	// (the upper one is not asserted).
	require.GreaterOrEqual(t, span, time.Duration(float64(n-1)*0.9*float64(200*time.Millisecond)), "sent faster than 5/s")
}
