// Package relay moves transactional-outbox rows into hookflow. For each row
// it does what POST /v1/events does, through the same package accept: judge
// the event, route it, store it in hookflow's ledger (the same id with the
// same content is already there, which is fine), and start its workflow with
// workflow ID = the event's key, so a relay that crashes and tries again
// never duplicates anything. Only then is the row marked relayed.
//
// Relays claim a correlation, not a row: several may run at once, each
// correlation is worked on by one of them at a time, and its rows go in
// sequence order. While Temporal (or hookflow's database) is unavailable the
// row stays pending and the relay backs off; it catches up by itself.
//
// Every row carries its tenant, and goes into that tenant's ledger, routed
// to that tenant's endpoints: the relay holds the unscoped store and binds
// it per claim (a claim is one tenant's correlation). The relay acts as an
// operator key naming the row's tenant does in the API: a disabled tenant's
// rows are accepted, and their deliveries wait until it is enabled. A row
// naming a tenant that does not exist (yet: the producer may write it
// before the SaaS's backend creates the tenant) is held, never put anywhere
// else: it stays pending with the reason noted, its correlation is tried
// again with backoff, and the other correlations go on.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.temporal.io/api/serviceerror"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/outbox"
)

// Ledger is the part of hookflow's store the relay writes to, bound to one
// tenant (store.Store.Tenant): what acceptance needs, and the tenant.
type Ledger interface {
	accept.Ledger
	// TenantGet tells a tenant that exists from one that does not
	// (store.ErrNotFound).
	TenantGet(ctx context.Context, id string) (store.Tenant, error)
}

// StoreLedgers binds the unscoped store to each row's tenant: what
// Deps.Ledgers is outside tests.
func StoreLedgers(st *store.Store) func(tenantID string) Ledger {
	return func(tenantID string) Ledger { return st.Tenant(tenantID) }
}

// Config tunes a relay; zero values take the defaults.
type Config struct {
	// PollInterval is how often the outbox is read without a notification
	// (notifications are lost while the listener is disconnected). Default 1 s.
	PollInterval time.Duration
	// BatchSize is how many rows of one correlation one claim takes. Default 100.
	BatchSize int
	// ClaimBudget ends a claim early, committing what it did, once it has
	// lasted this long: a claim is a transaction in the producer's database,
	// and a slow Temporal must not stretch it. Default 5 s.
	ClaimBudget time.Duration
	// Concurrency is how many correlations one relay works on at once. Each
	// holds a connection of the outbox pool while it works: size the pool
	// for Concurrency plus two. Default 8.
	Concurrency int
	// StartTimeout bounds one workflow start, with the ledger update after
	// it (which waits while the API's sweep holds the event). Default 30 s;
	// the Temporal client gives up on an unreachable server after 10 s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the exponential pause after a round
	// failed for a transient reason. Defaults 250 ms and 10 s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// LagLogInterval is how often the lag is logged while rows wait, and
	// relayed rows past Retention are pruned. Default 30 s.
	LagLogInterval time.Duration
	// Retention is how long relayed rows stay in the outbox (for operators
	// to look at); then they are deleted. Default 7 days.
	Retention time.Duration
	// MaxSubscribers caps the endpoints one event is routed to, as the
	// API's (HOOKFLOW_MAX_SUBSCRIBERS); past it the row is held, and tried
	// again with backoff (MinBackoff doubling to MaxBackoff).
	// Default contract.DefaultMaxSubscribers.
	MaxSubscribers int
}

// Deps are the relay's collaborators; all are required.
type Deps struct {
	Outbox *outbox.Source
	// Ledgers returns the ledger of a tenant (StoreLedgers): each row is
	// written to its own tenant's, never to a fixed one.
	Ledgers func(tenantID string) Ledger
	// Starter starts a stored event's workflow; it binds the event's own
	// tenant (store.Event.TenantID) itself.
	Starter accept.Starter
	Logger  *slog.Logger
}

// Relay moves outbox rows into hookflow.
type Relay struct {
	cfg    Config
	deps   Deps
	accept *accept.Acceptor

	// held are the correlations whose next row waits for a condition of
	// hookflow's own that may pass (heldError), and until when: the other
	// correlations go on meanwhile. Lost with the process, which only
	// makes the next try come sooner.
	mu   sync.Mutex
	held map[outbox.Correlation]time.Time
}

// heldError is a refusal that may pass without the row changing: more
// endpoints subscribed to its type than HOOKFLOW_MAX_SUBSCRIBERS (an
// operator narrows them, or raises the cap), or a tenant that does not
// exist (it is created). Failing the row for good would leave its sequence
// missing, and its correlation stuck behind the gap; it is tried again,
// with backoff, instead.
type heldError struct {
	// what is the log's message; reason is noted on the row.
	what, reason string
}

func (e *heldError) Error() string { return e.reason }

// New returns a Relay.
func New(cfg Config, deps Deps) (*Relay, error) {
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 100)
	cfg.ClaimBudget = cmp.Or(cfg.ClaimBudget, 5*time.Second)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 8)
	cfg.StartTimeout = cmp.Or(cfg.StartTimeout, 30*time.Second)
	cfg.MinBackoff = cmp.Or(cfg.MinBackoff, 250*time.Millisecond)
	cfg.MaxBackoff = cmp.Or(cfg.MaxBackoff, 10*time.Second)
	cfg.LagLogInterval = cmp.Or(cfg.LagLogInterval, 30*time.Second)
	cfg.Retention = cmp.Or(cfg.Retention, 7*24*time.Hour)
	cfg.MaxSubscribers = cmp.Or(cfg.MaxSubscribers, contract.DefaultMaxSubscribers)
	if deps.Outbox == nil || deps.Ledgers == nil || deps.Starter == nil || deps.Logger == nil {
		return nil, errors.New("relay: outbox, ledgers, starter and logger are required")
	}
	if cfg.PollInterval < 0 || cfg.BatchSize < 1 || cfg.ClaimBudget < 0 || cfg.Concurrency < 1 || cfg.StartTimeout < 0 ||
		cfg.MinBackoff < 0 || cfg.MaxBackoff < cfg.MinBackoff || cfg.LagLogInterval < 0 || cfg.Retention < 0 {
		return nil, errors.New("relay: invalid config")
	}
	// A row naming a disabled endpoint is accepted, its event waiting in
	// the paused lane: failed, it would leave its sequence missing and its
	// correlation stuck; the API's reason to refuse (a key minting dead
	// letters) is no producer's database's.
	acceptor, err := accept.New(accept.Config{MaxSubscribers: cfg.MaxSubscribers, StartTimeout: cfg.StartTimeout}, deps.Starter)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	return &Relay{cfg: cfg, deps: deps, accept: acceptor, held: map[outbox.Correlation]time.Time{}}, nil
}

// Lag returns how many outbox rows are not relayed yet and how long the
// oldest of them has waited.
func (r *Relay) Lag(ctx context.Context) (count int, oldest time.Duration, err error) {
	return r.deps.Outbox.Lag(ctx)
}

// Run relays until ctx is done, then returns nil. It wakes on the outbox's
// notifications and polls every PollInterval besides; after a round that
// failed for a transient reason it backs off exponentially up to MaxBackoff.
func (r *Relay) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.listen(ctx, wake) }()
	go func() { defer wg.Done(); r.housekeep(ctx) }()
	defer wg.Wait()

	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	pause, failures := r.newBackoff(), 0
	for {
		n, err := r.RelayOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			d := pause.NextBackOff()
			r.deps.Logger.Warn("outbox relay paused", "error", err, "relayed", n, "retry_in", d.Round(time.Millisecond).String())
			if !sleep(ctx, d) {
				return nil
			}
			continue
		}
		if failures > 0 {
			r.deps.Logger.Info("outbox relay resumed", "after_failures", failures)
			pause.Reset()
			failures = 0
		}
		if n > 0 {
			continue // more may be waiting
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-poll.C:
		}
	}
}

// RelayOnce relays what is pending now, one claim per correlation, and
// returns how many rows it relayed. An error means some rows stayed pending
// for a transient reason (Temporal or a database unavailable); rows hookflow
// refuses are marked failed, and rows it holds (too many subscribers) wait
// with their correlation, neither of which is an error of the round.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	limit := r.cfg.Concurrency * 8
	r.mu.Lock()
	skip := len(r.held)
	r.mu.Unlock()
	// Held correlations are asked for besides, so that they do not take
	// the places of those that can go.
	corrs, err := r.deps.Outbox.CorrelationsPending(ctx, limit+skip)
	if err != nil {
		return 0, err
	}
	corrs = r.ready(corrs, time.Now())
	corrs = corrs[:min(len(corrs), limit)]
	var (
		mu    sync.Mutex
		total int
		errs  []error
		wg    sync.WaitGroup
	)
	jobs := make(chan outbox.Correlation)
	for range min(r.cfg.Concurrency, len(corrs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				n, err := r.relayCorrelation(ctx, c)
				mu.Lock()
				total += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, c := range corrs {
		mu.Lock()
		failed := len(errs) > 0
		mu.Unlock()
		// After one transient failure the rest would most likely wait out
		// the same outage, one start timeout each: leave them to the next
		// round, after the backoff.
		if failed || ctx.Err() != nil {
			break
		}
		jobs <- c
	}
	close(jobs)
	wg.Wait()
	return total, errors.Join(errs...)
}

// relayCorrelation relays one claim's rows of the tenant's correlation in
// sequence order, into the tenant's ledger, stopping at the first transient
// error or when the claim's budget is spent (the next round goes on from
// there).
func (r *Relay) relayCorrelation(ctx context.Context, corr outbox.Correlation) (int, error) {
	n := 0
	ledger := r.deps.Ledgers(corr.TenantID)
	_, err := r.deps.Outbox.Claim(ctx, corr, r.cfg.BatchSize, func(ctx context.Context, c *outbox.Claim) error {
		// Once per claim: every row of it is the tenant's.
		if _, err := ledger.TenantGet(ctx, corr.TenantID); errors.Is(err, store.ErrNotFound) {
			return r.holdRow(ctx, c, corr, c.Rows[0], &heldError{what: "outbox event held: unknown tenant",
				reason: fmt.Sprintf("unknown tenant %s: held until it is created (PUT /v1/tenants/%s)", corr.TenantID, corr.TenantID)})
		} else if err != nil {
			return err
		}
		began := time.Now()
		for _, row := range c.Rows {
			if time.Since(began) > r.cfg.ClaimBudget {
				break
			}
			reason, err := r.relayRow(ctx, ledger, row)
			if held := (*heldError)(nil); errors.As(err, &held) {
				return r.holdRow(ctx, c, corr, row, held)
			}
			if err != nil {
				return errors.Join(err, c.NoteError(ctx, row, err.Error()))
			}
			if reason != "" {
				if err := c.MarkFailed(ctx, row, reason); err != nil {
					return err
				}
				r.deps.Logger.Warn("outbox event refused by hookflow", "tenant_id", row.Event.TenantID, "event_id", row.Event.ID,
					"correlation_id", row.Event.CorrelationID, "sequence", row.Event.Sequence, "reason", reason)
				continue
			}
			if err := c.MarkRelayed(ctx, row); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		// The claim commits what was marked before the error, but a failed
		// commit undoes all of it; either way those rows are safe to relay
		// again, so report none rather than guess.
		return 0, err
	}
	return n, nil
}

// holdRow notes why row is held (attempts, last_error) and holds its
// correlation back with it, as the rest of the correlation must not
// overtake it. It is no failure of the round, which goes on with the other
// correlations. The first hold of a row is a warning; the next ones, the
// backoff's, are logged at debug (the row's last_error and the lag report's
// held count keep them visible), so a long hold does not flood the log.
func (r *Relay) holdRow(ctx context.Context, c *outbox.Claim, corr outbox.Correlation, row outbox.Row, held *heldError) error {
	if err := c.NoteError(ctx, row, held.reason); err != nil {
		return err
	}
	attempts := row.Attempts + 1
	d := r.hold(corr, attempts, time.Now())
	level := slog.LevelDebug
	if attempts == 1 {
		level = slog.LevelWarn
	}
	r.deps.Logger.Log(ctx, level, held.what, "tenant_id", row.Event.TenantID, "event_id", row.Event.ID,
		"correlation_id", row.Event.CorrelationID, "sequence", row.Event.Sequence, "type", row.Event.Type,
		"attempts", attempts, "retry_in", d.Round(time.Millisecond).String(), "reason", held.reason)
	return nil
}

// relayRow puts one row into hookflow, through its tenant's ledger, as the
// API accepts a post (package accept). It returns a non-empty reason when
// hookflow refuses the event for good (as the API would with 4xx), a
// *heldError when hookflow refuses it for now (too many subscribers), and
// another error when the row should be tried again later: the ledger or
// Temporal unavailable, the event then left queued in the ledger.
func (r *Relay) relayRow(ctx context.Context, ledger Ledger, row outbox.Row) (string, error) {
	o, err := r.accept.Accept(ctx, ledger, accept.Request{Event: row.Event.Request(), PayloadHash: row.PayloadHash})
	if err != nil {
		return "", err
	}
	ev := o.Event
	switch o.Kind {
	case accept.Accepted, accept.Repost:
	case accept.Invalid:
		return fmt.Sprintf("invalid event: %s: %s", o.Invalid.Field, o.Invalid.Detail), nil
	case accept.SchemaInvalid:
		// Refused for good, as an invalid field is: the producer wrote
		// data its own catalog refuses. Its sequence stays missing until
		// an operator voids it or the producer sends a valid one.
		v := o.Violation
		return fmt.Sprintf("schema violation: %s (event type %s, catalog version %d)", v.Field.Detail, v.Type, v.Version), nil
	case accept.PayloadMismatch:
		// Enqueue stores the hash of what it stores; a mismatch means the
		// row was written or edited around it.
		return "payload_hash does not match the row's content (row not written by outbox.Enqueue?)", nil
	case accept.UnknownEndpoint:
		return "unknown endpoint " + ev.EndpointID, nil
	case accept.TooManySubscribers:
		return "", &heldError{what: "outbox event held: too many subscribers", reason: fmt.Sprintf("more than %d endpoints are subscribed to type %s (HOOKFLOW_MAX_SUBSCRIBERS): held until fewer are, or the setting is raised", r.cfg.MaxSubscribers, ev.Type)}
	case accept.KeyReused, accept.SequenceTaken:
		return o.Detail(), nil
	default:
		return "", fmt.Errorf("relay event %s: unexpected outcome %d", ev.ID, o.Kind)
	}
	if o.Started {
		return "", nil
	}
	var invalid *serviceerror.InvalidArgument
	if errors.As(o.StartErr, &invalid) {
		// Temporal refuses this input whatever we do (too large, say).
		// The ledger row stays queued; an operator has to act on it.
		return "workflow start rejected: " + o.StartErr.Error(), nil
	}
	return "", o.StartErr
}

// listen pokes wake on every outbox notification, reconnecting (with
// backoff) when the connection drops. After each (re)connect it pokes once,
// since notifications sent while disconnected are lost.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	pause := r.newBackoff()
	for ctx.Err() == nil {
		l, err := r.deps.Outbox.Listen(ctx)
		if err != nil {
			if ctx.Err() == nil {
				d := pause.NextBackOff()
				r.deps.Logger.Warn("outbox listener down; polling only", "error", err, "retry_in", d.Round(time.Millisecond).String())
				sleep(ctx, d)
			}
			continue
		}
		pause.Reset()
		for {
			poke(wake)
			if err := l.Wait(ctx); err != nil {
				if ctx.Err() == nil {
					r.deps.Logger.Warn("outbox listener lost", "error", err)
				}
				break
			}
		}
		_ = l.Close(context.WithoutCancel(ctx))
	}
}

// housekeep logs the lag every LagLogInterval while rows wait (and once
// when the outbox has caught up), with the correlations held (an unknown
// tenant, too many subscribers), and prunes relayed rows past Retention.
func (r *Relay) housekeep(ctx context.Context) {
	t := time.NewTicker(r.cfg.LagLogInterval)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.logLag(ctx, &waiting); err != nil && ctx.Err() == nil {
			r.deps.Logger.Warn("read outbox lag", "error", err)
		}
		if n, err := r.prune(ctx); err != nil && ctx.Err() == nil {
			r.deps.Logger.Warn("prune relayed outbox events", "error", err, "pruned", n)
		} else if n > 0 {
			r.deps.Logger.Info("pruned relayed outbox events", "count", n, "retention", r.cfg.Retention.String())
		}
	}
}

func (r *Relay) logLag(ctx context.Context, waiting *bool) error {
	count, oldest, err := r.Lag(ctx)
	if err != nil {
		return err
	}
	failed, err := r.deps.Outbox.FailedCount(ctx)
	if err != nil {
		return err
	}
	if count > 0 || *waiting {
		r.deps.Logger.Info("outbox lag", "pending", count, "oldest_seconds", oldest.Seconds(), "failed", failed, "held_correlations", r.Held())
	}
	*waiting = count > 0
	return nil
}

// prune deletes relayed rows past retention, a batch at a time, at most
// 100 batches per call so it never holds up the next lag report for long.
func (r *Relay) prune(ctx context.Context) (int, error) {
	const batch = 1000
	total := 0
	for range 100 {
		n, err := r.deps.Outbox.PruneRelayed(ctx, r.cfg.Retention, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
	return total, nil
}

func poke(wake chan<- struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}

// sleep waits d or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Held returns how many correlations this relay holds back now (an unknown
// tenant, too many subscribers), each until its backoff ends.
func (r *Relay) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	now, n := time.Now(), 0
	for _, until := range r.held {
		if now.Before(until) {
			n++
		}
	}
	return n
}

// hold holds the correlation back after its row was held for the
// attempts-th time: MinBackoff, doubling with each attempt up to
// MaxBackoff (the attempts are the row's, kept in the outbox, so a
// restarted relay goes on from there). It returns the pause.
func (r *Relay) hold(corr outbox.Correlation, attempts int32, now time.Time) time.Duration {
	d := r.cfg.MinBackoff
	for i := int32(1); i < attempts && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.cfg.MaxBackoff)
	r.mu.Lock()
	r.held[corr] = now.Add(d)
	r.mu.Unlock()
	return d
}

// ready drops from corrs those held past now, and forgets the holds that
// have ended.
func (r *Relay) ready(corrs []outbox.Correlation, now time.Time) []outbox.Correlation {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c, until := range r.held {
		if !now.Before(until) {
			delete(r.held, c)
		}
	}
	return slices.DeleteFunc(corrs, func(c outbox.Correlation) bool { _, held := r.held[c]; return held })
}

// newBackoff returns the pause after a failure: MinBackoff, doubling up to
// MaxBackoff, each with ±20 % jitter so relays that failed together do not
// retry in step. Reset starts it over.
func (r *Relay) newBackoff() *backoff.ExponentialBackOff {
	return &backoff.ExponentialBackOff{
		InitialInterval:     r.cfg.MinBackoff,
		RandomizationFactor: 0.2,
		Multiplier:          2,
		MaxInterval:         r.cfg.MaxBackoff,
	}
}
