package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// portalLink is a portal session as its backend got it.
type portalLink struct {
	ID            string    `json:"id"`
	URL           string    `json:"url"`
	ExpiresAt     time.Time `json:"expires_at"`
	CodeExpiresAt time.Time `json:"code_expires_at"`
}

// code is the one-time code in the link's fragment.
func (l portalLink) code(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(l.URL)
	require.NoError(t, err)
	require.Empty(t, u.RawQuery, "the code rides in the fragment, never in a query string")
	code, ok := strings.CutPrefix(u.Fragment, "code=")
	require.True(t, ok, l.URL)
	return code
}

type portalToken struct {
	Token        string    `json:"token"`
	ExpiresAt    time.Time `json:"expires_at"`
	TenantID     string    `json:"tenant_id"`
	Capabilities []string  `json:"capabilities"`
	Actor        string    `json:"actor"`
	EndpointIDs  []string  `json:"endpoint_ids"`
}

type problemBody struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

func problemType(kind string) string { return "https://hookflow.dev/problems/" + kind }

// openPortal opens a portal session of tenant as the operator.
func (b *bundle) openPortal(tenant string, body map[string]any) portalLink {
	b.t.Helper()
	var l portalLink
	require.Equal(b.t, http.StatusCreated, b.call(http.MethodPost, "/v1/tenants/"+tenant+"/portal-sessions", body, &l))
	return l
}

// exchange exchanges a link's code, with no credential.
func (b *bundle) exchange(code string, out any) int {
	b.t.Helper()
	return b.callAs("", http.MethodPost, "/v1/portal/session", map[string]any{"code": code}, out)
}

// portalToken opens a session and exchanges its code.
func (b *bundle) portalToken(tenant string, body map[string]any) (portalLink, portalToken) {
	b.t.Helper()
	l := b.openPortal(tenant, body)
	var tok portalToken
	require.Equal(b.t, http.StatusOK, b.exchange(l.code(b.t), &tok))
	return l, tok
}

// TestPortalSessions (the backend's side of the portal): a tenant's backend
// opens a portal session; its link's code is exchanged once, within its
// minute, for a token that acts on the tenant's /v1 routes with its
// capabilities' scopes, only on its endpoints when it names some, recorded
// as portal:<actor>; revoking it, or its end, refuses it on its next
// request with a problem type of its own.
func TestPortalSessions(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	a := b.newTenantSide("portal-acme", "evt-bad")
	g := b.newTenantSide("portal-globex", "evt-bad")
	for _, s := range []*tenantSide{a, g} {
		require.Equal(t, http.StatusAccepted, s.post(b, "evt-bad", "order-1", 1))
		waitFor(t, time.Minute, s.id+"'s dead letter", func() bool {
			var page struct {
				Items []map[string]any `json:"items"`
			}
			b.callAs(s.key, http.MethodGet, "/v1/dead-letters", nil, &page)
			return len(page.Items) == 1
		})
	}
	expire := func(column, id string) {
		t.Helper()
		_, err := b.store.Pool().Exec(ctx, "UPDATE portal_sessions SET "+column+" = now() - interval '1 second' WHERE id = $1", id)
		require.NoError(t, err)
	}
	refused := func(token, method, path string, body any, kind string) {
		t.Helper()
		var p problemBody
		require.Equal(t, http.StatusUnauthorized, b.callAs(token, method, path, body, &p), path)
		require.Equal(t, problemType(kind), p.Type, p.Detail)
	}

	t.Run("bounds", func(t *testing.T) {
		for _, c := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"actor": "x", "ttl": "4m"}, "ttl"},
			{map[string]any{"actor": "x", "ttl": "25h"}, "ttl"},
			{map[string]any{"actor": "x", "ttl": "forever"}, "ttl"},
			{map[string]any{"actor": "x", "capabilities": []string{"view", "admin"}}, "capabilities"},
			{map[string]any{"actor": "x", "endpoint_ids": []string{a.endpoint, g.endpoint}}, "endpoint_ids"},
			{map[string]any{"actor": "x", "return_url": "javascript:alert(1)"}, "return_url"},
		} {
			var p problemBody
			require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPost, "/v1/tenants/portal-acme/portal-sessions", c.body, &p), "%v", c.body)
			require.Equal(t, c.field, p.Field, p.Detail)
			if c.field == "endpoint_ids" {
				require.Contains(t, p.Detail, g.endpoint, "names the endpoint that is not the tenant's")
				require.NotContains(t, p.Detail, a.endpoint)
			}
		}
		require.Equal(t, http.StatusNotFound, b.call(http.MethodPost, "/v1/tenants/nosuch/portal-sessions", map[string]any{"actor": "x"}, nil))
		// A tenant's key opens no sessions: tenants:write is the operator's.
		require.Equal(t, http.StatusForbidden, b.callAs(a.key, http.MethodPost, "/v1/tenants/portal-acme/portal-sessions", map[string]any{"actor": "x"}, nil))
		// 5m and 24h are in bounds; 1h is the default.
		for ttl, want := range map[string]time.Duration{"5m": 5 * time.Minute, "24h": 24 * time.Hour, "": time.Hour} {
			body := map[string]any{"actor": "x"}
			if ttl != "" {
				body["ttl"] = ttl
			}
			before := time.Now()
			l := b.openPortal("portal-acme", body)
			require.WithinRange(t, l.ExpiresAt, before.Add(want-5*time.Second), time.Now().Add(want+5*time.Second), ttl)
		}
	})

	t.Run("view", func(t *testing.T) {
		l := b.openPortal("portal-acme", map[string]any{"actor": "alice@acme.example", "return_url": "https://app.acme.example/webhooks"})
		require.True(t, strings.HasPrefix(l.URL, b.apiURL+"/portal/portal-acme/#code="), "the link is on the API's own address: %s", l.URL)
		var tok portalToken
		require.Equal(t, http.StatusOK, b.exchange(l.code(t), &tok))
		require.True(t, strings.HasPrefix(tok.Token, "hfp_"), tok.Token)
		require.Equal(t, "portal-acme", tok.TenantID)
		require.Equal(t, []string{"view"}, tok.Capabilities)
		require.Equal(t, l.ExpiresAt.Unix(), tok.ExpiresAt.Unix())
		// The link is good once.
		var p problemBody
		require.Equal(t, http.StatusUnauthorized, b.exchange(l.code(t), &p))
		require.Equal(t, problemType("portal-link-used"), p.Type)
		require.Equal(t, http.StatusUnauthorized, b.exchange("pc_not-one-of-ours", &p))
		require.Equal(t, problemType("unauthorized"), p.Type)

		// Who am I: the tenant, read-only.
		var who struct {
			Kind         string    `json:"kind"`
			Name         string    `json:"name"`
			TenantID     string    `json:"tenant_id"`
			Confined     bool      `json:"confined"`
			Scopes       []string  `json:"scopes"`
			Capabilities []string  `json:"capabilities"`
			ExpiresAt    time.Time `json:"expires_at"`
			ReturnURL    string    `json:"return_url"`
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/session", nil, &who))
		require.Equal(t, "portal", who.Kind)
		require.Equal(t, "portal:alice@acme.example", who.Name)
		require.Equal(t, "portal-acme", who.TenantID)
		require.True(t, who.Confined)
		require.Equal(t, []string{"events:read"}, who.Scopes)
		require.Equal(t, []string{"view"}, who.Capabilities)
		require.Equal(t, "https://app.acme.example/webhooks", who.ReturnURL)

		// It reads the tenant's own, and writes nothing.
		var eps struct {
			Items []endpoint `json:"items"`
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints", nil, &eps))
		require.Len(t, eps.Items, 2)
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/dead-letters/evt-bad?endpoint_id="+url.QueryEscape(a.endpoint), nil, nil))
		for _, w := range []struct{ method, path string }{
			{http.MethodPatch, "/v1/endpoints/" + a.endpoint},
			{http.MethodPost, "/v1/dead-letters/evt-bad/skip"},
			{http.MethodPost, "/v1/events"},
			{http.MethodGet, "/v1/tenants/portal-acme"},
		} {
			var body any
			switch w.method {
			case http.MethodPatch:
				body = map[string]any{"disabled": true}
			case http.MethodPost:
				body = map[string]any{"endpoint_id": a.endpoint}
			}
			if w.path == "/v1/events" {
				body = map[string]any{"id": "from-portal", "correlation_id": "order-1", "sequence": 2, "type": "order.updated", "data": map[string]any{}}
			}
			require.Equal(t, http.StatusForbidden, b.callAs(tok.Token, w.method, w.path, body, &p), "%s %s", w.method, w.path)
			require.Equal(t, problemType("missing-scope"), p.Type)
		}
		// Another tenant's: 404, as an unknown ID, and it cannot name it.
		require.Equal(t, http.StatusNotFound, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints/"+g.endpoint, nil, nil))
		require.Equal(t, http.StatusNotFound, b.callAs(tok.Token, http.MethodGet, "/v1/dead-letters/evt-bad?endpoint_id="+url.QueryEscape(g.endpoint), nil, nil))
		require.Equal(t, http.StatusNotFound, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints?tenant_id=portal-globex", nil, nil))

		// No cache keeps an answer, and no page passes its address on.
		req, err := http.NewRequest(http.MethodGet, b.apiURL+"/v1/session", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
		require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))

		// An API key asks too.
		who.Kind, who.Name, who.TenantID, who.Capabilities = "", "", "", nil
		require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/session", nil, &who))
		require.Equal(t, "key", who.Kind)
		require.Equal(t, "portal-acme", who.TenantID)
		require.Equal(t, "portal-acme-backend", who.Name)
		require.Empty(t, who.Capabilities)
	})

	t.Run("expired link", func(t *testing.T) {
		l := b.openPortal("portal-acme", map[string]any{"actor": "late@acme.example"})
		expire("code_expires_at", l.ID)
		var p problemBody
		require.Equal(t, http.StatusUnauthorized, b.exchange(l.code(t), &p))
		require.Equal(t, problemType("portal-link-expired"), p.Type)
	})

	t.Run("skip as portal actor", func(t *testing.T) {
		_, tok := b.portalToken("portal-acme", map[string]any{"actor": "bob@acme.example", "capabilities": []string{"dead-letters:write"}})
		require.Equal(t, []string{"view", "dead-letters:write"}, tok.Capabilities, "every session views")
		require.Equal(t, http.StatusAccepted, b.callAs(tok.Token, http.MethodPost, "/v1/dead-letters/evt-bad/skip", map[string]any{"endpoint_id": a.endpoint, "note": "refunded"}, nil))
		var dl struct {
			Status    string `json:"status"`
			SkippedBy string `json:"skipped_by"`
		}
		require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/dead-letters/evt-bad?endpoint_id="+url.QueryEscape(a.endpoint), nil, &dl))
		require.Equal(t, "skipped", dl.Status)
		require.Equal(t, "portal:bob@acme.example", dl.SkippedBy)
		// Globex's dead letter of the same event ID is none of its own.
		require.Equal(t, http.StatusNotFound, b.callAs(tok.Token, http.MethodPost, "/v1/dead-letters/evt-bad/skip", map[string]any{"endpoint_id": g.endpoint}, nil))
		require.Equal(t, http.StatusOK, b.callAs(g.key, http.MethodGet, "/v1/dead-letters/evt-bad?endpoint_id="+url.QueryEscape(g.endpoint), nil, &dl))
		require.Equal(t, "open", dl.Status)
	})

	t.Run("secrets", func(t *testing.T) {
		_, manage := b.portalToken("portal-acme", map[string]any{"actor": "carol@acme.example", "capabilities": []string{"endpoints:manage"}})
		require.Equal(t, http.StatusOK, b.callAs(manage.Token, http.MethodPatch, "/v1/endpoints/"+a.opsEP, map[string]any{"timeout": "10s"}, nil))
		var p problemBody
		require.Equal(t, http.StatusForbidden, b.callAs(manage.Token, http.MethodPost, "/v1/endpoints/"+a.opsEP+"/rotate-secret", nil, &p))
		require.Equal(t, problemType("missing-capability"), p.Type)
		require.Equal(t, http.StatusForbidden, b.callAs(manage.Token, http.MethodPost, "/v1/endpoints", map[string]any{"url": a.rcv.srv.URL}, &p))
		require.Equal(t, problemType("missing-capability"), p.Type)
		_, secret := b.portalToken("portal-acme", map[string]any{"actor": "carol@acme.example", "capabilities": []string{"endpoints:manage", "endpoints:secret"}})
		var ep endpoint
		require.Equal(t, http.StatusOK, b.callAs(secret.Token, http.MethodPost, "/v1/endpoints/"+a.opsEP+"/rotate-secret", nil, &ep))
		require.True(t, strings.HasPrefix(ep.Secret, "whsec_"))
	})

	t.Run("limited to endpoints", func(t *testing.T) {
		_, tok := b.portalToken("portal-acme", map[string]any{"actor": "dave@acme.example", "endpoint_ids": []string{a.opsEP},
			"capabilities": []string{"endpoints:manage", "endpoints:secret", "dead-letters:write", "events:test"}})
		require.Equal(t, []string{a.opsEP}, tok.EndpointIDs)
		var eps struct {
			Items []endpoint `json:"items"`
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints", nil, &eps))
		require.Len(t, eps.Items, 1)
		require.Equal(t, a.opsEP, eps.Items[0].ID)
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints/"+a.opsEP, nil, nil))
		// The tenant's other endpoint, and its dead letters, are not there.
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{http.MethodGet, "/v1/endpoints/" + a.endpoint, nil},
			{http.MethodPatch, "/v1/endpoints/" + a.endpoint, map[string]any{"disabled": true}},
			{http.MethodPost, "/v1/endpoints/" + a.endpoint + "/rotate-secret", nil},
			{http.MethodDelete, "/v1/endpoints/" + a.endpoint, nil},
			{http.MethodPost, "/v1/endpoints/" + a.endpoint + "/test", nil},
			{http.MethodGet, "/v1/endpoints/" + a.endpoint + "/stats", nil},
			{http.MethodGet, "/v1/dead-letters/evt-bad?endpoint_id=" + url.QueryEscape(a.endpoint), nil},
			{http.MethodPost, "/v1/dead-letters/evt-bad/replay", map[string]any{"endpoint_id": a.endpoint}},
			// An event sent only to the other endpoint, and its correlation,
			// whose only lane is the other endpoint's.
			{http.MethodGet, "/v1/events/evt-bad", nil},
			{http.MethodGet, "/v1/correlations/order-1", nil},
		} {
			require.Equal(t, http.StatusNotFound, b.callAs(tok.Token, c.method, c.path, c.body, nil), "%s %s", c.method, c.path)
		}
		var dls struct {
			Items []map[string]any `json:"items"`
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/dead-letters?status=skipped", nil, &dls))
		require.Empty(t, dls.Items, "the other endpoint's dead letter is not listed")
		// The event log lists the events routed to its endpoint, with
		// their deliveries there only, and of hookflow's own only those
		// about its endpoint: the notice of the other endpoint's dead
		// letter, routed to it, tells of that endpoint's event, and is
		// none of its.
		var log struct {
			Items []struct {
				ID         string `json:"id"`
				Deliveries []struct {
					EndpointID string `json:"endpoint_id"`
				} `json:"deliveries"`
			} `json:"items"`
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/events", nil, &log))
		for _, it := range log.Items {
			require.NotEqual(t, "evt-bad", it.ID)
			require.NotContains(t, it.ID, a.endpoint, "a notice about the other endpoint")
			for _, d := range it.Deliveries {
				require.Equal(t, a.opsEP, d.EndpointID, it.ID)
			}
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/events?endpoint_id="+url.QueryEscape(a.endpoint), nil, &log))
		require.Empty(t, log.Items)
		// The types seen are those of its endpoint's events only: none.
		var types struct {
			Items []struct {
				Type string `json:"type"`
			} `json:"items"`
		}
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/event-types", nil, &types))
		require.Empty(t, types.Items, "the other endpoint's notices are not its types")
		require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/dead-letters?status=skipped", nil, &dls))
		require.Len(t, dls.Items, 1, "the key sees it")
		require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/events/evt-bad", nil, nil), "the key sees the event")
		require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/correlations/order-1", nil, nil), "and its correlation")
		var p problemBody
		require.Equal(t, http.StatusForbidden, b.callAs(tok.Token, http.MethodPost, "/v1/endpoints", map[string]any{"url": a.rcv.srv.URL}, &p))
		require.Equal(t, problemType("endpoints-limited"), p.Type)
		// Nothing it was refused changed the endpoint.
		var ep struct {
			Disabled bool `json:"disabled"`
		}
		require.Equal(t, http.StatusOK, b.callAs(a.key, http.MethodGet, "/v1/endpoints/"+a.endpoint, nil, &ep))
		require.False(t, ep.Disabled)
	})

	t.Run("revoked and expired", func(t *testing.T) {
		one, tok := b.portalToken("portal-acme", map[string]any{"actor": "erin@acme.example"})
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints", nil, nil))
		var revoked struct {
			ID        string    `json:"id"`
			RevokedAt time.Time `json:"revoked_at"`
		}
		// Another tenant's session ID is not found under this one.
		require.Equal(t, http.StatusNotFound, b.call(http.MethodDelete, "/v1/tenants/portal-globex/portal-sessions/"+one.ID, nil, nil))
		require.Equal(t, http.StatusOK, b.callAs(tok.Token, http.MethodGet, "/v1/endpoints", nil, nil))
		require.Equal(t, http.StatusOK, b.call(http.MethodDelete, "/v1/tenants/portal-acme/portal-sessions/"+one.ID, nil, &revoked))
		require.Equal(t, one.ID, revoked.ID)
		refused(tok.Token, http.MethodGet, "/v1/endpoints", nil, "portal-session-revoked")

		// All of one actor's: the exchanged and the one not yet opened.
		_, t1 := b.portalToken("portal-acme", map[string]any{"actor": "frank@acme.example"})
		unopened := b.openPortal("portal-acme", map[string]any{"actor": "frank@acme.example"})
		_, other := b.portalToken("portal-acme", map[string]any{"actor": "grace@acme.example"})
		var many struct {
			Revoked int      `json:"revoked"`
			IDs     []string `json:"ids"`
		}
		require.Equal(t, http.StatusOK, b.call(http.MethodDelete, "/v1/tenants/portal-acme/portal-sessions?actor="+url.QueryEscape("frank@acme.example"), nil, &many))
		require.Equal(t, 2, many.Revoked)
		require.Contains(t, many.IDs, unopened.ID)
		refused(t1.Token, http.MethodGet, "/v1/session", nil, "portal-session-revoked")
		var p problemBody
		require.Equal(t, http.StatusUnauthorized, b.exchange(unopened.code(t), &p))
		require.Equal(t, problemType("portal-session-revoked"), p.Type)
		require.Equal(t, http.StatusOK, b.callAs(other.Token, http.MethodGet, "/v1/session", nil, nil), "another actor's session stands")

		// A session past its end.
		l, short := b.portalToken("portal-acme", map[string]any{"actor": "heidi@acme.example", "ttl": "5m"})
		require.Equal(t, http.StatusOK, b.callAs(short.Token, http.MethodGet, "/v1/session", nil, nil))
		expire("expires_at", l.ID)
		refused(short.Token, http.MethodGet, "/v1/session", nil, "portal-session-expired")

		// A disabled tenant's sessions are refused as its keys are.
		_, off := b.portalToken("portal-acme", map[string]any{"actor": "ivan@acme.example"})
		require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/tenants/portal-acme", map[string]any{"disabled": true}, nil))
		refused(off.Token, http.MethodGet, "/v1/session", nil, "unauthorized")
		require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/tenants/portal-acme", map[string]any{"disabled": false}, nil))
		require.Equal(t, http.StatusOK, b.callAs(off.Token, http.MethodGet, "/v1/session", nil, nil))
	})

	t.Run("portal origins", func(t *testing.T) {
		var tn struct {
			PortalOrigins []string `json:"portal_origins"`
		}
		require.Equal(t, http.StatusOK, b.call(http.MethodPut, "/v1/tenants/portal-acme", map[string]any{"name": "Tenant portal-acme",
			"portal_origins": []string{"https://App.Acme.example", "http://127.0.0.1:3000"}}, &tn))
		require.Equal(t, []string{"https://app.acme.example", "http://127.0.0.1:3000"}, tn.PortalOrigins)
		require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/tenants/portal-acme", nil, &tn))
		require.Equal(t, []string{"https://app.acme.example", "http://127.0.0.1:3000"}, tn.PortalOrigins)
		var p problemBody
		require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPut, "/v1/tenants/portal-acme", map[string]any{"name": "Tenant portal-acme",
			"portal_origins": []string{"https://app.acme.example/portal"}}, &p))
		require.Equal(t, "portal_origins[0]", p.Field)
	})
}
