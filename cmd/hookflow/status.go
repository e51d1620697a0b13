package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/oapi-codegen/nullable"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/kit/client"
)

// runStatus prints GET /v1/stats of the tenant --tenant (HOOKFLOW_TENANT)
// names, or the key's own: queue depth, in flight, recent deliveries, open
// dead letters, lag and the longest-blocked correlations; then the worst
// of its endpoints, ranked from GET /v1/stats/endpoints (the endpoints'
// health page after page, one query on the server a page of 100, so no
// answer grows with the deployment). With no tenant named, it also lists
// the worst tenants: the first page of GET /v1/stats/tenants, which the
// server ranks in one query (a key without tenants:write, a tenant's
// among them, sees no other tenant and gets no such list). --json prints
// the same: GET /v1/stats' answer with worst_endpoints and worst_tenants
// beside it.
func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	var asJSON bool
	cfg, rest, err := config.LoadWithFlags("status", "Print the delivery pipeline's state (GET /v1/stats) from the API at HOOKFLOW_API_URL.",
		tenantClientSettings, args, env.getenv, apiClientDefaults(), env.stdout, func(fs *flag.FlagSet) {
			fs.BoolVar(&asJSON, "json", false, "print JSON")
		})
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return &config.UsageError{Msg: "status takes no arguments"}
	}
	cl, err := newAPIClient(cfg)
	if err != nil {
		return err
	}
	r, err := cl.StatsWithResponse(ctx, &client.StatsParams{TenantID: cl.tenantID()})
	if err != nil {
		return cl.fail(err)
	}
	st := *r.JSON200
	health, err := cl.StatsEndpointsAll(ctx, client.StatsEndpointsParams{TenantID: cl.tenantID()})
	if err != nil {
		return cl.fail(err)
	}
	worst, more := worstEndpoints(health)
	var tenants *client.TenantsHealth
	if cl.tenant == "" {
		if tenants, err = worstTenants(ctx, cl); err != nil {
			return cl.fail(err)
		}
	}
	if asJSON {
		return printJSON(env.stdout, statusJSON{Stats: st, Tenant: cl.tenant, WorstEndpoints: worst, MoreUnwell: more, WorstTenants: tenants})
	}
	tenant := cl.tenant
	if tenant == "" {
		tenant = "the key's own (default for an operator key)"
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	for _, row := range []struct {
		name  string
		value string
	}{
		{"tenant", tenant},
		{"queued", fmt.Sprint(st.Queued)},
		{"in flight (waiting + delivering)", fmt.Sprint(st.InFlight)},
		{"delivered, last 5 min", fmt.Sprint(st.DeliveredLast5M)},
		{"dead letters open", fmt.Sprint(st.DeadLettersOpen)},
		{"oldest undelivered", age(st.OldestLagSeconds)},
		{"blocked lanes (correlation, endpoint)", fmt.Sprint(st.BlockedCorrelations.Count)},
		{"cleaner, last run", cleanerLine(st.Cleaner)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row.name, row.value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Endpoints) > 0 {
		fmt.Fprintln(env.stdout)
		tw = tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENDPOINT\tWAITING\tDELIVERING\tDELIVERED 5M\tDEAD LETTERS\tOLDEST")
		for _, e := range st.Endpoints {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", e.EndpointID, e.Waiting, e.Delivering, e.DeliveredLast5M, e.DeadLettersOpen, age(e.OldestLagSeconds))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := printWorst(env, worst, more); err != nil {
			return err
		}
	}
	if err := printWorstTenants(env, tenants); err != nil {
		return err
	}
	if len(st.BlockedCorrelations.Top) == 0 {
		return nil
	}
	fmt.Fprintln(env.stdout)
	tw = tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CORRELATION\tENDPOINT\tNEXT SEQ\tBLOCKED BY\tEVENT\tPARKED\tAGE")
	for _, b := range st.BlockedCorrelations.Top {
		ev := b.BlockingEventID
		if ev == "" {
			ev = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\n", b.CorrelationID, b.EndpointID, b.NextSequence, b.BlockedBy, ev, b.Parked, age(b.AgeSeconds))
	}
	return tw.Flush()
}

// statusWorst is how many endpoints `hookflow status` lists as the worst.
const statusWorst = 5

// statusStale is how long a delivery may wait before its endpoint counts
// as unwell for that alone: longer than the first retries take.
const statusStale = time.Minute

// statusJSON is what `hookflow status --json` prints: GET /v1/stats'
// answer, and the worst endpoints' health as the table lists them, with
// how many more are unwell.
type statusJSON struct {
	client.Stats
	// Tenant is the tenant named (--tenant); absent for the key's own.
	Tenant         string                  `json:"tenant,omitempty"`
	WorstEndpoints []client.EndpointHealth `json:"worst_endpoints"`
	MoreUnwell     int                     `json:"more_unwell_endpoints"`
	// WorstTenants is the first page of GET /v1/stats/tenants; absent
	// when a tenant is named or the key may not see other tenants.
	WorstTenants *client.TenantsHealth `json:"worst_tenants,omitempty"`
}

// worstTenants is the first page of the tenants' ranking, statusWorst of
// them (the server ranks them: open dead letters, then failing endpoints,
// then the oldest undelivered); nil when the key may not see it (403: it
// lacks tenants:write, as a tenant's key does).
func worstTenants(ctx context.Context, cl apiClient) (*client.TenantsHealth, error) {
	r, err := cl.StatsTenantsWithResponse(ctx, &client.StatsTenantsParams{Limit: new(int64(statusWorst))})
	var pe *client.Error
	if errors.As(err, &pe) && pe.Status == http.StatusForbidden {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r.JSON200, nil
}

// printWorstTenants prints the worst tenants, worst first, and how many
// more the ranking holds; nothing when there is none to show.
func printWorstTenants(env *cliEnv, page *client.TenantsHealth) error {
	if page == nil || len(page.Tenants) == 0 {
		return nil
	}
	fmt.Fprintln(env.stdout)
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORST TENANTS\tDEAD LETTERS\tFAILING ENDPOINTS\tWAITING\tDELIVERING\tOLDEST UNDELIVERED")
	for _, t := range page.Tenants {
		name := t.TenantID
		if t.Disabled {
			name += " (disabled)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", name, t.DeadLettersOpen, t.FailingEndpoints, t.Waiting, t.Delivering, age(t.OldestLagSeconds))
	}
	if more := page.Total - int64(len(page.Tenants)); more > 0 {
		fmt.Fprintf(tw, "… and %d more (hookflow status --tenant ID shows one)\n", more)
	}
	return tw.Flush()
}

// worstEndpoints returns the unwell among endpoints, the worst first, at
// most statusWorst of them, and how many more there are: an open circuit
// first (nothing is sent to it), then the lowest success rate of the last
// hour, then the most open dead letters, then the oldest undelivered. An
// endpoint whose attempts all delivered, with its circuit closed, no open
// dead letter and nothing waiting long, is not unwell.
func worstEndpoints(endpoints []client.EndpointHealth) ([]client.EndpointHealth, int) {
	unwell := []client.EndpointHealth{}
	for _, h := range endpoints {
		if circuitOpen(h) || successRate(h) < 1 || h.DeadLettersOpen > 0 || oldestAge(h) >= statusStale.Seconds() {
			unwell = append(unwell, h)
		}
	}
	slices.SortStableFunc(unwell, func(a, b client.EndpointHealth) int {
		return cmp.Or(-cmpBool(circuitOpen(a), circuitOpen(b)), cmp.Compare(successRate(a), successRate(b)),
			cmp.Compare(b.DeadLettersOpen, a.DeadLettersOpen), cmp.Compare(oldestAge(b), oldestAge(a)), cmp.Compare(a.EndpointID, b.EndpointID))
	})
	n := min(len(unwell), statusWorst)
	return unwell[:n], len(unwell) - n
}

// circuitOpen says the endpoint's circuit holds its deliveries back: open,
// or half open while its probes earn the close.
func circuitOpen(h client.EndpointHealth) bool {
	return h.Circuit.State == "open" || h.Circuit.State == "half_open"
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// printWorst prints the worst endpoints (worstEndpoints) and how many more
// are unwell; nothing when none is.
func printWorst(env *cliEnv, worst []client.EndpointHealth, more int) error {
	if len(worst) == 0 {
		return nil
	}
	fmt.Fprintln(env.stdout)
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORST ENDPOINTS\tCIRCUIT\tSUCCESS 1H\tATTEMPTS 1H\tP50\tP99\tDEAD LETTERS\tOLDEST UNDELIVERED")
	for _, h := range worst {
		rate, oldest := "-", "-"
		if r, err := h.SuccessRate.Get(); err == nil {
			rate = fmt.Sprintf("%.1f%%", 100*r)
		}
		if o := h.OldestUndelivered; o != nil {
			oldest = fmt.Sprintf("%s (%s, %s #%d, %s)", age(o.AgeSeconds), o.EventID, o.CorrelationID, o.Sequence, o.State)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\n", h.EndpointID, circuitLine(h.Circuit), rate, h.Attempts, millis(h.LatencyP50Ms),
			millis(h.LatencyP99Ms), h.DeadLettersOpen, oldest)
	}
	if more > 0 {
		fmt.Fprintf(tw, "… and %d more\n", more)
	}
	return tw.Flush()
}

// circuitLine says how an endpoint's circuit breaker stands: open with
// when it next probes, half open, or closed with the failures it counts toward its
// threshold.
func circuitLine(c client.CircuitState) string {
	switch {
	case c.State == "open" && !c.NextProbeAt.IsZero():
		return fmt.Sprintf("open (next probe in %s)", age(max(time.Until(c.NextProbeAt).Seconds(), 0)))
	case c.State == "open", c.State == "half_open":
		return string(c.State)
	case c.ConsecutiveFailures > 0:
		return fmt.Sprintf("closed (%d/%d failures)", c.ConsecutiveFailures, c.FailureThreshold)
	case c.State == "":
		return "-"
	}
	return string(c.State)
}

// successRate is the endpoint's, 1 when it had no attempts: nothing failed.
func successRate(h client.EndpointHealth) float64 {
	r, err := h.SuccessRate.Get()
	if err != nil {
		return 1
	}
	return r
}

func oldestAge(h client.EndpointHealth) float64 {
	if h.OldestUndelivered == nil {
		return 0
	}
	return h.OldestUndelivered.AgeSeconds
}

// millis prints a latency in milliseconds, "-" for none.
func millis(ms nullable.Nullable[float64]) string {
	v, err := ms.Get()
	if err != nil {
		return "-"
	}
	return fmt.Sprintf("%.0fms", v)
}

// cleanerLine says what the cleaner's last run did, and when.
func cleanerLine(r *client.CleanerRun) string {
	if r == nil {
		return "not run yet"
	}
	s := fmt.Sprintf("%s ago: %d payloads pruned, %d attempts and %d keys deleted", age(time.Since(r.FinishedAt).Seconds()),
		r.PayloadsPruned, r.AttemptsDeleted, r.KeysDeleted)
	if r.Error != "" {
		s += " (failed: " + r.Error + ")"
	}
	return s
}

// age prints seconds as a short duration ("0s", "1m5s", "2h3m").
func age(secs float64) string {
	d := time.Duration(secs * float64(time.Second))
	if d >= time.Hour {
		d = d.Round(time.Minute)
	} else {
		d = d.Round(time.Second)
	}
	return d.String()
}
