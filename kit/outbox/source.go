package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookflow/hookflow/kit/outbox/internal/dbsqlc"
)

// Source is the relay's access to an outbox table: which correlations wait,
// claiming one at a time, marking rows, and the lag. A correlation is a
// tenant's (Correlation): the same correlation ID of two tenants is two.
type Source struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries
}

// NewSource returns a Source on the producer's pool.
func NewSource(pool *pgxpool.Pool) (*Source, error) {
	if pool == nil {
		return nil, errors.New("outbox: pool is required")
	}
	return &Source{pool: pool, q: dbsqlc.New(pool)}, nil
}

// Row is one pending outbox row.
type Row struct {
	Position    int64
	Event       Event
	PayloadHash []byte
	CreatedAt   time.Time
	Attempts    int32
}

// Correlation is one tenant's correlation: the unit a relay claims, and in
// which rows go in sequence order.
type Correlation struct {
	TenantID      string
	CorrelationID string
}

// String is how logs name it: tenant/correlation, as the sequencer's
// workflow ID does (neither may contain a "/").
func (c Correlation) String() string { return c.TenantID + "/" + c.CorrelationID }

// CorrelationsPending returns up to limit correlations that have pending
// rows, tenants in turn (every tenant's first before anyone's second, so
// one tenant's backlog delays only itself), each tenant's longest waiting
// first.
func (s *Source) CorrelationsPending(ctx context.Context, limit int) ([]Correlation, error) {
	rows, err := s.q.OutboxCorrelationsPending(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("list pending outbox correlations: %w", err)
	}
	out := make([]Correlation, len(rows))
	for i, r := range rows {
		out[i] = Correlation{TenantID: r.TenantID, CorrelationID: r.CorrelationID}
	}
	return out, nil
}

// Claim is one correlation held by one relay: its pending rows, at most the
// limit asked for, in sequence order, and the transaction that marks them.
type Claim struct {
	q    *dbsqlc.Queries
	Rows []Row
}

// MarkRelayed records that the row is in hookflow with its workflow started.
func (c *Claim) MarkRelayed(ctx context.Context, r Row) error {
	if err := c.q.OutboxMarkRelayed(ctx, r.Position); err != nil {
		return fmt.Errorf("mark outbox event %s relayed: %w", r.Event.ID, err)
	}
	return nil
}

// MarkFailed records that hookflow refused the row, and why. The row is not
// tried again unless an operator sets it back to pending.
func (c *Claim) MarkFailed(ctx context.Context, r Row, reason string) error {
	if err := c.q.OutboxMarkFailed(ctx, dbsqlc.OutboxMarkFailedParams{Position: r.Position, Failure: &reason}); err != nil {
		return fmt.Errorf("mark outbox event %s failed: %w", r.Event.ID, err)
	}
	return nil
}

// NoteError records a transient error on a row that stays pending.
func (c *Claim) NoteError(ctx context.Context, r Row, msg string) error {
	if err := c.q.OutboxNoteError(ctx, dbsqlc.OutboxNoteErrorParams{Position: r.Position, LastError: &msg}); err != nil {
		return fmt.Errorf("note error on outbox event %s: %w", r.Event.ID, err)
	}
	return nil
}

// Claim takes the tenant's correlation if no other relay holds it and calls
// fn with its pending rows (at most limit), all of that tenant. The claim lasts until fn returns; then
// the marks fn made are committed, also when fn returns an error (rows
// marked relayed before it were relayed), and fn's error is returned. It
// reports claimed=false, without calling fn, when another relay holds the
// correlation or nothing is pending any more.
func (s *Source) Claim(ctx context.Context, corr Correlation, limit int, fn func(ctx context.Context, c *Claim) error) (claimed bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin outbox claim: %w", err)
	}
	defer func() {
		// A no-op after a commit.
		_ = tx.Rollback(context.WithoutCancel(ctx))
	}()
	q := s.q.WithTx(tx)
	locked, err := q.OutboxCorrelationLock(ctx, dbsqlc.OutboxCorrelationLockParams{TenantID: corr.TenantID, CorrelationID: corr.CorrelationID})
	if err != nil {
		return false, fmt.Errorf("lock outbox correlation %s: %w", corr, err)
	}
	if !locked {
		return false, nil
	}
	rows, err := q.OutboxPendingList(ctx, dbsqlc.OutboxPendingListParams{TenantID: corr.TenantID, CorrelationID: corr.CorrelationID, Limit: int32(limit)})
	if err != nil {
		return false, fmt.Errorf("list pending outbox events: %w", err)
	}
	pending := make([]Row, len(rows))
	for i, r := range rows {
		pending[i] = Row{Position: r.Position, PayloadHash: r.PayloadHash, CreatedAt: r.CreatedAt, Attempts: r.Attempts,
			Event: Event{TenantID: r.TenantID, ID: r.ID, CorrelationID: r.CorrelationID, Sequence: r.Sequence, EndpointID: r.EndpointID, Type: r.Type,
				Data: json.RawMessage(r.Data), Metadata: json.RawMessage(r.Metadata)}}
	}
	if len(pending) == 0 {
		return false, nil
	}
	fnErr := fn(ctx, &Claim{q: q, Rows: pending})
	// Commit even when ctx is done: what was marked did happen.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := tx.Commit(cctx); err != nil {
		return true, errors.Join(fnErr, fmt.Errorf("commit outbox claim: %w", err))
	}
	return true, fnErr
}

// Lag returns how many rows are not relayed yet and how long the oldest of
// them has waited.
func (s *Source) Lag(ctx context.Context) (count int, oldest time.Duration, err error) {
	lag, err := s.q.OutboxLag(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read outbox lag: %w", err)
	}
	return int(lag.Pending), time.Duration(math.Round(lag.OldestSecs * float64(time.Second))), nil
}

// FailedCount returns how many rows hookflow refused.
func (s *Source) FailedCount(ctx context.Context) (int, error) {
	n, err := s.q.OutboxFailedCount(ctx)
	if err != nil {
		return 0, fmt.Errorf("count failed outbox events: %w", err)
	}
	return int(n), nil
}

// PruneRelayed deletes up to limit rows relayed more than olderThan ago and
// returns how many it deleted. Failed and pending rows are never pruned.
// Pruning is safe: an id enqueued again after its row is gone is relayed
// again and found already in hookflow's ledger, which is the dedup of record.
func (s *Source) PruneRelayed(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	n, err := s.q.OutboxPruneRelayed(ctx, dbsqlc.OutboxPruneRelayedParams{Secs: olderThan.Seconds(), Limit: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("prune relayed outbox events: %w", err)
	}
	return int(n), nil
}

// Listener receives the notification every committed Enqueue sends. It holds
// a connection of its own (LISTEN is per session) outside the pool.
type Listener struct {
	conn *pgx.Conn
}

// Listen opens a connection with the pool's settings and listens on it.
func (s *Source) Listen(ctx context.Context) (*Listener, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect outbox listener: %w", err)
	}
	if err := dbsqlc.New(conn).OutboxListen(ctx); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("listen for outbox events: %w", err)
	}
	return &Listener{conn: conn}, nil
}

// Wait blocks until a notification arrives, ctx is done or the connection
// fails (then the Listener is of no further use: Close it and Listen again).
func (l *Listener) Wait(ctx context.Context) error {
	if _, err := l.conn.WaitForNotification(ctx); err != nil {
		return fmt.Errorf("wait for outbox notification: %w", err)
	}
	return nil
}

// Close closes the listener's connection.
func (l *Listener) Close(ctx context.Context) error {
	return l.conn.Close(ctx)
}
