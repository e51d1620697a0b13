// Command ledger is an example receiver on the receiver kit, run as a
// process: every applied event is a row of example_ledger (lane, sequence,
// event id, data.amount), written in the kit's transaction, so what was
// applied, and in what order, can be read back. The same program exists for
// the TypeScript and Python kits (kit/receiver-ts, kit/receiver-py).
//
//	DATABASE_URL=postgres://… RECEIVER_SECRETS="whsec_new whsec_old" PORT=8090 go run ./receiver/examples/ledger
//
// RECEIVER_START=mid-stream takes up never-seen lanes wherever they stand.
// Built with the tag receiver_mutant_no_dedup or receiver_mutant_no_cursor,
// the kit lacks that check: a broken receiver, which the conformance tests
// build to show that `hookflow conformance` fails it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/receiver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	start, err := receiver.ParseStartPosition(os.Getenv("RECEIVER_START"))
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	if err := receiver.Migrate(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_ledger (
		position bigserial PRIMARY KEY, endpoint_id text NOT NULL, correlation_id text NOT NULL,
		sequence bigint NOT NULL, event_id text NOT NULL, amount numeric NOT NULL)`); err != nil {
		return fmt.Errorf("create ledger: %w", err)
	}
	rc, err := receiver.New(receiver.Config{Secrets: strings.Fields(os.Getenv("RECEIVER_SECRETS")), StartPosition: start}, receiver.Deps{
		Pool: pool,
		Apply: func(ctx context.Context, tx pgx.Tx, ev receiver.Event) error {
			var data struct {
				Amount float64 `json:"amount"`
			}
			// An event without a numeric amount adds nothing.
			_ = json.Unmarshal(ev.Data, &data)
			_, err := tx.Exec(ctx, `INSERT INTO example_ledger (endpoint_id, correlation_id, sequence, event_id, amount) VALUES ($1, $2, $3, $4, $5)`,
				ev.EndpointID, ev.CorrelationID, ev.Sequence, ev.ID, data.Amount)
			return err
		},
	})
	if err != nil {
		return err
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8090"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	fmt.Printf("listening on http://%s/webhook\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/webhook", rc)
	srv := &http.Server{Handler: mux}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
