package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/webhook"
)

// ledgerReceiver is a receiver written against the wire contract, with a
// ledger the tests read: what was applied, in what order, and every breach
// of the contract it saw. Faults can be injected per request.
type ledgerReceiver struct {
	t      *testing.T
	secret string
	srv    *httptest.Server

	mu         sync.Mutex
	applied    map[string][]int64 // correlation → sequences applied, in order
	appliedAt  map[string]time.Time
	seen       map[string]bool // event ids applied
	requests   map[string]int  // event id → requests received
	violations []string
	// fault decides, per request, what to do before normal handling:
	// "" (none), "503", "drop-after-commit", "hold-after-commit", "410",
	// "401", "400", "down".
	fault func(ev contract.Envelope, n int) string
	// committed gets the id of an event held after its commit
	// ("hold-after-commit"); the request is answered (its connection cut)
	// once release is closed.
	committed chan string
	release   chan struct{}
	// headers, when set, sees every request's headers (under the lock).
	headers func(id string, h http.Header)
}

func newLedgerReceiver(t *testing.T) *ledgerReceiver {
	r := &ledgerReceiver{t: t, applied: map[string][]int64{}, appliedAt: map[string]time.Time{}, seen: map[string]bool{}, requests: map[string]int{},
		committed: make(chan string, 16), release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *ledgerReceiver) URL() string { return r.srv.URL + "/webhook" }

func (r *ledgerReceiver) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *ledgerReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev contract.Envelope
	if err := json.Unmarshal(body, &ev); err != nil {
		r.mu.Lock()
		r.violate("undecodable body: %s", body)
		r.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id, tsHeader := req.Header.Get(webhook.HeaderID), req.Header.Get(webhook.HeaderTimestamp)
	ts, _ := strconv.ParseInt(tsHeader, 10, 64)
	want, _ := webhook.Sign([]string{r.secret}, id, ts, body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !containsSig(req.Header.Get(webhook.HeaderSignature), want) {
		r.violate("bad signature on %s", id)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if id != ev.ID {
		r.violate("webhook-id %s differs from envelope id %s", id, ev.ID)
	}
	if ev.EndpointID == "" {
		r.violate("envelope %s names no endpoint_id", id)
	}
	if d := time.Since(time.Unix(ts, 0)); d > time.Minute || d < -time.Minute {
		r.violate("stale webhook-timestamp on %s: %s", id, d)
	}
	r.requests[id]++
	if r.headers != nil {
		r.headers(id, req.Header)
	}
	fault := ""
	if r.fault != nil {
		fault = r.fault(ev, r.requests[id])
	}
	switch fault {
	case "503":
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case "410":
		w.WriteHeader(http.StatusGone)
		return
	case "401":
		w.WriteHeader(http.StatusUnauthorized)
		return
	case "400":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "rejected by test")
		return
	case "down":
		// As if nothing listened: the connection is cut without an answer.
		hijackClose(w)
		return
	}
	if r.seen[ev.ID] {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"status":"already_processed"}`)
		return
	}
	applied := r.applied[ev.CorrelationID]
	last := int64(0)
	if len(applied) > 0 {
		last = applied[len(applied)-1]
	}
	// The contract's rule: the cursor stands at previous_sequence, or at a
	// sequence the sender skipped after it (applied before its answer was
	// lost). hookflow releases an event only once that holds, so anything
	// else is a breach.
	follows := last == ev.PreviousSequence || last > ev.PreviousSequence && slices.Contains(ev.SkippedSequences, last)
	if ev.Sequence <= last || !follows {
		r.violate("out of order on %s: got sequence %d (previous_sequence %d, skipped %v) after %d",
			ev.CorrelationID, ev.Sequence, ev.PreviousSequence, ev.SkippedSequences, last)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	for _, sk := range ev.SkippedSequences {
		if sk <= ev.PreviousSequence || sk >= ev.Sequence {
			r.violate("skipped sequence %d of %s outside (%d, %d)", sk, ev.CorrelationID, ev.PreviousSequence, ev.Sequence)
		}
	}
	r.applied[ev.CorrelationID] = append(applied, ev.Sequence)
	r.seen[ev.ID] = true
	r.appliedAt[ev.ID] = time.Now()
	if fault == "hold-after-commit" {
		// Committed; the sender hears nothing until the test lets go.
		r.mu.Unlock()
		r.committed <- ev.ID
		<-r.release
		r.mu.Lock()
		hijackClose(w)
		return
	}
	if fault == "drop-after-commit" {
		// Committed, but the sender never hears so: it must retry and be told
		// "already processed", not apply twice.
		hijackClose(w)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"status":"applied"}`)
}

func hijackClose(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func containsSig(header, want string) bool {
	for _, s := range splitFields(header) {
		if s == want {
			return true
		}
	}
	return false
}

func splitFields(s string) []string {
	var out []string
	start := -1
	for i, c := range s {
		if c == ' ' {
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

func (r *ledgerReceiver) snapshot() (map[string][]int64, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int64, len(r.applied))
	for k, v := range r.applied {
		out[k] = append([]int64(nil), v...)
	}
	return out, append([]string(nil), r.violations...)
}

func (r *ledgerReceiver) requestsFor(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[id]
}
