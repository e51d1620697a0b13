package bench

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/webhook"
)

// TestRetriesWithin: without the breaker, a head whose every attempt fails
// is tried at about 0, 1, 5, 21 and 85 s, never past its window.
func TestRetriesWithin(t *testing.T) {
	t.Parallel()
	require.Equal(t, 5, retriesWithin(5*time.Minute, 2*time.Minute), "0, 1, 5, 21, 85 s; the next would come at 341 s")
	require.Equal(t, 4, retriesWithin(5*time.Minute, 30*time.Second))
	require.Equal(t, 5, retriesWithin(5*time.Minute, 10*time.Minute), "the window ends the retries, not the outage")
	require.Equal(t, 3, retriesWithin(8*time.Second, 20*time.Second), "0, 1, 5 s in an 8 s window")
}

// TestDeadReceiverResultFailures: a case fails on anything lost, sent
// again, out of order or left to an operator; a clean one does not, dead
// letters and all when hookflow replayed them itself.
func TestDeadReceiverResultFailures(t *testing.T) {
	t.Parallel()
	clean := DeadReceiverResult{Correlations: 10, LaneEvents: 3, Posted: 30, Applied: 30, DeadLetters: 10, AutoReplayed: 10}
	require.Empty(t, clean.failures())
	require.NoError(t, (&DeadReceiverReport{Cases: []DeadReceiverResult{clean}}).Err())

	bad := clean
	bad.Posted, bad.Lost, bad.Duplicates, bad.OrderViolations, bad.AutoReplayed, bad.Undelivered = 29, 1, 2, 3, 7, 4
	require.Equal(t, []string{
		"events not accepted: 1 of 30", "events lost (accepted, never applied): 1", "duplicates (an applied event sent again): 2",
		"order violations: 3", "dead letters not auto-replayed: 3", "deliveries undelivered in hookflow's ledger: 4",
	}, bad.failures())
	err := (&DeadReceiverReport{Cases: []DeadReceiverResult{clean, bad}}).Err()
	require.ErrorContains(t, err, "case 2: events not accepted: 1 of 30")
	require.NotContains(t, err.Error(), "case 1")
}

// TestDeadReceiver: down, the receiver answers 503 to everything and counts
// it; up, it applies each lane in order and each event once, and counts
// what breaks that or the wire contract.
func TestDeadReceiver(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	rcv := newDeadReceiver()
	rcv.secret = secret
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	send := func(id string, seq, prev int64, sign string) int {
		t.Helper()
		body, err := json.Marshal(contract.Envelope{ID: id, CorrelationID: "c1", Sequence: seq, PreviousSequence: prev})
		require.NoError(t, err)
		ts := time.Now().Unix()
		sig, err := webhook.Sign([]string{sign}, id, ts, body)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/webhook", strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set(webhook.HeaderID, id)
		req.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(webhook.HeaderSignature, sig)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	rcv.setDown(true)
	require.Equal(t, http.StatusServiceUnavailable, send("e1", 1, 0, secret))
	require.Equal(t, http.StatusServiceUnavailable, send("e1", 1, 0, secret))
	rcv.setDown(false)
	require.Equal(t, http.StatusAccepted, send("e2", 2, 1, secret), "2 before 1 is parked")
	require.Equal(t, http.StatusOK, send("e1", 1, 0, secret))
	require.Equal(t, http.StatusOK, send("e1", 1, 0, secret), "already processed")
	require.Equal(t, http.StatusOK, send("e2", 2, 1, secret))
	require.Equal(t, http.StatusBadRequest, send("e3", 3, 2, "whsec_"+strings.Repeat("A", 32)), "signed with another secret")

	got := rcv.tally()
	require.Equal(t, int64(7), got.requests)
	require.Equal(t, int64(2), got.downRequests)
	require.Equal(t, 2, got.applied)
	require.Equal(t, 1, got.duplicates)
	require.Equal(t, 1, got.outOfOrder)
	require.Equal(t, 1, got.bad)
	require.False(t, got.first.IsZero())
	require.False(t, got.last.Before(got.first))
}
