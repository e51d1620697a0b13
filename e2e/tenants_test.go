package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// tenantReceiver records what one tenant's receiver was sent, and answers
// 400 (a permanent refusal: a dead letter at once) to the events named
// in refuse.
type tenantReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []contract.Envelope
	refuse map[string]bool
}

func newTenantReceiver(t *testing.T, refuse ...string) *tenantReceiver {
	r := &tenantReceiver{refuse: map[string]bool{}}
	for _, id := range refuse {
		r.refuse[id] = true
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var env contract.Envelope
		if err := json.NewDecoder(req.Body).Decode(&env); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, env)
		refused := r.refuse[env.ID]
		r.mu.Unlock()
		if refused {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// delivered lists the events the receiver took (answered 2xx), as
// correlation/sequence/id, in the order they came.
func (r *tenantReceiver) delivered() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.got {
		if !r.refuse[e.ID] {
			out = append(out, fmt.Sprintf("%s/%d/%s", e.CorrelationID, e.Sequence, e.ID))
		}
	}
	return out
}

// types lists the event types the receiver was sent.
func (r *tenantReceiver) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.got {
		out = append(out, e.Type)
	}
	return out
}

// data lists the payloads the receiver was sent.
func (r *tenantReceiver) data() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.got {
		out = append(out, string(e.Data))
	}
	return out
}

// tenantSide is one tenant of the test: its key, its endpoints and its
// receivers.
type tenantSide struct {
	id       string
	key      string
	rcv      *tenantReceiver
	ops      *tenantReceiver
	endpoint string
	opsEP    string
}

// newTenantSide creates tenant id with a key of every scope a tenant's key
// may hold, an endpoint for its events, and one subscribed to hookflow's
// operational events.
//
// A tenant ID is one test's own: the package's tests share one Temporal
// namespace, so two tests making tenant acme would share the workflow
// acme/sequencer/order-42, left open on the first test's task queue, whose
// worker is gone by the time the second posts.
func (b *bundle) newTenantSide(id string, refuse ...string) *tenantSide {
	b.t.Helper()
	var tn map[string]any
	require.Equal(b.t, http.StatusCreated, b.call(http.MethodPut, "/v1/tenants/"+id, map[string]any{"name": "Tenant " + id}, &tn))
	var k struct {
		Key      string `json:"key"`
		TenantID string `json:"tenant_id"`
	}
	require.Equal(b.t, http.StatusCreated, b.call(http.MethodPost, "/v1/api-keys", map[string]any{
		"name": id + "-backend", "tenant_id": id, "scopes": []string{"events:write", "events:read", "endpoints:write", "dead-letters:write"}}, &k))
	require.Equal(b.t, id, k.TenantID)
	s := &tenantSide{id: id, key: k.Key, rcv: newTenantReceiver(b.t, refuse...), ops: newTenantReceiver(b.t)}
	var ep endpoint
	require.Equal(b.t, http.StatusCreated, b.callAs(s.key, http.MethodPost, "/v1/endpoints", map[string]any{"url": s.rcv.srv.URL, "event_types": []string{"order.*"}}, &ep))
	s.endpoint = ep.ID
	require.Equal(b.t, http.StatusCreated, b.callAs(s.key, http.MethodPost, "/v1/endpoints", map[string]any{"url": s.ops.srv.URL, "event_types": []string{"hookflow.*"}}, &ep))
	s.opsEP = ep.ID
	return s
}

func (s *tenantSide) post(b *bundle, id, corr string, seq int64) int {
	b.t.Helper()
	return b.callAs(s.key, http.MethodPost, "/v1/events", map[string]any{
		"id": id, "correlation_id": corr, "sequence": seq, "type": "order.updated", "data": map[string]any{"tenant": s.id}}, nil)
}

// snapshot is what a tenant's own key reads of its rows: none of another
// tenant's requests may change it.
func (s *tenantSide) snapshot(b *bundle, events ...string) string {
	b.t.Helper()
	var parts []string
	read := func(path string) {
		var v any
		code := b.callAs(s.key, http.MethodGet, path, nil, &v)
		raw, _ := json.Marshal(v)
		parts = append(parts, fmt.Sprintf("%s %d %s", path, code, raw))
	}
	read("/v1/endpoints")
	read("/v1/dead-letters?include=attempts")
	for _, id := range events {
		read("/v1/events/" + id)
	}
	read("/v1/correlations/order-42")
	read("/v1/correlations/only-b")
	return strings.Join(parts, "\n")
}

// TestTenantsReachNothingOfEachOther: tenants A and B share an
// event ID and a correlation ID; each gets its own event, delivered in its
// own order, and A's missing sequence holds back nothing of B's. Then every
// operation of api/openapi.json is aimed by A's key at B's IDs: each
// answers 404 (or, where IDs are the caller's own namespace, acts on A's
// own rows, or refuses a tenant's key by scope), listings and stats show
// only A's, and B's rows read the same before and after. The test fails
// when an operation of the document has no case here.
//
// The tenants are this test's own (b.id): the package's tests share one
// Temporal namespace, where a tenant's workflow IDs and search attributes
// would meet another test's of the same name. Every wait is for an outcome,
// with minutes to spare.
func TestTenantsReachNothingOfEachOther(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	acme, globex := b.id("acme"), b.id("globex")
	a := b.newTenantSide(acme, "evt-bad")
	bb := b.newTenantSide(globex, "evt-bad")

	// The same event ID and correlation in both: each its own.
	for _, s := range []*tenantSide{a, bb} {
		require.Equal(t, http.StatusAccepted, s.post(b, "evt-1", "order-42", 1), s.id)
		require.Equal(t, http.StatusAccepted, s.post(b, "evt-bad", "order-42", 2), s.id)
	}
	// A's order-7 misses its 1; B's order-7 is whole and goes.
	require.Equal(t, http.StatusAccepted, a.post(b, "a7-2", "order-7", 2))
	require.Equal(t, http.StatusAccepted, bb.post(b, "b7-1", "order-7", 1))
	require.Equal(t, http.StatusAccepted, bb.post(b, "b7-2", "order-7", 2))
	// An event and a correlation only B has.
	require.Equal(t, http.StatusAccepted, bb.post(b, "only-b-1", "only-b", 1))

	waitFor(t, 5*time.Minute, "each tenant's deliveries", func() bool {
		return len(a.rcv.delivered()) == 1 && len(bb.rcv.delivered()) == 4
	})
	require.Equal(t, []string{"order-42/1/evt-1"}, a.rcv.delivered(), "A's own; its order-7 waits on its missing 1")
	got := bb.rcv.delivered()
	sort.Strings(got)
	require.Equal(t, []string{"only-b/1/only-b-1", "order-42/1/evt-1", "order-7/1/b7-1", "order-7/2/b7-2"}, got,
		"B's order-7 is not held by A's gap")
	for _, s := range []*tenantSide{a, bb} {
		waitFor(t, 5*time.Minute, s.id+"'s dead letter", func() bool {
			var page struct {
				Items []map[string]any `json:"items"`
			}
			b.callAs(s.key, http.MethodGet, "/v1/dead-letters", nil, &page)
			return len(page.Items) == 1
		})
	}
	// Operational events stay in the endpoint's tenant: each ops endpoint
	// hears of its own tenant's dead letter, not the other's.
	for _, s := range []*tenantSide{a, bb} {
		waitFor(t, 5*time.Minute, s.id+"'s operational event", func() bool { return slices.Contains(s.ops.types(), "hookflow.dead_letter.created") })
	}
	for _, c := range []struct{ s, other *tenantSide }{{a, bb}, {bb, a}} {
		for _, d := range c.s.ops.data() {
			require.Contains(t, d, c.s.endpoint, "%s's operational events are about its own endpoints", c.s.id)
			require.NotContains(t, d, c.other.endpoint)
		}
	}

	// The Web UI: each tenant's workflows under its own IDs and TenantId.
	for _, tenant := range []string{acme, globex} {
		q := fmt.Sprintf("TenantId = '%s' AND CorrelationId = 'order-42' AND WorkflowType = 'EventWorkflow'", tenant)
		waitFor(t, 5*time.Minute, q, func() bool { return len(b.visible(q)) == 2 })
	}
	waitFor(t, 5*time.Minute, "the tenants' own workflow IDs", func() bool {
		return len(b.visible(fmt.Sprintf("WorkflowId = '%s'", contract.EventWorkflowID(acme, "evt-1")))) == 1 &&
			len(b.visible(fmt.Sprintf("WorkflowId = '%s'", contract.SequencerID(globex, "order-42")))) == 1 &&
			len(b.visible(fmt.Sprintf("TenantId = '%s' AND WorkflowType = 'SequencerWorkflow' AND CorrelationId = 'order-42'", globex))) == 1
	})

	// A tenant's recorded histories (workflows/testdata): its event's
	// input names the tenant, and so does its sequencer's, whose load
	// reads the tenant's ledger.
	b.recordHistory(contract.EventWorkflowID(acme, "evt-1"), "event_tenant_released_at_start_history.json")
	b.recordHistory(contract.SequencerID(globex, "order-7"), "sequencer_tenant_two_in_order_history.json")

	before := bb.snapshot(b, "evt-1", "evt-bad", "only-b-1")
	asA := func(method, path string, body any) (int, string) {
		var v any
		code := b.callAs(a.key, method, path, body, &v)
		raw, _ := json.Marshal(v)
		return code, string(raw)
	}
	notFound := func(method, path string, body any) func(t *testing.T) {
		return func(t *testing.T) {
			code, raw := asA(method, path, body)
			require.Equal(t, http.StatusNotFound, code, "%s %s: %s", method, path, raw)
			require.NotContains(t, raw, bb.rcv.srv.URL, "nothing of B's in the answer")
		}
	}
	forbidden := func(method, path string, body any) func(t *testing.T) {
		return func(t *testing.T) {
			code, raw := asA(method, path, body)
			require.Equal(t, http.StatusForbidden, code, "%s %s: %s", method, path, raw)
		}
	}
	onlyA := func(path string, want ...string) func(t *testing.T) {
		return func(t *testing.T) {
			code, raw := asA(http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, code, raw)
			for _, id := range []string{bb.endpoint, bb.opsEP, "only-b-1", "b7-1"} {
				require.NotContains(t, raw, id, "%s shows B's %s", path, id)
			}
			for _, w := range want {
				require.Contains(t, raw, w, path)
			}
		}
	}
	epB, dlB := url.PathEscape(bb.endpoint), "/v1/dead-letters/evt-bad?endpoint_id="+url.QueryEscape(bb.endpoint)
	// bCatalog puts B's own catalog entry, b.only (again: the same
	// content keeps it as it is), and answers its schema as B reads it.
	bCatalog := func(t *testing.T) string {
		t.Helper()
		code := b.callAs(bb.key, http.MethodPut, "/v1/event-types/b.only", map[string]any{"schema": map[string]any{"type": "object"}}, nil)
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, code)
		var e struct {
			Schema  json.RawMessage `json:"schema"`
			Version int             `json:"version"`
		}
		require.Equal(t, http.StatusOK, b.callAs(bb.key, http.MethodGet, "/v1/event-types/b.only", nil, &e))
		require.Equal(t, 1, e.Version)
		return string(e.Schema)
	}
	cases := map[string]func(t *testing.T){
		"endpointList":   onlyA("/v1/endpoints", a.endpoint),
		"endpointCreate": notFound(http.MethodPost, "/v1/endpoints", map[string]any{"url": bb.rcv.srv.URL, "tenant_id": globex}),
		"endpointGet":    notFound(http.MethodGet, "/v1/endpoints/"+epB, nil),
		"endpointUpdate": notFound(http.MethodPatch, "/v1/endpoints/"+epB, map[string]any{"disabled": true}),
		"endpointDelete": notFound(http.MethodDelete, "/v1/endpoints/"+epB, nil),
		"endpointStats":  notFound(http.MethodGet, "/v1/endpoints/"+epB+"/stats", nil),
		// admin's: a tenant's key never holds it.
		"endpointURLChanges":   forbidden(http.MethodGet, "/v1/endpoints/"+epB+"/url-changes", nil),
		"endpointRotateSecret": notFound(http.MethodPost, "/v1/endpoints/"+epB+"/rotate-secret", nil),
		"endpointTest": func(t *testing.T) {
			// B's endpoint is none of A's: nothing stored, nothing sent.
			notFound(http.MethodPost, "/v1/endpoints/"+epB+"/test", nil)(t)
			require.Equal(t, http.StatusNotFound, b.callAs(bb.key, http.MethodGet, "/v1/events/"+store.TestEventID(bb.endpoint, 1), nil, nil))
			// A's own test reaches A's receiver, past A's dead letter in
			// order-42 (a correlation of its own), and B's receiver hears
			// nothing of it.
			code, raw := asA(http.MethodPost, "/v1/endpoints/"+a.endpoint+"/test", nil)
			require.Equal(t, http.StatusAccepted, code, raw)
			waitFor(t, 5*time.Minute, "A's test event", func() bool { return slices.Contains(a.rcv.types(), store.TestEventType) })
			require.NotContains(t, bb.rcv.types(), store.TestEventType)
		},
		"eventCreate": func(t *testing.T) {
			// Naming B's endpoint stores nothing; naming B's tenant is a 404.
			code, raw := asA(http.MethodPost, "/v1/events", map[string]any{"id": "via-b", "correlation_id": "x", "sequence": 1,
				"type": "order.updated", "data": map[string]any{}, "endpoint_id": bb.endpoint})
			require.Equal(t, http.StatusNotFound, code, raw)
			notFound(http.MethodPost, "/v1/events", map[string]any{"id": "via-b", "correlation_id": "x", "sequence": 1,
				"type": "order.updated", "data": map[string]any{}, "tenant_id": globex})(t)
			require.Equal(t, http.StatusNotFound, b.callAs(a.key, http.MethodGet, "/v1/events/via-b", nil, nil))
			require.Equal(t, http.StatusNotFound, b.callAs(bb.key, http.MethodGet, "/v1/events/via-b", nil, nil))
		},
		"eventGet": func(t *testing.T) {
			notFound(http.MethodGet, "/v1/events/only-b-1", nil)(t)
			code, raw := asA(http.MethodGet, "/v1/events/evt-1", nil)
			require.Equal(t, http.StatusOK, code)
			require.Contains(t, raw, a.endpoint, "A's evt-1 is A's own")
			require.NotContains(t, raw, bb.endpoint)
		},
		"eventList": func(t *testing.T) {
			onlyA("/v1/events", "evt-1", "a7-2")(t)
			for _, q := range []string{"endpoint_id=" + url.QueryEscape(bb.endpoint), "correlation_id=only-b"} {
				code, raw := asA(http.MethodGet, "/v1/events?"+q, nil)
				require.Equal(t, http.StatusOK, code, raw)
				require.JSONEq(t, `{"items":[]}`, raw, "B's endpoint and correlation are none of A's")
			}
		},
		"eventTypeList": func(t *testing.T) {
			// Both have order.updated: A's latest is its own, sampled
			// from its own payload.
			onlyA("/v1/event-types", "order.updated", fmt.Sprintf(`"tenant":%q`, acme))(t)
			_, raw := asA(http.MethodGet, "/v1/event-types", nil)
			require.NotContains(t, raw, globex)
		},
		// Catalogs are per tenant: B's entry is none of A's, and a name A
		// puts or imports is A's own, leaving B's as it was.
		"eventTypeGet": func(t *testing.T) {
			bCatalog(t)
			notFound(http.MethodGet, "/v1/event-types/b.only", nil)(t)
		},
		"eventTypeDelete": func(t *testing.T) {
			bCatalog(t)
			notFound(http.MethodDelete, "/v1/event-types/b.only", nil)(t)
		},
		"eventTypePut": func(t *testing.T) {
			bCatalog(t)
			code, raw := asA(http.MethodPut, "/v1/event-types/b.only", map[string]any{"schema": map[string]any{"type": "string"}})
			require.Equal(t, http.StatusCreated, code, raw)
			require.Equal(t, `{"type":"object"}`, bCatalog(t), "B's entry is as B put it")
		},
		"eventTypeImport": func(t *testing.T) {
			code, raw := asA(http.MethodPost, "/v1/event-types/import", map[string]any{"openapi": "3.1.0", "webhooks": map[string]any{
				"a.imported": map[string]any{"post": map[string]any{"requestBody": map[string]any{"content": map[string]any{
					"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}}}}})
			require.Equal(t, http.StatusOK, code, raw)
			require.Equal(t, http.StatusNotFound, b.callAs(bb.key, http.MethodGet, "/v1/event-types/a.imported", nil, nil))
		},
		"eventAttempts": notFound(http.MethodGet, "/v1/events/evt-1/deliveries/"+epB+"/attempts", nil),
		"correlationGet": func(t *testing.T) {
			code, raw := asA(http.MethodGet, "/v1/correlations/order-42", nil)
			require.Equal(t, http.StatusOK, code, raw)
			require.Contains(t, raw, a.endpoint)
			require.NotContains(t, raw, bb.endpoint, "A's order-42 has A's lanes only")
			notFound(http.MethodGet, "/v1/correlations/only-b", nil)(t)
		},
		// Correlation IDs are the producer's own, per tenant: A voiding a
		// sequence of "only-b" voids A's own only-b, which B never sees.
		"correlationSkip": func(t *testing.T) {
			code, raw := asA(http.MethodPost, "/v1/correlations/only-b/skip", map[string]any{"sequences": []int64{2}, "note": "A's own"})
			require.Equal(t, http.StatusOK, code, raw)
		},
		"deadLetterList": onlyA("/v1/dead-letters", a.endpoint),
		"deadLetterReplayBatch": func(t *testing.T) {
			code, raw := asA(http.MethodPost, "/v1/dead-letters/replay?endpoint_id="+url.QueryEscape(bb.endpoint), nil)
			require.Equal(t, http.StatusAccepted, code, raw)
			require.Contains(t, raw, `"replayed":0`, "B's endpoint's dead letters are none of A's")
		},
		"deadLetterGet":    notFound(http.MethodGet, dlB, nil),
		"deadLetterReplay": notFound(http.MethodPost, "/v1/dead-letters/evt-bad/replay", map[string]any{"endpoint_id": bb.endpoint}),
		"deadLetterSkip":   notFound(http.MethodPost, "/v1/dead-letters/evt-bad/skip", map[string]any{"endpoint_id": bb.endpoint}),
		"stats":            onlyA("/v1/stats"),
		"statsEndpoints":   onlyA("/v1/stats/endpoints", a.endpoint),
		"apiKeyCreate":     forbidden(http.MethodPost, "/v1/api-keys", map[string]any{"name": "x", "scopes": []string{"admin"}}),
		"apiKeyList":       forbidden(http.MethodGet, "/v1/api-keys", nil),
		"apiKeyRevoke":     forbidden(http.MethodDelete, "/v1/api-keys/key_x", nil),
		"tenantList":       forbidden(http.MethodGet, "/v1/tenants", nil),
		"tenantGet":        forbidden(http.MethodGet, "/v1/tenants/"+globex, nil),
		"tenantPut":        forbidden(http.MethodPut, "/v1/tenants/"+globex, map[string]any{"name": "taken"}),
		"tenantUpdate":     forbidden(http.MethodPatch, "/v1/tenants/"+globex, map[string]any{"disabled": true}),
		// tenants:write's, the operator's: a tenant's key reads its own
		// stats with GET /v1/stats, and no other tenant's figures at all.
		"tenantStats":  forbidden(http.MethodGet, "/v1/tenants/"+globex+"/stats", nil),
		"statsTenants": forbidden(http.MethodGet, "/v1/stats/tenants", nil),
	}
	// Portal sessions. Opening and revoking them is the
	// operator's (tenants:write): a tenant's key is refused. The code
	// exchange takes no credential, the code being one: A's key with a
	// code that is none of B's gets nothing. GET /v1/session answers A's
	// own.
	for id, c := range map[string]func(t *testing.T){
		"portalSessionCreate":       forbidden(http.MethodPost, "/v1/tenants/"+globex+"/portal-sessions", map[string]any{"actor": "mallory"}),
		"portalSessionRevoke":       forbidden(http.MethodDelete, "/v1/tenants/"+globex+"/portal-sessions/ps_x", nil),
		"portalSessionsRevokeActor": forbidden(http.MethodDelete, "/v1/tenants/"+globex+"/portal-sessions?actor=alice", nil),
		"portalSessionExchange": func(t *testing.T) {
			code, raw := asA(http.MethodPost, "/v1/portal/session", map[string]any{"code": "pc_" + strings.Repeat("A", 43)})
			require.Equal(t, http.StatusUnauthorized, code, raw)
		},
		"sessionGet": func(t *testing.T) {
			code, raw := asA(http.MethodGet, "/v1/session", nil)
			require.Equal(t, http.StatusOK, code, raw)
			require.Contains(t, raw, fmt.Sprintf(`"tenant_id":%q`, acme))
			require.NotContains(t, raw, globex)
		},
	} {
		cases[id] = c
	}
	// The document's operations under /v1, each of which needs a case.
	ops := documentOperations(t)
	for _, id := range ops {
		c, ok := cases[id]
		require.True(t, ok, "operation %s has no cross-tenant case: say what A's key aimed at B's rows gets", id)
		t.Run(id, c)
	}
	require.Len(t, cases, len(ops), "a case for an operation the document no longer has")

	// A's dead-letter replay, single and batch, touched none of B's; and
	// nothing A did changed what B reads.
	require.Equal(t, before, bb.snapshot(b, "evt-1", "evt-bad", "only-b-1"), "B's rows are as they were")
	require.Equal(t, http.StatusAccepted, b.callAs(a.key, http.MethodPost, "/v1/dead-letters/replay", nil, nil))
	require.Equal(t, before, bb.snapshot(b, "evt-1", "evt-bad", "only-b-1"), "A's batch replay left B's dead letter open")

	// An operator key acts on a tenant by naming it; an unknown one is 404.
	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints?tenant_id="+globex, nil, &page))
	require.Len(t, page.Items, 2)
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints", nil, &page))
	require.Empty(t, page.Items, "the operator's default tenant has none")
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/endpoints?tenant_id=nosuch", nil, nil))
	// A tenant's key naming its own tenant is itself; another is 404.
	require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/endpoints?tenant_id="+acme, nil, nil))
	require.Equal(t, http.StatusNotFound, b.callAs(a.key, http.MethodGet, "/v1/endpoints?tenant_id="+globex, nil, nil))

	// A tenant's key takes neither admin nor tenants:write, even from an
	// operator; and a disabled tenant's keys are refused at once.
	for _, sc := range []string{"admin", "tenants:write"} {
		require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/api-keys",
			map[string]any{"name": "too-much", "tenant_id": acme, "scopes": []string{sc}}, nil), sc)
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/tenants/"+acme, map[string]any{"disabled": true}, nil))
	require.Equal(t, http.StatusUnauthorized, b.callAs(a.key, http.MethodGet, "/v1/endpoints", nil, nil))
	require.Equal(t, http.StatusOK, b.callAs(bb.key, http.MethodGet, "/v1/endpoints", nil, nil), "B's keys work on")
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/tenants/"+acme, map[string]any{"disabled": false}, nil))
	require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/endpoints", nil, nil))
}

// TestTenantLimits: a tenant's max_endpoints and max_recovery_window are
// refused past with a problem naming the limit, and its events_per_second
// answers 429, while another tenant posts on.
//
// The tenant is this test's own (b.id), and the posts over its rate go at
// once, from goroutines: a loaded machine that answers each post slowly
// cannot spread them out to within the rate (20 posts against 1 a second
// with bursts of 2 would have to take 18 s to be all accepted).
func TestTenantLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	small := b.id("small")
	require.Equal(t, http.StatusCreated, b.call(http.MethodPut, "/v1/tenants/"+small, map[string]any{
		"limits": map[string]any{"max_endpoints": 1, "max_recovery_window": "1m", "events_per_second": 1}}, nil))
	rcv := newTenantReceiver(t)
	ep := map[string]any{"url": rcv.srv.URL, "tenant_id": small}
	require.Equal(t, http.StatusCreated, b.call(http.MethodPost, "/v1/endpoints", ep, nil))
	var p map[string]any
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/endpoints", ep, &p))
	require.Equal(t, "max_endpoints", p["tenant_limit"], p)
	require.Equal(t, http.StatusCreated, b.call(http.MethodPost, "/v1/endpoints", map[string]any{"url": rcv.srv.URL}, nil), "the default tenant has room")

	var page struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/endpoints?tenant_id="+small, nil, &page))
	require.Len(t, page.Items, 1)
	p = nil
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, "/v1/endpoints/"+page.Items[0].ID+"?tenant_id="+small,
		map[string]any{"recovery_window": "2m"}, &p))
	require.Equal(t, "max_recovery_window", p["tenant_limit"], p)
	require.Equal(t, "recovery_window", p["field"], p)

	post := func(tenant, id string, out *map[string]any) int {
		body := map[string]any{"id": id, "correlation_id": id, "sequence": 1, "type": "order.updated", "data": map[string]any{}}
		if tenant != "" {
			body["tenant_id"] = tenant
		}
		return b.call(http.MethodPost, "/v1/events", body, out)
	}
	const posts = 20
	codes := make([]int, posts)
	problems := make([]map[string]any, posts)
	var wg sync.WaitGroup
	for i := range posts {
		wg.Go(func() { codes[i] = post(small, fmt.Sprint("s-", i), &problems[i]) })
	}
	wg.Wait()
	limited := 0
	for i, code := range codes {
		require.Contains(t, []int{http.StatusAccepted, http.StatusTooManyRequests}, code, "post %d: %v", i, problems[i])
		if code == http.StatusTooManyRequests {
			limited++
			require.Equal(t, "events_per_second", problems[i]["tenant_limit"], problems[i])
		}
	}
	require.Positive(t, limited, "past 1 a second (bursts of 2): %v", codes)
	require.Equal(t, http.StatusAccepted, post("", b.id("default-1"), new(map[string]any)), "another tenant posts on")
}
