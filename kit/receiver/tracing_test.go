package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/receiver"
	"github.com/hookflow/hookflow/kit/webhook"
)

// The Tracer starts a span per delivery, Apply runs in the context it
// returned, and the span hears the event, what came of it and the status
// answered; a delivery refused before its envelope is read is only started
// and ended.
func TestTracerSeesEachDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tr := &fakeTracer{}
	var (
		mu       sync.Mutex
		applyCtx = map[string]any{}
	)
	rc, err := receiver.New(receiver.Config{Secrets: []string{b.secret}}, receiver.Deps{
		Pool: b.pool, Logger: testLogger(t), Tracer: tr,
		Apply: func(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
			mu.Lock()
			applyCtx[ev.ID] = ctx.Value(spanKey{})
			mu.Unlock()
			switch ev.ID {
			case "evt_rejected":
				return fmt.Errorf("unknown order: %w", receiver.ErrRejected)
			case "evt_failing":
				return errors.New("disk on fire")
			}
			return nil
		},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	deliver := func(secret, id string, seq int64) int {
		t.Helper()
		status, _, err := send(srv.URL, secret, id, envelope(id, "order-traced", seq), time.Now())
		require.NoError(t, err)
		return status
	}
	require.Equal(t, http.StatusOK, deliver(b.secret, "evt_applied", 1))
	require.Equal(t, http.StatusOK, deliver(b.secret, "evt_applied", 1))
	require.Equal(t, http.StatusUnprocessableEntity, deliver(b.secret, "evt_rejected", 2))
	require.Equal(t, http.StatusInternalServerError, deliver(b.secret, "evt_failing", 2))
	other, err := webhook.NewSecret()
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, deliver(other, "evt_forged", 2))

	require.Equal(t, []string{
		"start evt_applied", "event evt_applied", "outcome evt_applied applied <nil>", "end evt_applied 200",
		"start evt_applied", "event evt_applied", "outcome evt_applied already_processed <nil>", "end evt_applied 200",
		"start evt_rejected", "event evt_rejected", "outcome evt_rejected rejected <nil>", "end evt_rejected 422",
		"start evt_failing", "event evt_failing", "outcome evt_failing error apply event: disk on fire", "end evt_failing 500",
		"start evt_forged", "end evt_forged 401",
	}, tr.record())
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"evt_applied", "evt_rejected", "evt_failing"} {
		require.Equal(t, id, applyCtx[id], "Apply runs in the context the Tracer started for %s", id)
	}
}

// spanKey marks the context fakeTracer.Start returns with the delivery's
// webhook-id.
type spanKey struct{}

// fakeTracer writes down each call the receiver makes, a line each.
type fakeTracer struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeTracer) add(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeTracer) record() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeTracer) Start(r *http.Request) (context.Context, receiver.Span) {
	id := r.Header.Get(webhook.HeaderID)
	f.add("start %s", id)
	return context.WithValue(r.Context(), spanKey{}, id), fakeSpan{f: f, id: id}
}

type fakeSpan struct {
	f  *fakeTracer
	id string
}

func (s fakeSpan) Event(ev receiver.Event) { s.f.add("event %s", ev.ID) }
func (s fakeSpan) Outcome(outcome string, err error) {
	s.f.add("outcome %s %s %v", s.id, outcome, err)
}
func (s fakeSpan) End(status int) { s.f.add("end %s %d", s.id, status) }
