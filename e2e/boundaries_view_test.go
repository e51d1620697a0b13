package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// TestLimitedSessionReachesOnlyItsEndpoints: a portal session limited to
// EP1 (with endpoints:manage, dead-letters:write and events:test) is aimed
// at every operation of api/openapi.json, with EP2's rows in the tenant
// beside it: EP2 dead-lettered e5 of secret-corr, with e6 parked behind it
// (a blocked lane), and its hookflow.dead_letter.created went to EP1 too
// (the tenant's key subscribed EP1 to hookflow.*). Each answer names
// nothing of EP2's (its id, secret-corr, e5, e6, the notice), what
// touches EP2 or a correlation with no lane at EP1 is a 404, and the walk
// fails when an operation of the document has no case here.
func TestLimitedSessionReachesOnlyItsEndpoints(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	s := b.newLimitedSide("bounds-view-"+b.prefix, "e5")
	require.Equal(t, http.StatusOK, b.callAs(s.key, http.MethodPatch, "/v1/endpoints/"+s.ep1,
		map[string]any{"event_types": []string{"order.*", "hookflow.*"}}, nil))
	s.postTo(b, s.ep1, "s1", "shared-corr", 1)
	s.postTo(b, s.ep2, "e5", "secret-corr", 1)
	s.postTo(b, s.ep2, "e6", "secret-corr", 2)
	notice := store.OperationalEventID(s.ep2, 1)
	waitFor(t, time.Minute, "e5's dead letter, its notice at EP1 and s1 delivered", func() bool {
		var ev eventState
		if b.callAs(s.key, http.MethodGet, "/v1/events/"+notice, nil, &ev) != http.StatusOK || !slices.ContainsFunc(ev.Deliveries,
			func(d struct {
				EndpointID string          `json:"endpoint_id"`
				Attempts   []store.Attempt `json:"attempts"`
			}) bool {
				return d.EndpointID == s.ep1
			}) {
			return false
		}
		var s1 eventState
		b.callAs(s.key, http.MethodGet, "/v1/events/s1", nil, &s1)
		return s1.State == contract.StateDelivered
	})
	secrets := []string{s.ep2, s.opsEP, "secret-corr", `"e5"`, `"e6"`, notice}

	as := func(method, path string, body any) (int, string) {
		var v any
		code := b.callAs(s.session, method, path, body, &v)
		raw, _ := json.Marshal(v)
		return code, string(raw)
	}
	clean := func(t *testing.T, what, raw string) {
		t.Helper()
		for _, x := range secrets {
			require.NotContains(t, raw, x, "%s names EP2's %s", what, x)
		}
	}
	status := func(want int, method, path string, body any) func(t *testing.T) {
		return func(t *testing.T) {
			// A refusal names what was asked, and nothing else.
			code, raw := as(method, path, body)
			require.Equal(t, want, code, "%s %s: %s", method, path, raw)
		}
	}
	notFound := func(method, path string, body any) func(t *testing.T) {
		return status(http.StatusNotFound, method, path, body)
	}
	forbidden := func(method, path string, body any) func(t *testing.T) {
		return status(http.StatusForbidden, method, path, body)
	}
	only := func(path string, want ...string) func(t *testing.T) {
		return func(t *testing.T) {
			code, raw := as(http.MethodGet, path, nil)
			require.Equal(t, http.StatusOK, code, raw)
			clean(t, path, raw)
			for _, w := range want {
				require.Contains(t, raw, w, path)
			}
		}
	}
	ep2, dl2 := url.PathEscape(s.ep2), "/v1/dead-letters/e5?endpoint_id="+url.QueryEscape(s.ep2)
	cases := map[string]func(t *testing.T){
		"endpointList":   only("/v1/endpoints", s.ep1),
		"endpointCreate": forbidden(http.MethodPost, "/v1/endpoints", map[string]any{"url": s.rcv.srv.URL}),
		"endpointGet":    notFound(http.MethodGet, "/v1/endpoints/"+ep2, nil),
		"endpointUpdate": func(t *testing.T) {
			notFound(http.MethodPatch, "/v1/endpoints/"+ep2, map[string]any{"disabled": true})(t)
			// Its own endpoint takes no notice of the others'.
			var p problemBody
			require.Equal(t, http.StatusUnprocessableEntity, b.callAs(s.session, http.MethodPatch, "/v1/endpoints/"+s.ep1,
				map[string]any{"event_types": []string{"hookflow.*"}}, &p), p.Detail)
			require.Equal(t, "event_types", p.Field)
		},
		"endpointDelete":       notFound(http.MethodDelete, "/v1/endpoints/"+ep2, nil),
		"endpointStats":        notFound(http.MethodGet, "/v1/endpoints/"+ep2+"/stats", nil),
		"endpointURLChanges":   forbidden(http.MethodGet, "/v1/endpoints/"+ep2+"/url-changes", nil),
		"endpointRotateSecret": forbidden(http.MethodPost, "/v1/endpoints/"+ep2+"/rotate-secret", nil),
		"endpointTest":         notFound(http.MethodPost, "/v1/endpoints/"+ep2+"/test", nil),
		"eventCreate": forbidden(http.MethodPost, "/v1/events", map[string]any{"id": "x1", "correlation_id": "secret-corr", "sequence": 3,
			"type": "order.updated", "data": map[string]any{}}),
		"eventGet": func(t *testing.T) {
			notFound(http.MethodGet, "/v1/events/e5", nil)(t)
			notFound(http.MethodGet, "/v1/events/"+notice, nil)(t)
			only("/v1/events/s1", s.ep1)(t)
		},
		"eventList": func(t *testing.T) {
			only("/v1/events", "s1")(t)
			for _, q := range []string{"endpoint_id=" + url.QueryEscape(s.ep2), "correlation_id=secret-corr", "type=hookflow.dead_letter.created"} {
				code, raw := as(http.MethodGet, "/v1/events?"+q, nil)
				require.Equal(t, http.StatusOK, code, raw)
				require.JSONEq(t, `{"items":[]}`, raw, q)
			}
		},
		"eventTypeList": func(t *testing.T) {
			only("/v1/event-types", "order.updated")(t)
			_, raw := as(http.MethodGet, "/v1/event-types", nil)
			require.NotContains(t, raw, "hookflow.dead_letter.created")
		},
		// The catalog judges every event of the tenant: the session reads
		// it and changes nothing in it.
		"eventTypeGet": func(t *testing.T) {
			require.Equal(t, http.StatusCreated, b.callAs(s.key, http.MethodPut, "/v1/event-types/catalogued.type", map[string]any{"schema": map[string]any{}}, nil))
			only("/v1/event-types/catalogued.type", "catalogued.type")(t)
		},
		"eventTypePut":    forbidden(http.MethodPut, "/v1/event-types/order.updated", map[string]any{"schema": map[string]any{"type": "object"}}),
		"eventTypeDelete": forbidden(http.MethodDelete, "/v1/event-types/order.updated", nil),
		"eventTypeImport": forbidden(http.MethodPost, "/v1/event-types/import", map[string]any{"openapi": "3.1.0", "webhooks": map[string]any{}}),
		"eventAttempts":   notFound(http.MethodGet, "/v1/events/e5/deliveries/"+ep2+"/attempts", nil),
		"correlationGet": func(t *testing.T) {
			notFound(http.MethodGet, "/v1/correlations/secret-corr", nil)(t)
			notFound(http.MethodGet, "/v1/correlations/"+url.PathEscape(contract.OperationalCorrelation(s.ep2)), nil)(t)
			only("/v1/correlations/shared-corr", s.ep1)(t)
		},
		"correlationSkip": notFound(http.MethodPost, "/v1/correlations/secret-corr/skip", map[string]any{"sequences": []int64{3}}),
		"deadLetterList":  only("/v1/dead-letters"),
		"deadLetterReplayBatch": func(t *testing.T) {
			code, raw := as(http.MethodPost, "/v1/dead-letters/replay?endpoint_id="+url.QueryEscape(s.ep2), nil)
			require.Equal(t, http.StatusAccepted, code, raw)
			require.Contains(t, raw, `"replayed":0`)
		},
		"deadLetterGet":    notFound(http.MethodGet, dl2, nil),
		"deadLetterReplay": notFound(http.MethodPost, "/v1/dead-letters/e5/replay", map[string]any{"endpoint_id": s.ep2}),
		"deadLetterSkip":   notFound(http.MethodPost, "/v1/dead-letters/e5/skip", map[string]any{"endpoint_id": s.ep2}),
		"stats": func(t *testing.T) {
			// The cleaner's run is every tenant's: the operator's alone.
			_, err := b.store.Pool().Exec(context.Background(), `INSERT INTO cleaner_runs (started_at, finished_at, payloads_pruned, attempts_deleted, keys_deleted)
				VALUES (now(), now(), 7, 7, 7) ON CONFLICT (id) DO NOTHING`)
			require.NoError(t, err)
			only("/v1/stats")(t)
			for _, tok := range []string{s.session, s.key} {
				var st map[string]any
				require.Equal(t, http.StatusOK, b.callAs(tok, http.MethodGet, "/v1/stats", nil, &st))
				require.NotContains(t, st, "cleaner")
			}
			var st map[string]any
			require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats", nil, &st))
			require.Contains(t, st, "cleaner")
		},
		"statsEndpoints":            only("/v1/stats/endpoints", s.ep1),
		"apiKeyCreate":              forbidden(http.MethodPost, "/v1/api-keys", map[string]any{"name": "x", "scopes": []string{"events:read"}}),
		"apiKeyList":                forbidden(http.MethodGet, "/v1/api-keys", nil),
		"apiKeyRevoke":              forbidden(http.MethodDelete, "/v1/api-keys/key_x", nil),
		"tenantList":                forbidden(http.MethodGet, "/v1/tenants", nil),
		"tenantGet":                 forbidden(http.MethodGet, "/v1/tenants/"+s.id, nil),
		"tenantPut":                 forbidden(http.MethodPut, "/v1/tenants/"+s.id, map[string]any{"name": "taken"}),
		"tenantUpdate":              forbidden(http.MethodPatch, "/v1/tenants/"+s.id, map[string]any{"disabled": true}),
		"tenantStats":               forbidden(http.MethodGet, "/v1/tenants/"+s.id+"/stats", nil),
		"statsTenants":              forbidden(http.MethodGet, "/v1/stats/tenants", nil),
		"portalSessionCreate":       forbidden(http.MethodPost, "/v1/tenants/"+s.id+"/portal-sessions", map[string]any{"actor": "mallory"}),
		"portalSessionRevoke":       forbidden(http.MethodDelete, "/v1/tenants/"+s.id+"/portal-sessions/ps_x", nil),
		"portalSessionsRevokeActor": forbidden(http.MethodDelete, "/v1/tenants/"+s.id+"/portal-sessions?actor=alice", nil),
		"portalSessionExchange":     status(http.StatusUnauthorized, http.MethodPost, "/v1/portal/session", map[string]any{"code": "pc_" + strings.Repeat("A", 43)}),
		"sessionGet":                only("/v1/session", s.ep1),
	}
	for _, id := range documentOperations(t) {
		c, ok := cases[id]
		require.True(t, ok, "operation %s has no limited-session case: say what a session limited to EP1 aimed at EP2 gets", id)
		t.Run(id, c)
	}
	require.Len(t, cases, len(documentOperations(t)), "a case for an operation the document no longer has")
}

// documentOperations are the operationIds of api/openapi.json under /v1,
// sorted.
func documentOperations(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../api/openapi.json")
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	var ops []string
	for path, item := range doc.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for _, o := range item {
			var op struct {
				ID string `json:"operationId"`
			}
			if json.Unmarshal(o, &op) == nil && op.ID != "" {
				ops = append(ops, op.ID)
			}
		}
	}
	sort.Strings(ops)
	return ops
}
