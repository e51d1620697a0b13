package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/hookflow/hookflow/internal/contract"
)

// tenancy spreads a scenario's correlations over tenants: correlation k
// (of Config.Correlations) is tenant k % len(ids)'s, so that every tenant
// has a correlation, every correlation one tenant, and the scenario runs
// the same lanes as its one-tenant twin. It remembers the tenant of every
// event and correlation it gave out, which the workflow IDs and the
// history reads need.
type tenancy struct {
	ids     []string
	ofEvent map[string]string
	ofCorr  map[string]string
}

func newTenancy(ids []string) *tenancy {
	return &tenancy{ids: ids, ofEvent: map[string]string{}, ofCorr: map[string]string{}}
}

// tenantIDs names n tenants of the run tagged tag.
func tenantIDs(tag string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-t%03d", tag, i)
	}
	return out
}

// ofKey is the tenant of correlation k.
func (t *tenancy) ofKey(k int) string { return t.ids[k%len(t.ids)] }

// record notes the tenant of an event and of its correlation.
func (t *tenancy) record(e eventSpec) {
	t.ofEvent[e.id] = e.tenant
	t.ofCorr[e.corr] = e.tenant
}

// eventTenant is the tenant of one of the scenario's events.
func (sc *scenario) eventTenant(id string) string {
	if sc.tenancy == nil {
		return contract.DefaultTenant
	}
	return cmp.Or(sc.tenancy.ofEvent[id], contract.DefaultTenant)
}

// corrTenant is the tenant of one of the scenario's correlations.
func (sc *scenario) corrTenant(corr string) string {
	if sc.tenancy == nil {
		return contract.DefaultTenant
	}
	return cmp.Or(sc.tenancy.ofCorr[corr], contract.DefaultTenant)
}

// setUpTenants creates the run's tenants through the API, each with its
// own endpoints at the stack's receivers, as the one-tenant scenarios have
// them: one at the reference receiver subscribed to benchEventType (the
// ordered twin posts to it by ID), and one at each fan-out receiver
// subscribed to every type (the fan-out twin's events are routed to them).
// A tenant's endpoints reach a private target only with
// allow_private_targets, which the bench's receivers on 127.0.0.1 need.
func (r *runner) setUpTenants(ctx context.Context, ids []string) error {
	r.p.logf("creating %d tenants, each with %d endpoints", len(ids), 1+len(r.s.fanOut))
	body, err := json.Marshal(map[string]any{"name": "hookflow bench", "limits": map[string]any{"allow_private_targets": true}})
	if err != nil {
		return fmt.Errorf("encode tenant: %w", err)
	}
	r.tenantEndpoint = map[string]string{}
	for _, id := range ids {
		resp, err := r.api(ctx, http.MethodPut, "/v1/tenants/"+url.PathEscape(id), body)
		if err != nil {
			return fmt.Errorf("create tenant %s: %w", id, err)
		}
		resp.Body.Close()
		ep, _, err := createEndpoint(ctx, r.s.apiURL, id, r.s.receiverURL, r.s.secret, []string{benchEventType})
		if err != nil {
			return fmt.Errorf("tenant %s: %w", id, err)
		}
		r.tenantEndpoint[id] = ep
		for _, f := range r.s.fanOut {
			if _, _, err := createEndpoint(ctx, r.s.apiURL, id, "http://"+f.addr+"/webhook", f.secret, nil); err != nil {
				return fmt.Errorf("tenant %s: %w", id, err)
			}
		}
	}
	return nil
}
