package conformance_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/conformance"
	"github.com/hookflow/hookflow/kit/webhook"
)

// TestCheckerCanFail points the checker at a receiver that answers 200 to
// anything, signed or not: the signature cases, at least, must fail.
func TestCheckerCanFail(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"applied"}`))
	}))
	t.Cleanup(srv.Close)
	secret, err := webhook.NewSecret()
	require.NoError(t, err)

	report, err := conformance.Run(context.Background(), conformance.Config{URL: srv.URL, Secrets: []string{secret}, CorrelationPrefix: "broken"})
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, report.Print(&out))
	t.Log("\n" + out.String())
	require.False(t, report.OK())

	passed := map[string]bool{}
	for _, res := range report.Results {
		passed[res.Name] = res.Passed
	}
	for _, name := range []string{"tampered_body", "expired_timestamp", "wrong_secret", "gap_then_fill", "previous_gap_then_fill"} {
		require.False(t, passed[name], "%s must fail against a receiver that checks nothing", name)
	}
	require.True(t, passed["exact_duplicate"], "what it cannot see from outside still passes")
}

func TestRunRejectsBadConfig(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	for _, cfg := range []conformance.Config{
		{URL: "", Secrets: []string{secret}},
		{URL: "ftp://example.com", Secrets: []string{secret}},
		{URL: "http://example.com/webhook"},
		{URL: "http://example.com/webhook", Secrets: []string{"whsec_short"}},
		{URL: "http://example.com/webhook", Secrets: []string{secret}, CorrelationPrefix: "no.dots"},
	} {
		_, err := conformance.Run(context.Background(), cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

// orderRule decides, from the correlation's cursor, whether a new event
// applies ("apply"), waits ("park") or never will ("conflict").
type orderRule func(cursor int64, ev ruleEvent) string

type ruleEvent struct {
	ID               string  `json:"id"`
	EndpointID       string  `json:"endpoint_id"`
	CorrelationID    string  `json:"correlation_id"`
	Sequence         int64   `json:"sequence"`
	PreviousSequence int64   `json:"previous_sequence"`
	SkippedSequences []int64 `json:"skipped_sequences"`
}

// contractRule is the wire contract's: apply on the cursor at
// previous_sequence, or at a sequence the event lists as skipped.
func contractRule(cursor int64, ev ruleEvent) string {
	switch {
	case cursor == ev.PreviousSequence, cursor > ev.PreviousSequence && slices.Contains(ev.SkippedSequences, cursor):
		return "apply"
	case ev.PreviousSequence > cursor:
		return "park"
	}
	return "conflict"
}

// strictRule compares the cursor with previous_sequence only.
func strictRule(cursor int64, ev ruleEvent) string {
	switch {
	case cursor == ev.PreviousSequence:
		return "apply"
	case ev.PreviousSequence > cursor:
		return "park"
	}
	return "conflict"
}

// successorRule ignores previous_sequence: it waits for sequence-1 unless
// that one is listed as skipped.
func successorRule(cursor int64, ev ruleEvent) string {
	prev := ev.Sequence - 1
	for prev > cursor && slices.Contains(ev.SkippedSequences, prev) {
		prev--
	}
	if prev == cursor {
		return "apply"
	}
	return "park"
}

// laneOf names the lane whose cursor and dedup an event goes by.
type laneOf func(ev ruleEvent) string

// contractLane is the contract's: (endpoint_id, correlation_id).
func contractLane(ev ruleEvent) string { return ev.EndpointID + "/" + ev.CorrelationID }

// correlationLane keeps one cursor per correlation, whatever the endpoint.
func correlationLane(ev ruleEvent) string { return ev.CorrelationID }

// ruleReceiver is an in-memory receiver that verifies signatures, dedups by
// event ID and orders by rule, both per lane.
func ruleReceiver(t *testing.T, secret string, rule orderRule, lane laneOf) string {
	var mu sync.Mutex
	seen, cursors := map[string]bool{}, map[string]int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.VerifyHeader([]string{secret}, r.Header, body, time.Now(), webhook.DefaultTolerance); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev ruleEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		key := lane(ev)
		cursor := cursors[key]
		switch {
		case seen[key+"/"+ev.ID]:
			w.WriteHeader(http.StatusOK)
		case ev.Sequence <= cursor:
			w.WriteHeader(http.StatusConflict)
		default:
			switch rule(cursor, ev) {
			case "apply":
				seen[key+"/"+ev.ID], cursors[key] = true, ev.Sequence
				w.WriteHeader(http.StatusOK)
			case "park":
				w.WriteHeader(http.StatusAccepted)
			default:
				w.WriteHeader(http.StatusConflict)
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestOrderCases runs the checker against receivers that differ only in
// their order rule: the contract's passes every case, and each rule that
// falls short of it fails exactly the cases that show where.
func TestOrderCases(t *testing.T) {
	t.Parallel()
	sparse := []string{"sparse_sequences", "previous_gap_then_fill", "sparse_duplicate", "skipped_after_previous"}
	for _, c := range []struct {
		name   string
		rule   orderRule
		lane   laneOf
		failed []string
	}{
		{"contract", contractRule, contractLane, nil},
		{"previous only", strictRule, contractLane, []string{"skipped_but_applied"}},
		{"sequence-1", successorRule, contractLane, append(sparse, "two_endpoints_apart")},
		{"one cursor per correlation", contractRule, correlationLane, []string{"two_endpoints_apart"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			secret, err := webhook.NewSecret()
			require.NoError(t, err)
			report, err := conformance.Run(context.Background(), conformance.Config{URL: ruleReceiver(t, secret, c.rule, c.lane), Secrets: []string{secret}})
			require.NoError(t, err)
			var out strings.Builder
			require.NoError(t, report.Print(&out))
			t.Log("\n" + out.String())
			var failed []string
			for _, res := range report.Results {
				if !res.Passed {
					failed = append(failed, res.Name)
				}
			}
			require.Equal(t, c.failed, failed)
		})
	}
}
