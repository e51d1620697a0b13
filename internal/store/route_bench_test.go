package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// BenchmarkRouting measures what routing one event costs the ledger at
// accept, against 1, 100 and 1,000 endpoints subscribed to its type, in a
// deployment that also holds 1,000 endpoints of other types, every
// endpoint with 8 KiB of custom headers (what a whole-row read would
// drag along): "route" is Route alone (the ids of the subscribers, at most
// the cap plus one), "accept" is Route and EventInsertRouted (the event
// and a delivery row per subscriber, in one statement), as POST /v1/events
// does before its workflow starts. It prints each per-event time and its
// ratio to routing to one subscriber; it asserts no timing.
//
//	go test -count=1 -run '^$' -bench BenchmarkRouting -benchtime 200x -v ./internal/store/
func BenchmarkRouting(b *testing.B) {
	ctx := context.Background()
	st := newStore(b)
	for _, id := range []string{"ep", "a", "b", "c"} { // newStore's, of every type
		require.NoError(b, st.EndpointDelete(ctx, id, "bench"))
	}
	headers := map[string]string{"X-Bench": strings.Repeat("h", 8<<10)}
	add := func(id, pattern string) {
		_, err := st.EndpointCreate(ctx, store.Endpoint{ID: id, URL: "https://example.com/" + id, Secret: "whsec_x",
			EventTypes: []string{pattern}, Settings: store.Settings{Headers: headers}}, store.Caps{})
		require.NoError(b, err)
	}
	for i := range 1000 {
		add(fmt.Sprintf("other_%04d", i), "other.*")
	}
	sizes := []int{1, 100, 1000}
	for _, n := range sizes {
		for i := range n {
			add(fmt.Sprintf("s%04d_%04d", n, i), fmt.Sprintf("bench%d.*", n))
		}
	}
	_, err := st.Pool().Exec(ctx, "ANALYZE endpoints")
	require.NoError(b, err)

	per := map[string]time.Duration{}
	seq := int64(0)
	for _, what := range []string{"route", "accept"} {
		for _, n := range sizes {
			name := fmt.Sprintf("%s/subscribers=%d", what, n)
			b.Run(name, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					seq++
					ev := intake.Event{ID: fmt.Sprintf("r-%d", seq), CorrelationID: fmt.Sprintf("r-%d", seq), Sequence: 1,
						Type: fmt.Sprintf("bench%d.created", n), Data: []byte(`{"amount":1}`), PayloadHash: []byte{1}}
					_, eps, err := st.Route(ctx, ev, 1000)
					require.NoError(b, err)
					require.Len(b, eps, n)
					if what == "accept" {
						_, ok, err := st.EventInsertRouted(ctx, ev, subscriberIDs(eps), nil)
						require.NoError(b, err)
						require.True(b, ok)
					}
				}
				per[name] = b.Elapsed() / time.Duration(b.N)
			})
		}
	}
	for _, what := range []string{"route", "accept"} {
		one := per[fmt.Sprintf("%s/subscribers=1", what)]
		for _, n := range sizes {
			d := per[fmt.Sprintf("%s/subscribers=%d", what, n)]
			b.Logf("FIGURE %s to %d subscribers: %v per event, %.1f× routing to 1", what, n, d.Round(time.Microsecond), float64(d)/float64(one))
		}
	}
}
