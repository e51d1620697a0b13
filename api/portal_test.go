package api

import (
	"net/http"
	"testing"
	"time"

	must "github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
)

// TestCapabilityScopes: each capability grants the scopes of the table and
// no other, every session reads, and none grants what reaches beyond the
// tenant or publishes.
func TestCapabilityScopes(t *testing.T) {
	for _, c := range []struct {
		caps []Capability
		want []Scope
	}{
		{[]Capability{CapView}, []Scope{ScopeEventsRead}},
		{[]Capability{CapView, CapEndpointsManage}, []Scope{ScopeEventsRead, ScopeEndpointsWrite}},
		{[]Capability{CapView, CapEndpointsSecret}, []Scope{ScopeEventsRead}},
		{[]Capability{CapDeadLettersWrite}, []Scope{ScopeEventsRead, ScopeDeadLettersWrite}},
		{[]Capability{CapView, CapEventsTest}, []Scope{ScopeEventsTest, ScopeEventsRead}},
		{[]Capability{CapEndpointsManage, CapDeadLettersWrite, CapEndpointsSecret, CapView},
			[]Scope{ScopeEventsRead, ScopeEndpointsWrite, ScopeDeadLettersWrite}},
	} {
		must.Equal(t, c.want, scopesOf(c.caps), "%v", c.caps)
	}
	for cap, scopes := range capabilityScopes {
		must.Contains(t, scopes, ScopeEventsRead, "%s views", cap)
		for _, sc := range scopes {
			must.Contains(t, tenantScopes, sc, "%s grants only what a tenant's key may hold", cap)
			must.NotEqual(t, ScopeEventsWrite, sc, "%s does not publish into the tenant's correlations", cap)
		}
	}
	must.Len(t, capabilityScopes, 5, "every capability of the document has its row")
}

// TestPortalSecretGate: a portal session needs endpoints:secret for the
// operations whose answers show a secret, besides their scope; a key does
// not; a session limited to endpoints creates none.
func TestPortalSecretGate(t *testing.T) {
	create, rotate, update := &operation{id: "endpointCreate"}, &operation{id: "endpointRotateSecret"}, &operation{id: "endpointUpdate"}
	portal := func(limited bool, caps ...Capability) principal {
		p := principal{portal: portalSession(limited, caps...)}
		p.scopes = scopesOf(caps)
		return p
	}
	manage := portal(false, CapView, CapEndpointsManage)
	must.Nil(t, manage.permits(update, ScopeEndpointsWrite))
	for _, op := range []*operation{create, rotate} {
		p := manage.permits(op, ScopeEndpointsWrite)
		must.NotNil(t, p, op.id)
		must.Equal(t, http.StatusForbidden, p.Status)
		must.Equal(t, problemTypeBase+"missing-capability", p.Type)
		must.Nil(t, portal(false, CapEndpointsManage, CapEndpointsSecret).permits(op, ScopeEndpointsWrite), op.id)
		must.NotNil(t, portal(false, CapEndpointsSecret).permits(op, ScopeEndpointsWrite), "%s: the secret alone manages nothing", op.id)
	}
	key := principal{scopes: []Scope{ScopeEndpointsWrite}}
	must.Nil(t, key.permits(create, ScopeEndpointsWrite), "a key's scope is all it needs")
	limited := portal(true, CapEndpointsManage, CapEndpointsSecret)
	must.Equal(t, problemTypeBase+"endpoints-limited", limited.permits(create, ScopeEndpointsWrite).Type)
	must.Nil(t, limited.permits(rotate, ScopeEndpointsWrite))
	view := portal(false, CapView)
	must.Equal(t, problemTypeBase+"missing-scope", view.permits(update, ScopeEndpointsWrite).Type)
	// The event-type catalog judges every event of the tenant: a session
	// limited to some endpoints reads it and changes none of it.
	for _, id := range []string{"eventTypePut", "eventTypeDelete", "eventTypeImport"} {
		op := &operation{id: id}
		must.Equal(t, problemTypeBase+"endpoints-limited", limited.permits(op, ScopeEndpointsWrite).Type, id)
		must.Nil(t, manage.permits(op, ScopeEndpointsWrite), id)
	}
	must.Nil(t, portal(true, CapView).permits(&operation{id: "eventTypeGet"}, ScopeEventsRead))
}

// TestPortalTTL: 1h by default, 5m to 24h, anything else a 422 naming ttl.
func TestPortalTTL(t *testing.T) {
	for raw, want := range map[string]time.Duration{"": time.Hour, "5m": 5 * time.Minute, "24h": 24 * time.Hour, "90m": 90 * time.Minute} {
		got, err := portalTTL(raw)
		must.NoError(t, err, raw)
		must.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"4m59s", "24h0m1s", "0", "-1h", "1d", "soon", "1"} {
		_, err := portalTTL(raw)
		var p *Problem
		must.ErrorAs(t, err, &p, raw)
		must.Equal(t, http.StatusUnprocessableEntity, p.Status, raw)
		must.Equal(t, "ttl", p.Field, raw)
	}
}

// TestPortalOrigins: scheme://host[:port] and nothing more, each once.
func TestPortalOrigins(t *testing.T) {
	got, err := portalOrigins([]string{"https://App.Acme.example", "http://127.0.0.1:8080", "https://app.acme.example"})
	must.NoError(t, err)
	must.Equal(t, []string{"https://app.acme.example", "http://127.0.0.1:8080"}, got)
	for i, bad := range []string{"https://acme.example/", "https://acme.example/portal", "acme.example", "ftp://acme.example",
		"https://acme.example?x=1", "https://acme.example#f", "https://u@acme.example", "https://*.acme.example", "https://acme.example:0",
		"https://acme.example:99999", "https://acme.example:", "https://a.example https://b.example", "https://acme.example;"} {
		_, err := portalOrigins([]string{"https://ok.example", bad})
		var p *Problem
		must.ErrorAs(t, err, &p, "%d %s", i, bad)
		must.Equal(t, "portal_origins[1]", p.Field, bad)
		must.Equal(t, http.StatusUnprocessableEntity, p.Status, bad)
	}
}

func portalSession(limited bool, caps ...Capability) *store.PortalSession {
	s := &store.PortalSession{EndpointsLimited: limited}
	for _, c := range caps {
		s.Capabilities = append(s.Capabilities, string(c))
	}
	return s
}
