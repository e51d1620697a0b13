package accept

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// The cache of compiled filters holds at most its cap, and starts over
// past it without a wrong answer.
func TestFilterCacheIsBounded(t *testing.T) {
	t.Parallel()
	fs := newFilters(3)
	ev := intake.Event{ID: "e", Data: json.RawMessage(`{"n":2}`)}
	for n := range 10 {
		sub := store.Subscriber{ID: "ep", Filter: json.RawMessage(fmt.Sprintf(`{"data":{"n":%d}}`, n))}
		took, left, err := fs.route(ev, []store.Subscriber{sub})
		require.NoError(t, err)
		if n == 2 {
			require.Equal(t, []string{"ep"}, took)
		} else {
			require.Equal(t, []string{"ep"}, left)
		}
		require.LessOrEqual(t, fs.cached(), 3)
	}
	require.Equal(t, filterCacheSize, newFilters(filterCacheSize).max)
}

// BenchmarkRouteFilters measures what filters add to routing one event, in
// memory (no database): the split of 1, 100 and 250 subscribers
// (contract.MaxSubscribersCeiling), each with a filter the event matches,
// against the same subscribers without filters. It prints the time per
// event and per filter, and the ratio; it asserts no timing.
//
//	go test -count=1 -run '^$' -bench BenchmarkRouteFilters -v ./internal/accept/
func BenchmarkRouteFilters(b *testing.B) {
	ev := intake.Event{ID: "e", Data: json.RawMessage(`{"amount":1249.90,"currency":"EUR","items":[{"qty":2,"sku":"A1"}],"order_id":"ord_8f2a"}`),
		Metadata: json.RawMessage(`{"region":"eu-west-1","source":"checkout"}`)}
	filter := json.RawMessage(`{"data":{"amount":{"$gte":500},"currency":{"$in":["EUR","GBP"]}},"metadata":{"region":{"$prefix":"eu"}}}`)
	for _, n := range []int{1, 100, contract.MaxSubscribersCeiling} {
		plain, filtered := make([]store.Subscriber, n), make([]store.Subscriber, n)
		for i := range n {
			plain[i] = store.Subscriber{ID: fmt.Sprintf("ep_%03d", i)}
			filtered[i] = store.Subscriber{ID: plain[i].ID, Filter: filter}
		}
		per := map[bool]time.Duration{}
		for _, withFilters := range []bool{false, true} {
			subs := plain
			if withFilters {
				subs = filtered
			}
			b.Run(fmt.Sprintf("subscribers=%d/filters=%t", n, withFilters), func(b *testing.B) {
				fs := newFilters(filterCacheSize)
				// Compiled once, as for every event after an endpoint's
				// first: the cost measured is the match.
				if _, _, err := fs.route(ev, subs); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					took, _, err := fs.route(ev, subs)
					if err != nil || len(took) != n {
						b.Fatalf("route: %v, %d taken", err, len(took))
					}
				}
				per[withFilters] = b.Elapsed() / time.Duration(b.N)
			})
		}
		b.Logf("FIGURE route to %d subscribers in memory: %v without filters, %v with a filter each (%v per filter, the event decoded once)",
			n, per[false].Round(10*time.Nanosecond), per[true].Round(10*time.Nanosecond), ((per[true] - per[false]) / time.Duration(n)).Round(time.Nanosecond))
	}
}
