package e2e

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tenantStatsView is what these tests read of GET /v1/stats and GET
// /v1/tenants/{id}/stats: the same document type.
type tenantStatsView struct {
	DeadLettersOpen     int64 `json:"dead_letters_open"`
	BlockedCorrelations struct {
		Count int64 `json:"count"`
	} `json:"blocked_correlations"`
	Endpoints []struct {
		EndpointID      string `json:"endpoint_id"`
		DeadLettersOpen int64  `json:"dead_letters_open"`
	} `json:"endpoints"`
}

// tenantRankPage is a page of GET /v1/stats/tenants.
type tenantRankPage struct {
	Tenants []struct {
		TenantID         string  `json:"tenant_id"`
		DeadLettersOpen  int64   `json:"dead_letters_open"`
		FailingEndpoints int64   `json:"failing_endpoints"`
		Waiting          int64   `json:"waiting"`
		OldestLagSeconds float64 `json:"oldest_lag_seconds"`
	} `json:"tenants"`
	Total      int64  `json:"total"`
	NextCursor string `json:"next_cursor"`
}

func (p tenantRankPage) ids() []string {
	var out []string
	for _, t := range p.Tenants {
		out = append(out, t.TenantID)
	}
	return out
}

// TestOperatorSeesTenants: three tenants with different
// failures. GET /v1/tenants/{id}/stats is that tenant's GET /v1/stats, for
// an operator only; GET /v1/stats/tenants ranks the tenants worst first
// (more open dead letters first), page by page, and leaves out a tenant
// with nothing to count.
func TestOperatorSeesTenants(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	worse := b.newTenantSide("worse", "w-1", "w-2")
	better := b.newTenantSide("better", "b-1")
	calm := b.newTenantSide("calm")

	// worse: two lanes each held by a dead letter, with a successor
	// parked behind one; better: one dead letter; calm: all delivered.
	for _, p := range []struct {
		s        *tenantSide
		id, corr string
		seq      int64
	}{
		{worse, "w-1", "order-1", 1}, {worse, "w-1b", "order-1", 2}, {worse, "w-2", "order-2", 1},
		{better, "b-1", "order-1", 1},
		{calm, "c-1", "order-1", 1},
	} {
		require.Equal(t, http.StatusAccepted, p.s.post(b, p.id, p.corr, p.seq), p.id)
	}
	waitFor(t, time.Minute, "the dead letters and calm's delivery", func() bool {
		var w, bt tenantStatsView
		b.call(http.MethodGet, "/v1/stats?tenant_id=worse", nil, &w)
		b.call(http.MethodGet, "/v1/stats?tenant_id=better", nil, &bt)
		return w.DeadLettersOpen == 2 && bt.DeadLettersOpen == 1 && len(calm.rcv.delivered()) == 1
	})
	// The dead letters' operational events (to each tenant's hookflow.*
	// endpoint) settle too, so that only w-1b waits when the ranking is read.
	var page tenantRankPage
	waitFor(t, time.Minute, "only w-1b waiting", func() bool {
		b.call(http.MethodGet, "/v1/stats/tenants", nil, &page)
		return len(page.Tenants) == 2 && page.Tenants[0].Waiting == 1 && page.Tenants[1].Waiting == 0
	})

	// A tenant's stats: its own figures, the same as GET /v1/stats naming it.
	var ts, named tenantStatsView
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/tenants/worse/stats", nil, &ts))
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats?tenant_id=worse", nil, &named))
	require.Equal(t, named, ts)
	require.EqualValues(t, 2, ts.DeadLettersOpen)
	require.EqualValues(t, 1, ts.BlockedCorrelations.Count, "w-1b parked behind w-1")
	var open int64
	for _, e := range ts.Endpoints {
		require.Contains(t, []string{worse.endpoint, worse.opsEP}, e.EndpointID, "worse's endpoints only")
		if e.EndpointID == worse.endpoint {
			open = e.DeadLettersOpen
		}
	}
	require.EqualValues(t, 2, open)
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/tenants/calm/stats", nil, &ts))
	require.Zero(t, ts.DeadLettersOpen)
	require.Equal(t, http.StatusNotFound, b.call(http.MethodGet, "/v1/tenants/nosuch/stats", nil, nil))
	require.Equal(t, http.StatusForbidden, b.callAs(worse.key, http.MethodGet, "/v1/tenants/worse/stats", nil, nil),
		"a tenant's key reads its own with GET /v1/stats, not the operator's route")

	// The ranking: worse (2 open dead letters) before better (1); calm,
	// with nothing to count, and default, with nothing at all, are absent.
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats/tenants", nil, &page))
	require.Equal(t, []string{"worse", "better"}, page.ids())
	require.EqualValues(t, 2, page.Total)
	require.Empty(t, page.NextCursor)
	require.EqualValues(t, 2, page.Tenants[0].DeadLettersOpen)
	require.EqualValues(t, 1, page.Tenants[0].Waiting, "w-1b waits behind w-1")
	require.Positive(t, page.Tenants[0].OldestLagSeconds)
	require.EqualValues(t, 1, page.Tenants[1].DeadLettersOpen)

	// A page at a time, one tenant each: the cursor goes on from the rank.
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats/tenants?limit=1", nil, &page))
	require.Equal(t, []string{"worse"}, page.ids())
	require.NotEmpty(t, page.NextCursor)
	var next tenantRankPage
	require.Equal(t, http.StatusOK, b.call(http.MethodGet, "/v1/stats/tenants?limit=1&cursor="+url.QueryEscape(page.NextCursor), nil, &next))
	require.Equal(t, []string{"better"}, next.ids())
	require.Empty(t, next.NextCursor, "the last page has no cursor")
	require.Equal(t, http.StatusBadRequest, b.call(http.MethodGet, "/v1/stats/tenants?cursor=bm9wZQ", nil, nil), "not a cursor this API returned")
	require.Equal(t, http.StatusBadRequest, b.call(http.MethodGet, "/v1/stats/tenants?limit=101", nil, nil))

	// An operator replays worse's dead letters: it drops below better.
	worse.rcv.mu.Lock()
	worse.rcv.refuse = map[string]bool{}
	worse.rcv.mu.Unlock()
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/replay?tenant_id=worse", nil, nil))
	waitFor(t, time.Minute, "better ranked first", func() bool {
		b.call(http.MethodGet, "/v1/stats/tenants?limit=1", nil, &page)
		return len(page.Tenants) == 1 && page.Tenants[0].TenantID == "better"
	})
}
