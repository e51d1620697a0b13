package e2e

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
)

// recordedLog is a logger that passes every record on to the test's log
// and keeps its message, for a test that a failure was made visible.
type recordedLog struct {
	slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newRecordedLog(t *testing.T) (*slog.Logger, func() []string) {
	r := recordedLog{Handler: testenv.Logger(t).Handler(), mu: &sync.Mutex{}, msgs: &[]string{}}
	return slog.New(r), func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Clone(*r.msgs)
	}
}

func (r recordedLog) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	*r.msgs = append(*r.msgs, rec.Message)
	r.mu.Unlock()
	return r.Handler.Handle(ctx, rec)
}

func (r recordedLog) WithAttrs(a []slog.Attr) slog.Handler {
	return recordedLog{Handler: r.Handler.WithAttrs(a), mu: r.mu, msgs: r.msgs}
}

func (r recordedLog) WithGroup(n string) slog.Handler {
	return recordedLog{Handler: r.Handler.WithGroup(n), mu: r.mu, msgs: r.msgs}
}

// limitedSide is a tenant with two endpoints of order.* (EP1, which takes
// everything, and EP2, whose receiver refuses the events named), and a
// portal session limited to EP1 with every capability that writes.
type limitedSide struct {
	*tenantSide
	ep1, ep2 string
	session  string
}

func (b *bundle) newLimitedSide(tenant string, refuse ...string) *limitedSide {
	b.t.Helper()
	s := &limitedSide{tenantSide: b.newTenantSide(tenant, refuse...)}
	s.ep2 = s.endpoint
	rcv := newTenantReceiver(b.t)
	var ep endpoint
	require.Equal(b.t, http.StatusCreated, b.callAs(s.key, http.MethodPost, "/v1/endpoints",
		map[string]any{"url": rcv.srv.URL, "event_types": []string{"order.*"}}, &ep))
	s.ep1 = ep.ID
	_, tok := b.portalToken(tenant, map[string]any{"actor": "bob@" + tenant + ".example", "endpoint_ids": []string{s.ep1},
		"capabilities": []string{"endpoints:manage", "dead-letters:write", "events:test"}})
	s.session = tok.Token
	return s
}

// postTo posts an event addressed to one endpoint of the tenant.
func (s *limitedSide) postTo(b *bundle, endpointID, id, corr string, seq int64) {
	b.t.Helper()
	require.Equal(b.t, http.StatusAccepted, b.callAs(s.key, http.MethodPost, "/v1/events", map[string]any{
		"id": id, "correlation_id": corr, "sequence": seq, "type": "order.updated", "endpoint_id": endpointID, "data": map[string]any{}}, nil))
}

// TestVoidsStayInTheirLane: POST /v1/correlations/{id}/skip voids only
// what a producer could have lost. A hookflow: correlation (an endpoint's
// operational or test events) is refused whoever asks, naming the field;
// a sequence more than store.MaxVoidAhead past the highest the correlation
// holds, or near 2^63, is refused naming sequences; a session limited to
// EP1 finds a correlation with no lane at EP1 not found, and the
// producer's later events of it are accepted and delivered. Nothing of a
// refused void is stored.
func TestVoidsStayInTheirLane(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	s := b.newLimitedSide("bounds-void-" + b.prefix)
	s.postTo(b, s.ep2, "secret-1", "secret-corr", 1)
	s.postTo(b, s.ep1, "shared-1", "shared-corr", 1)
	waitFor(t, time.Minute, "the first events delivered", func() bool {
		return len(s.rcv.delivered()) == 1
	})

	skip := func(token, corr string, seqs ...int64) (int, problemBody) {
		t.Helper()
		var p problemBody
		code := b.callAs(token, http.MethodPost, "/v1/correlations/"+url.PathEscape(corr)+"/skip", map[string]any{"sequences": seqs, "note": "lost"}, &p)
		return code, p
	}
	for _, corr := range []string{contract.OperationalCorrelation(s.ep2), store.TestCorrelation(s.ep2), contract.OperationalCorrelation(s.ep1)} {
		for _, token := range []string{s.session, s.key, b.cfg.APIToken} {
			code, p := skip(token, corr, 2, math.MaxInt64)
			require.Equal(t, http.StatusUnprocessableEntity, code, "%s: %s", corr, p.Detail)
			require.Equal(t, "correlation_id", p.Field)
		}
	}
	code, p := skip(s.session, "secret-corr", 2, 3)
	require.Equal(t, http.StatusNotFound, code, "a correlation with no lane at the session's endpoints: %s", p.Detail)
	code, p = skip(s.key, "shared-corr", 2+store.MaxVoidAhead)
	require.Equal(t, http.StatusUnprocessableEntity, code, p.Detail)
	require.Equal(t, "sequences", p.Field)
	code, p = skip(s.session, "shared-corr", math.MaxInt64)
	require.Equal(t, http.StatusUnprocessableEntity, code, p.Detail)
	require.Equal(t, "sequences", p.Field)
	code, p = skip(s.key, "never-posted", 1+store.MaxVoidAhead)
	require.Equal(t, http.StatusUnprocessableEntity, code, p.Detail)
	require.Equal(t, "sequences", p.Field)

	// What the producer posts next is accepted and delivered: none of the
	// refused voids took its number.
	s.postTo(b, s.ep2, "secret-2", "secret-corr", 2)
	s.postTo(b, s.ep2, "secret-3", "secret-corr", 3)
	waitFor(t, time.Minute, "secret-corr's 2 and 3 delivered at EP2", func() bool {
		return len(s.rcv.delivered()) == 3
	})
	var dl struct {
		Items []map[string]any `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.callAs(s.key, http.MethodGet, "/v1/dead-letters", nil, &dl))
	require.Empty(t, dl.Items)
	require.Equal(t, http.StatusNotFound, b.callAs(s.key, http.MethodGet, "/v1/events/"+contract.VoidedID(contract.OperationalCorrelation(s.ep2), math.MaxInt64), nil, nil))

	// Within its lane and its reach, the session voids as a key does.
	var voided struct {
		Voided   []int64 `json:"voided"`
		VoidedBy string  `json:"voided_by"`
	}
	require.Equal(t, http.StatusOK, b.callAs(s.session, http.MethodPost, "/v1/correlations/shared-corr/skip",
		map[string]any{"sequences": []int64{2, 1 + store.MaxVoidAhead}}, &voided))
	require.Equal(t, []int64{2, 1 + store.MaxVoidAhead}, voided.Voided)
}

// TestDeadLetterWrittenWhenItsNoticeCannotBe: EP2's operational
// correlation holds 2^63-1 (as a void could once put there), so its next
// hookflow.dead_letter.created has no sequence left. EP2's refused event
// becomes a dead letter all the same, an operator skips it, and the lost
// notice is logged.
func TestDeadLetterWrittenWhenItsNoticeCannotBe(t *testing.T) {
	t.Parallel()
	logger, logged := newRecordedLog(t)
	b := setup(t, options{logger: logger})
	s := b.newLimitedSide("bounds-notice-"+b.prefix, "evt-bad")
	_, err := b.store.Pool().Exec(context.Background(), `INSERT INTO correlations (tenant_id, correlation_id, high_water) VALUES ($1, $2, $3)
		ON CONFLICT (tenant_id, correlation_id) DO UPDATE SET high_water = EXCLUDED.high_water`,
		s.id, contract.OperationalCorrelation(s.ep2), int64(math.MaxInt64))
	require.NoError(t, err)
	s.postTo(b, s.ep2, "evt-bad", "order-1", 1)
	var dl struct {
		Items []struct {
			EventID    string `json:"event_id"`
			EndpointID string `json:"endpoint_id"`
		} `json:"items"`
	}
	waitFor(t, 2*time.Minute, "EP2's dead letter", func() bool {
		require.Equal(t, http.StatusOK, b.callAs(s.key, http.MethodGet, "/v1/dead-letters", nil, &dl))
		return len(dl.Items) == 1
	})
	require.Equal(t, s.ep2, dl.Items[0].EndpointID)
	require.Contains(t, logged(), "operational event dropped")
	require.Contains(t, []int{http.StatusOK, http.StatusAccepted},
		b.callAs(s.key, http.MethodPost, "/v1/dead-letters/evt-bad/skip", map[string]any{"endpoint_id": s.ep2}, nil))
	s.postTo(b, s.ep2, "evt-2", "order-1", 2)
	waitFor(t, time.Minute, "order-1's 2 delivered after the skip", func() bool {
		return slices.ContainsFunc(s.rcv.delivered(), func(d string) bool { return d == "order-1/2/evt-2" })
	})
}
