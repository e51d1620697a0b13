package outbox_test

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/outbox"
)

// A producer records the event in the transaction that makes the change it
// tells of: both commit, or neither does.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1/shop")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if err := outbox.Migrate(ctx, pool); err != nil { // once, at deploy time
		panic(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'paid' WHERE id = $1`, "order-42"); err != nil {
			return err
		}
		return outbox.Enqueue(ctx, tx, outbox.Event{
			TenantID: "acme", // the customer it is for; left out, the default tenant
			ID:       "evt-order-42-3", CorrelationID: "order-42", Sequence: 3,
			EndpointID: "ep_123", Type: "order.paid", Data: json.RawMessage(`{"amount":1200}`),
		})
	})
	if err != nil {
		panic(err)
	}
}
