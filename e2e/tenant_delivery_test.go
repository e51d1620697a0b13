package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTenantDeliveryLimits: the limits a tenant's deliveries answer to,
// against the real stack, with a private-target allowlist as a deployment
// has it (not hookflow dev's every target).
//   - allow_private_targets: the allowlisted receiver is the default
//     tenant's to use, and no other tenant's until it is granted; an
//     endpoint made while granted, once the grant is taken back, is never
//     dialled: its delivery is dead-lettered, the receiver untouched.
//   - deliveries_per_second: a noisy tenant's lanes over two endpoints are
//     paced at its rate (1/s: its ten deliveries take 7 s and more), each
//     event once and in order, while a quiet tenant's are not held behind
//     them: its five, each in a correlation of its own so that none waits
//     for another's hand-over, are all delivered before the noisy ones are.
//   - disabled: a disabled tenant's deliveries wait, spending no recovery
//     window (nothing is dead-lettered), and go once it is enabled.
func TestTenantDeliveryLimits(t *testing.T) {
	t.Parallel()
	rcv := newTenantReceiver(t)
	// The noisy tenant's endpoints have a receiver each: order is per lane.
	lanes := []*tenantReceiver{newTenantReceiver(t), newTenantReceiver(t)}
	quiet := newTenantReceiver(t)
	var allowlist []string
	for _, r := range []*tenantReceiver{rcv, lanes[0], lanes[1], quiet} {
		u, err := url.Parse(r.srv.URL)
		require.NoError(t, err)
		allowlist = append(allowlist, u.Host)
	}
	b := setup(t, options{allowlist: allowlist})
	put := func(id string, limits map[string]any) {
		t.Helper()
		code := b.call(http.MethodPut, "/v1/tenants/"+id, map[string]any{"limits": limits}, nil)
		require.Contains(t, []int{http.StatusCreated, http.StatusOK}, code)
	}
	endpoint := func(tenant, recvURL string, extra map[string]any) (int, map[string]any) {
		body := map[string]any{"url": recvURL}
		if tenant != "" {
			body["tenant_id"] = tenant
		}
		for k, v := range extra {
			body[k] = v
		}
		var out map[string]any
		return b.call(http.MethodPost, "/v1/endpoints", body, &out), out
	}
	post := func(tenant, id, corr string, seq int) {
		t.Helper()
		require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/events", map[string]any{"id": id, "correlation_id": corr,
			"sequence": seq, "type": "order.updated", "data": map[string]any{"n": seq}, "tenant_id": tenant}, nil))
	}

	// allow_private_targets.
	code, p := endpoint("", rcv.srv.URL+"/default", nil)
	require.Equal(t, http.StatusCreated, code, "the allowlist is the default tenant's: %v", p)
	put("cust", map[string]any{})
	code, p = endpoint("cust", rcv.srv.URL+"/cust", nil)
	require.Equal(t, http.StatusUnprocessableEntity, code, p)
	require.Equal(t, "allow_private_targets", p["tenant_limit"], p)
	require.Equal(t, "url", p["field"], p)
	put("cust", map[string]any{"allow_private_targets": true})
	code, ep := endpoint("cust", rcv.srv.URL+"/cust", map[string]any{"recovery_window": "2s"})
	require.Equal(t, http.StatusCreated, code, ep)
	put("cust", map[string]any{"allow_private_targets": false})
	p = nil
	require.Equal(t, http.StatusUnprocessableEntity, b.call(http.MethodPatch, fmt.Sprintf("/v1/endpoints/%s?tenant_id=cust", ep["id"]),
		map[string]any{"url": rcv.srv.URL + "/cust2"}, &p))
	require.Equal(t, "allow_private_targets", p["tenant_limit"], p)
	post("cust", "c-1", "c", 1)
	var dls struct {
		Items []struct {
			EventID string `json:"event_id"`
		} `json:"items"`
	}
	waitFor(t, time.Minute, "the refused target's delivery dead-lettered", func() bool {
		b.call(http.MethodGet, "/v1/dead-letters?tenant_id=cust", nil, &dls)
		return len(dls.Items) == 1
	})
	require.Equal(t, "c-1", dls.Items[0].EventID)
	require.NotContains(t, rcv.delivered(), "c/1/c-1", "the target was dialled for a tenant not granted it")

	// deliveries_per_second, and a quiet tenant beside it.
	put("noisy", map[string]any{"deliveries_per_second": 1, "allow_private_targets": true})
	put("quiet", map[string]any{"allow_private_targets": true})
	for _, r := range lanes {
		code, ep := endpoint("noisy", r.srv.URL, nil)
		require.Equal(t, http.StatusCreated, code, ep)
	}
	code, ep = endpoint("quiet", quiet.srv.URL, nil)
	require.Equal(t, http.StatusCreated, code, ep)
	noisyDelivered := func() int { return len(lanes[0].delivered()) + len(lanes[1].delivered()) }
	start := time.Now()
	const n = 5
	for i := range n {
		post("noisy", fmt.Sprint("n-", i), fmt.Sprint("n-", i%2), i/2+1)
	}
	for i := range n {
		post("quiet", fmt.Sprint("q-", i), fmt.Sprint("q-", i), 1)
	}
	noisyWhenQuietDone := -1
	waitFor(t, time.Minute, "every delivery of both tenants", func() bool {
		if noisyWhenQuietDone < 0 && len(quiet.delivered()) == n {
			noisyWhenQuietDone = noisyDelivered()
		}
		return noisyWhenQuietDone >= 0 && noisyDelivered() == 2*n
	})
	took := time.Since(start)
	for _, r := range append(slices.Clone(lanes), quiet) {
		perCorr := map[string][]string{}
		for _, d := range r.delivered() {
			corr, rest, _ := strings.Cut(d, "/")
			perCorr[corr] = append(perCorr[corr], rest)
		}
		for corr, seqs := range perCorr {
			require.True(t, slices.IsSorted(seqs), "in order: %s %v", corr, seqs)
			require.Len(t, slices.Compact(slices.Clone(seqs)), len(seqs), "each event once: %s %v", corr, seqs)
		}
	}
	t.Logf("FIGURE tenant deliveries_per_second 1: %d deliveries over 2 endpoints in %.1f s; the quiet tenant was done when %d of them were",
		2*n, took.Seconds(), noisyWhenQuietDone)
	require.Less(t, noisyWhenQuietDone, 2*n, "the quiet tenant was held behind the noisy one")
	require.GreaterOrEqual(t, took, time.Duration(2*n-3)*time.Second, "the noisy tenant was sent faster than 1/s")

	// disabled.
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/tenants/quiet", map[string]any{"disabled": true}, nil))
	post("quiet", "q-held", "q-held", 1)
	time.Sleep(3 * time.Second)
	require.NotContains(t, quiet.delivered(), "q-held/1/q-held", "a disabled tenant's delivery went")
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/tenants/quiet", map[string]any{"disabled": false}, nil))
	waitFor(t, 30*time.Second, "the held delivery once the tenant is enabled", func() bool {
		return slices.Contains(quiet.delivered(), "q-held/1/q-held")
	})
	b.call(http.MethodGet, "/v1/dead-letters?tenant_id=quiet", nil, &dls)
	require.Empty(t, dls.Items, "the wait was dead-lettered")
}
