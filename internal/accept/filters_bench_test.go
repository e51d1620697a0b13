package accept_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/testenv"
)

// benchFilter is a subscriber's filter as a user writes one: an amount
// and a region. The benchmark's events match it, so that every filter is
// evaluated whole and the lanes are the same with filters as without.
const benchFilter = `{"data":{"amount":{"$gte":500},"currency":{"$in":["EUR","GBP"]}},"metadata":{"region":{"$prefix":"eu"}}}`

// BenchmarkAcceptFilters measures the acceptance of one event (judge,
// route, store with a delivery per subscriber, mark started; Temporal
// left out) on a real Postgres, at 1, 100 and 250 subscribers
// (contract.MaxSubscribersCeiling), each with a filter, against the same
// number of subscribers without one, in the same run. It prints each
// per-event time and the ratio of filtered to unfiltered; it asserts no
// timing.
//
//	go test -count=1 -run '^$' -bench BenchmarkAcceptFilters -benchtime 200x -v ./internal/accept/
func BenchmarkAcceptFilters(b *testing.B) {
	ctx := context.Background()
	all, err := store.New(testenv.MigratedPool(b))
	require.NoError(b, err)
	st := all.Tenant(store.DefaultTenant)
	filter := json.RawMessage(benchFilter)
	sizes := []int{1, 100, contract.MaxSubscribersCeiling}
	for _, n := range sizes {
		for i := range n {
			for _, kind := range []string{"plain", "filtered"} {
				id := fmt.Sprintf("%s%d_%03d", kind, n, i)
				ep := store.Endpoint{ID: id, URL: "https://example.com/" + id, Secret: testSecret, EventTypes: []string{fmt.Sprintf("%s%d.*", kind, n)}}
				if kind == "filtered" {
					ep.Filter = filter
				}
				_, err := st.EndpointCreate(ctx, ep, store.Caps{})
				require.NoError(b, err)
			}
		}
	}
	_, err = st.Pool().Exec(ctx, "ANALYZE endpoints")
	require.NoError(b, err)
	a, err := accept.New(accept.Config{MaxSubscribers: contract.MaxSubscribersCeiling, StartTimeout: time.Minute}, &fakeStarter{st: st})
	require.NoError(b, err)

	seq := 0
	accept1 := func(b *testing.B, kind string, n int) time.Duration {
		seq++
		req := request(fmt.Sprintf("b-%d", seq), fmt.Sprintf("b-%d", seq), 1, "", `{"amount":1249.90,"currency":"EUR","order_id":"ord_8f2a","items":[{"sku":"A1","qty":2}]}`)
		typ := fmt.Sprintf("%s%d.created", kind, n)
		req.Event.Type = &typ
		req.Event.Metadata = json.RawMessage(`{"region":"eu-west-1","source":"checkout"}`)
		start := time.Now()
		o, err := a.Accept(ctx, st, req)
		took := time.Since(start)
		require.NoError(b, err)
		require.Equal(b, accept.Accepted, o.Kind)
		require.Len(b, o.Stored.Endpoints, n)
		return took
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			// Alternated, event by event, so that the database's drift
			// (its caches, autovacuum, the machine's other load) falls on
			// both alike.
			var plain, filtered time.Duration
			for i := 0; i < b.N; i++ {
				// Each goes first every other time: the first of a pair
				// pays for whatever the one before left (a commit's
				// flush, the autovacuum's turn).
				if i%2 == 0 {
					plain += accept1(b, "plain", n)
					filtered += accept1(b, "filtered", n)
				} else {
					filtered += accept1(b, "filtered", n)
					plain += accept1(b, "plain", n)
				}
			}
			plain, filtered = plain/time.Duration(b.N), filtered/time.Duration(b.N)
			b.Logf("FIGURE accept to %d subscribers: %v per event without filters, %v with a filter each: %.2f× (%v per filter)",
				n, plain.Round(time.Microsecond), filtered.Round(time.Microsecond), float64(filtered)/float64(plain),
				((filtered - plain) / time.Duration(n)).Round(10*time.Nanosecond))
		})
	}
}
