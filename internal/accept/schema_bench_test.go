package accept_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/catalog"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
)

// BenchmarkAcceptValidate is acceptance of a realistic order (10 lines,
// 1.8 KB) against its realistic schema (refs, patterns, enums, 2 KB), and
// without one, on a real Postgres: the figures the catalog's cost is
// judged by. "validate" is the schema's own share (the compiled schema
// from the cache, the data decoded and judged); "accept/*" the whole
// acceptance (catalog read, route, store, start mark) of a new event each
// time. Run with -run '^$' -bench AcceptValidate -benchtime 2000x.
func BenchmarkAcceptValidate(b *testing.B) {
	schema, err := os.ReadFile("testdata/order.schema.json")
	require.NoError(b, err)
	data, err := os.ReadFile("testdata/order.json")
	require.NoError(b, err)
	canonical, err := intake.Canonical(data)
	require.NoError(b, err)

	b.Run("validate", func(b *testing.B) {
		cache := catalog.NewCache(0)
		for b.Loop() {
			s, fe := cache.Schema("schema", schema)
			if fe != nil {
				b.Fatal(fe)
			}
			if fe := s.Validate("data", canonical); fe != nil {
				b.Fatal(fe)
			}
		}
	})
	b.Run("compile", func(b *testing.B) {
		for b.Loop() {
			if _, fe := catalog.Compile("schema", schema); fe != nil {
				b.Fatal(fe)
			}
		}
	})

	ctx := context.Background()
	all, err := store.New(testenv.MigratedPool(b))
	require.NoError(b, err)
	for _, tenant := range []string{"plain", "catalogued"} {
		_, _, err := all.TenantPut(ctx, store.Tenant{ID: tenant})
		require.NoError(b, err)
		st := all.Tenant(tenant)
		for i := range 3 {
			_, err := st.EndpointInsert(ctx, fmt.Sprintf("ep_%s_%d", tenant, i), "https://example.com/hook", testSecret, []string{"order.*"})
			require.NoError(b, err)
		}
	}
	_, _, err = all.Tenant("catalogued").EventTypePut(ctx, catalog.Entry{Name: "order.paid", Schema: schema}, 0)
	require.NoError(b, err)

	// "before" is the plain tenant with the catalog's read answered in
	// memory: acceptance as it was before the catalog; "plain" pays the
	// read and finds no entry; "catalogued" reads and validates.
	invocations := 0
	for _, run := range []string{"before", "plain", "catalogued"} {
		tenant := run
		if run == "before" {
			tenant = "plain"
		}
		b.Run("accept/"+run, func(b *testing.B) {
			st := all.Tenant(tenant)
			var ledger accept.Ledger = st
			if run == "before" {
				ledger = noCatalog{st}
			}
			a, err := accept.New(accept.Config{StartTimeout: time.Minute}, &fakeStarter{st: st})
			require.NoError(b, err)
			// A correlation of each invocation's own: -count and the
			// runner's calibration run it again on the same ledger.
			invocations++
			typ, corr := "order.paid", fmt.Sprintf("order-%s-%d", run, invocations)
			seq := 0
			for b.Loop() {
				seq++
				id := fmt.Sprintf("%s-%d", corr, seq)
				raw, _ := json.Marshal(seq)
				o, err := a.Accept(ctx, ledger, accept.Request{Event: intake.Request{ID: &id, CorrelationID: &corr, Sequence: raw, Type: &typ, Data: data}})
				if err != nil || o.Kind != accept.Accepted {
					b.Fatalf("accept %s: %v %v", id, o.Kind, err)
				}
			}
		})
	}
}

// noCatalog is a ledger whose catalog is empty without a read.
type noCatalog struct{ *store.Store }

func (noCatalog) EventTypeSchema(context.Context, string) (store.CatalogSchema, error) {
	return store.CatalogSchema{}, store.ErrNotFound
}
