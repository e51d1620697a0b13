package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// tenantRunner is a runner of a run with tenants, on a stack with no
// services: enough to give out events and name their workflows.
func tenantRunner(t *testing.T, correlations, tenants int, apiURL string) *runner {
	t.Helper()
	cfg := Config{Exe: "hookflow", Correlations: correlations, Tenants: tenants}
	require.NoError(t, cfg.defaults())
	return newRunner(cfg, &stack{apiURL: apiURL, endpointID: "ep_default"}, &progress{w: io.Discard})
}

// The tenant-spread twins run the one-tenant scenarios' lanes: every
// correlation belongs to one tenant, every tenant has its share of them,
// and each event's workflow and its correlation's sequencer are named by
// that tenant, while the one-tenant scenarios' stay the default tenant's.
func TestTenancySpreadsCorrelations(t *testing.T) {
	t.Parallel()
	r := tenantRunner(t, 200, 100, "")
	for _, sc := range []*scenario{r.orderedTenants, r.fanTenants} {
		tenantsOf := map[string]map[string]bool{} // correlation → its tenants
		corrsOf := map[string]map[string]bool{}   // tenant → its correlations
		for i := 0; i < 600; i++ {
			e := r.spec(sc, "r1")
			require.NotEmpty(t, e.tenant)
			require.NotEqual(t, contract.DefaultTenant, e.tenant)
			if tenantsOf[e.corr] == nil {
				tenantsOf[e.corr] = map[string]bool{}
			}
			tenantsOf[e.corr][e.tenant] = true
			if corrsOf[e.tenant] == nil {
				corrsOf[e.tenant] = map[string]bool{}
			}
			corrsOf[e.tenant][e.corr] = true
			require.Equal(t, e.tenant+"/"+e.id, sc.workflowID(e.id))
			require.Equal(t, e.tenant, sc.corrTenant(e.corr))
			require.Equal(t, e.tenant+"/sequencer/"+e.corr, contract.SequencerID(sc.corrTenant(e.corr), e.corr))
		}
		require.Len(t, tenantsOf, 200, sc.name)
		for corr, ts := range tenantsOf {
			require.Len(t, ts, 1, "%s: correlation %s in one tenant", sc.name, corr)
		}
		require.Len(t, corrsOf, 100, sc.name)
		for tenant, cs := range corrsOf {
			require.Len(t, cs, 2, "%s: tenant %s has 200/100 correlations", sc.name, tenant)
		}
		// Sequences count per correlation, as in the one-tenant scenario.
		e := r.spec(sc, "r2")
		require.EqualValues(t, 4, e.seq, "600 events over 200 correlations, then one more")
	}
	// The twins share their tenants: the same correlation number is the
	// same tenant's in both.
	require.Same(t, r.orderedTenants.tenancy, r.fanTenants.tenancy)

	e := r.spec(r.ordered, "r1")
	require.Empty(t, e.tenant)
	require.Equal(t, "default/"+e.id, r.ordered.workflowID(e.id))
	require.Equal(t, contract.DefaultTenant, r.ordered.corrTenant(e.corr))
	b := r.spec(r.base, "r1")
	require.Equal(t, b.id, r.base.workflowID(b.id), "the baselines' workflows keep their own IDs")
}

// Each twin runs right beside its one-tenant scenario; without tenants
// neither exists, and a tenant without a correlation of its own is refused.
func TestThroughputOrder(t *testing.T) {
	t.Parallel()
	r := tenantRunner(t, 100, 100, "")
	require.Equal(t, []*scenario{r.base, r.fast, r.ordered, r.orderedTenants, r.fan, r.fanTenants, r.single}, r.throughput())

	r = tenantRunner(t, 50, 0, "")
	require.Nil(t, r.orderedTenants)
	require.Nil(t, r.fanTenants)
	require.Equal(t, []*scenario{r.base, r.fast, r.ordered, r.fan, r.single}, r.throughput())

	cfg := Config{Exe: "hookflow", Correlations: 50, Tenants: 100}
	require.ErrorContains(t, cfg.defaults(), "100 tenants over 50 correlations")
}

// An event of a tenant-spread scenario is posted as its tenant's (the
// operator key naming it in the body, where POST /v1/events takes it) to
// its tenant's endpoint, or to none when routed; a one-tenant scenario's
// names no tenant.
func TestPostNamesTheTenant(t *testing.T) {
	t.Parallel()
	type call struct {
		tenant string
		body   map[string]any
	}
	var mu sync.Mutex
	var calls []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil || req.URL.Path != "/v1/events" || req.URL.RawQuery != "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		tenant, _ := body["tenant_id"].(string)
		calls = append(calls, call{tenant: tenant, body: body})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	r := tenantRunner(t, 100, 100, srv.URL)
	r.tenantEndpoint = map[string]string{}
	for i, id := range r.orderedTenants.tenancy.ids {
		r.tenantEndpoint[id] = "ep_t" + strings.Repeat("x", i%3) + id
	}
	ctx := context.Background()
	ord := r.spec(r.orderedTenants, "r1")
	fan := r.spec(r.fanTenants, "r1")
	one := r.spec(r.ordered, "r1")
	for _, p := range []struct {
		sc *scenario
		e  eventSpec
	}{{r.orderedTenants, ord}, {r.fanTenants, fan}, {r.ordered, one}} {
		require.NoError(t, r.post(ctx, p.sc, p.e))
	}
	require.Len(t, calls, 3)
	require.Equal(t, ord.tenant, calls[0].tenant)
	require.Equal(t, r.tenantEndpoint[ord.tenant], calls[0].body["endpoint_id"])
	require.Equal(t, ord.corr, calls[0].body["correlation_id"])
	require.Equal(t, fan.tenant, calls[1].tenant)
	require.NotContains(t, calls[1].body, "endpoint_id", "routed by type within its tenant")
	require.Empty(t, calls[2].tenant)
	require.Equal(t, "ep_default", calls[2].body["endpoint_id"])
}

func TestWriteTableTenants(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	rep.Settings.Tenants = 50
	ordered, fan := rep.scenario(ScenarioOrdered), rep.scenario(ScenarioFanOut)
	ordT, fanT := ordered, fan
	ordT.Name, fanT.Name = ScenarioOrderedTenants, ScenarioFanOutTenants
	ordT.EventsPerSec, ordT.DeliveriesPerSec = 21.6, 21.6
	ordT.Rounds = []RoundResult{{Round: 1, DeliveriesPerSec: 22}, {Round: 2, DeliveriesPerSec: 20.8}}
	inOrder := true
	ordT.InOrder = &inOrder
	ordT.Lanes = &LaneCheck{Deliveries: 300, DeliveredTwice: 1}
	rep.Scenarios = append(rep.Scenarios, ordT, fanT)
	rep.Ratios.OrderedTenantsVsOne = ratio(ordT.EventsPerSec, ordered.EventsPerSec)
	rep.Ratios.OrderedTenantsPerRoundVsOne = perRound(ordT.Rounds, ordered.Rounds)
	rep.Ratios.FanOutTenantsVsOne = ratio(fanT.DeliveriesPerSec, fan.DeliveriesPerSec)
	rep.Ratios.FanOutTenantsPerRoundVsOne = perRound(fanT.Rounds, fan.Rounds)
	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	for _, name := range TenantScenarioNames() {
		require.Contains(t, out, name)
	}
	require.Contains(t, out, "tenants (50 correlations spread over 50 tenants vs one tenant")
	// 21.6 / 24 events/s; rounds 22 / 22 and 20.8 / 26.
	require.Contains(t, out, "hookflow-ordered-tenants vs hookflow-ordered: 21.6 vs 24.0 events/s = 0.90× (per round 1.00×, 0.80×); history/delivery 13.00 vs 13.00, actions/delivery 5.10 vs 5.10")
	require.Contains(t, out, "hookflow-ordered-tenants: 200/200 events delivered, every receiver in order true, 1 delivered twice, 0 out of order, 0 not delivered (of 300 in hookflow's ledger)")
	require.Contains(t, out, "hookflow-fanout-tenants vs hookflow-fanout: 60.0 vs 60.0 deliveries/s = 1.00× (per round 1.00×, 1.00×)")
	require.Regexp(t, `\n\s+2\s.*2\.69×\s+0\.80×\s+1\.00×\n`, out)
}
