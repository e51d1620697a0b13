package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeletedEndpointLeavesNoSeries: an endpoint is created, delivered to
// and deleted, on a stack whose API and worker share one registry (as
// hookflow dev): before the delete its series are on /metrics, after it
// no series the process keeps in memory is labelled with its ID, so
// create-and-delete loops do not grow a process's series without bound.
func TestDeletedEndpointLeavesNoSeries(t *testing.T) {
	t.Parallel()
	b := setupObserved(t, time.Minute)
	rcv := newTenantReceiver(t)
	ep := b.createEndpoint(rcv.srv.URL)
	code, _ := b.postEvent(b.id("gone-1"), b.id("gone"), 1, ep.ID, map[string]any{})
	require.Equal(t, http.StatusAccepted, code)
	waitFor(t, time.Minute, "the delivery", func() bool { return len(rcv.delivered()) == 1 })
	// The counters this process keeps in memory; the gauges read from the
	// ledger at each scrape follow its rows and go with them.
	inMemory := []string{"hookflow_events_accepted_total", "hookflow_events_delivered_total", "hookflow_events_dead_lettered_total",
		"hookflow_delivery_attempt_duration_seconds", "hookflow_delivery_retries_total", "hookflow_delivery_throttled_total",
		"hookflow_endpoint_consecutive_failures"}
	labelled := func() []string {
		var out []string
		for name, f := range b.scrape() {
			if !slices.Contains(inMemory, name) {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "endpoint_id" && l.GetValue() == ep.ID {
						out = append(out, name)
					}
				}
			}
		}
		return out
	}
	waitFor(t, 30*time.Second, "the endpoint's delivered series", func() bool {
		return slices.Contains(labelled(), "hookflow_events_delivered_total")
	})
	require.Equal(t, http.StatusOK, b.call(http.MethodDelete, "/v1/endpoints/"+ep.ID, nil, nil))
	require.Empty(t, labelled(), "series of the deleted endpoint")
}

// TestPortalPageTellsNoTenants: /portal/<tenant>/ answers a tenant that
// does not exist, one with no portal_origins and one with some, with the
// same headers to a request that does not come from one of its origins;
// framed from its origin (the Referer a browser sends), that origin alone
// is named, and from another origin none.
func TestPortalPageTellsNoTenants(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	known, bare := "bounds-page-"+b.prefix, "bounds-bare-"+b.prefix
	require.Equal(t, http.StatusCreated, b.call(http.MethodPut, "/v1/tenants/"+known, map[string]any{"name": "Known",
		"portal_origins": []string{"https://app.known.example", "https://admin.known.example"}}, nil))
	require.Equal(t, http.StatusCreated, b.call(http.MethodPut, "/v1/tenants/"+bare, map[string]any{"name": "Bare"}, nil))
	page := func(tenant, referer string) http.Header {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, b.apiURL+"/portal/"+tenant+"/", nil)
		require.NoError(t, err)
		if referer != "" {
			req.Header.Set("Referer", referer)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		resp.Header.Del("Date")
		return resp.Header
	}
	for _, referer := range []string{"", "https://evil.example/x"} {
		unknown := page("bounds-nosuch-"+b.prefix, referer)
		require.Equal(t, unknown, page(known, referer), "a tenant with origins, from %q", referer)
		require.Equal(t, unknown, page(bare, referer), "a tenant with none, from %q", referer)
		require.NotContains(t, unknown.Get("Content-Security-Policy"), "known.example")
	}
	csp := page(known, "https://APP.known.example/settings/webhooks").Get("Content-Security-Policy")
	require.True(t, strings.HasSuffix(csp, "frame-ancestors 'self' https://app.known.example"), csp)
}
