package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/schema/dbsqlc"
)

// The circuit breaker per endpoint (migrations 013 and 015). Its state is the endpoint_circuits row, shared by every worker and
// kept through any crash; an endpoint without a row is closed with no
// failure counted. Each transition (CircuitSucceeded, CircuitFailed) runs
// in one transaction holding the row's lock, with what it implies: a close
// schedules the auto-replay of the outage's dead letters, and a failure
// that has lasted disable_after disables the endpoint.

// Circuit states. A half-open circuit had a probe answered and waits for
// more answers in a row (CloseSuccesses) before it closes: to the attempts
// it is open (one probe at a time), with the next probe due at once.
const (
	CircuitClosed   = "closed"
	CircuitHalfOpen = "half_open"
	CircuitOpen     = "open"
)

// DefaultCloseSuccesses is how many answers in a row close an open
// circuit, unless the workers are told otherwise
// (HOOKFLOW_CIRCUIT_CLOSE_SUCCESSES): one answer of a flapping receiver no
// longer ends its outage.
const DefaultCloseSuccesses = 3

// FlapReopenMultiple is how many times the probe backoff a circuit closed
// with must pass, counted from the close, before an opening is an outage
// of its own. One sooner is the same outage going on (a flapping
// receiver): its failing_since is the first failure of the outage the
// close ended, so disable_after counts from there, and its backoff
// doubles on from the one it closed with.
const FlapReopenMultiple = 4

// CircuitEventEvery coalesces an endpoint's circuit_opened and
// circuit_closed events: a transition within it of the last event
// publishes nothing and is counted, but for a close after a published
// opening (an alert is resolved at once). Once it is over the API's sweep
// publishes the state in force if the subscribers were last told another
// (CircuitsEventCatchUp), with the count of transitions left out. So a
// flapper makes at most about one opened and one closed event per
// interval, and the subscribers' picture is never wrong for longer. A
// minimum interval, not "none while one is unsent": a healthy subscriber
// takes each event within milliseconds, so only an interval bounds the
// events a flapper makes.
const CircuitEventEvery = time.Minute

// Probe backoff: the first probe of an open circuit is due this long after
// it opened, and each failed probe doubles the wait, up to the maximum.
const (
	ProbeBackoffInitial = 5 * time.Second
	ProbeBackoffMax     = 5 * time.Minute
)

// What opened a circuit, as its circuit_opened event names it: the
// consecutive failures at their threshold, or the failure rate of the
// window.
const (
	TriggerConsecutiveFailures = "consecutive_failures"
	TriggerFailureRate         = "failure_rate"
	// TriggerCaughtUp: the opening was left out of its interval
	// (CircuitEventEvery), and this event tells it late.
	TriggerCaughtUp = "caught_up"
)

// RateCountEvery is how often, at most, a failure of an endpoint counts
// its window for the failure rate: an endpoint failing many times a second
// at a rate under its threshold costs one count of its window a second,
// not one per failure under the circuit's lock. A failure within it of the
// last count leaves the rate to the next failure after it.
const RateCountEvery = time.Second

// Circuit is an endpoint's breaker as the ledger has it.
type Circuit struct {
	State               string
	ConsecutiveFailures int
	// FailingSince is the first failure of the current run of failures;
	// nil while the endpoint answers.
	FailingSince *time.Time
	OpenedAt     *time.Time
	NextProbeAt  *time.Time
	ProbeBackoff time.Duration
	ProbeOwner   *string
	ProbeLease   *time.Time
	// AutoReplayPendingSince is set from a close until the auto-replay of
	// the outage's dead letters is done.
	AutoReplayPendingSince *time.Time
	// ClosedAt is when it last closed (or its endpoint was enabled again):
	// the failure rate counts no attempt before it. RateCountedAt is when a
	// failure last counted the window.
	ClosedAt      *time.Time
	RateCountedAt *time.Time
	// ProbeSuccesses counts the answers in a row of a half-open circuit.
	ProbeSuccesses int
	// OutageFailingSince and OutageBackoff are the failing_since and probe
	// backoff of the outage its last close ended (FlapReopenMultiple), and
	// OutageOpenedAt when it opened (a late circuit_closed names it).
	OutageFailingSince *time.Time
	OutageBackoff      time.Duration
	OutageOpenedAt     *time.Time
	// EventState is the state the last circuit_opened or circuit_closed
	// event told (open or closed), EventAt when it was published, and
	// EventsCoalesced the transitions published nothing since
	// (CircuitEventEvery).
	EventState      *string
	EventAt         *time.Time
	EventsCoalesced int
	// Now is the database's clock when it was read.
	Now time.Time
}

// Open says whether attempts find the circuit open: open or half-open.
func (c Circuit) Open() bool { return c.State != CircuitClosed }

// circuitOf is a circuit as CircuitGet and CircuitForUpdate return it.
func circuitOf(r dbsqlc.CircuitGetRow) Circuit {
	return Circuit{State: r.State, ConsecutiveFailures: int(r.ConsecutiveFailures), FailingSince: r.FailingSince,
		OpenedAt: r.OpenedAt, NextProbeAt: r.NextProbeAt, ProbeBackoff: millis(&r.ProbeBackoffMs),
		ProbeOwner: r.ProbeOwner, ProbeLease: r.ProbeLeaseUntil, AutoReplayPendingSince: r.AutoReplayPendingSince,
		ClosedAt: r.ClosedAt, RateCountedAt: r.RateCountedAt, ProbeSuccesses: int(r.ProbeSuccesses),
		OutageFailingSince: r.OutageFailingSince, OutageBackoff: millis(r.OutageBackoffMs), OutageOpenedAt: r.OutageOpenedAt,
		EventState: r.EventState, EventAt: r.EventAt, EventsCoalesced: int(r.EventsCoalesced), Now: r.Now}
}

func (s *Store) setCircuit(ctx context.Context, tx pgx.Tx, endpointID string, c Circuit) error {
	var outageBackoffMS *int64
	if c.OutageFailingSince != nil {
		ms := c.OutageBackoff.Milliseconds()
		outageBackoffMS = &ms
	}
	return s.q.WithTx(tx).CircuitSet(ctx, dbsqlc.CircuitSetParams{EndpointID: endpointID, State: c.State,
		ConsecutiveFailures: int32(c.ConsecutiveFailures), FailingSince: c.FailingSince, OpenedAt: c.OpenedAt,
		NextProbeAt: c.NextProbeAt, ProbeBackoffMs: c.ProbeBackoff.Milliseconds(), ProbeOwner: c.ProbeOwner,
		ProbeLeaseUntil: c.ProbeLease, AutoReplayPendingSince: c.AutoReplayPendingSince, ClosedAt: c.ClosedAt,
		RateCountedAt: c.RateCountedAt, ProbeSuccesses: int32(c.ProbeSuccesses), OutageFailingSince: c.OutageFailingSince,
		OutageBackoffMs: outageBackoffMS, EventState: c.EventState, EventAt: c.EventAt,
		EventsCoalesced: int32(c.EventsCoalesced), OutageOpenedAt: c.OutageOpenedAt})
}

// CircuitGet returns the endpoint's circuit: closed with no failure, and
// Now zero, when it has no row.
func (s *Store) CircuitGet(ctx context.Context, endpointID string) (Circuit, error) {
	r, err := s.q.CircuitGet(ctx, endpointID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Circuit{State: CircuitClosed, ProbeBackoff: ProbeBackoffInitial}, nil
	}
	if err != nil {
		return Circuit{}, fmt.Errorf("get circuit: %w", err)
	}
	return circuitOf(r), nil
}

// ProbeClaim is the answer of CircuitProbeClaim: Claimed when this attempt
// is the probe; otherwise Open says whether the circuit still is, and Wait
// how long until the next probe may be claimed (by the database's clock).
type ProbeClaim struct {
	Claimed bool
	Open    bool
	Wait    time.Duration
}

// CircuitProbeClaim claims the probe of the endpoint's open circuit for
// owner, for lease: at most one attempt holds it at a time, across every
// worker, and only once the next probe is due, or at once for a replay's
// attempt (now). The owner that holds the lease claims it again (its
// attempt was throttled after the claim). A circuit found closed (a probe
// closed it meanwhile) answers Open false: the attempt sends.
func (s *Store) CircuitProbeClaim(ctx context.Context, endpointID, owner string, lease time.Duration, now bool) (ProbeClaim, error) {
	r, err := s.q.CircuitProbeClaim(ctx, dbsqlc.CircuitProbeClaimParams{EndpointID: endpointID, ProbeOwner: &owner, Secs: lease.Seconds(), Column4: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return ProbeClaim{}, nil
	}
	if err != nil {
		return ProbeClaim{}, fmt.Errorf("claim circuit probe: %w", err)
	}
	p := ProbeClaim{Claimed: r.Claimed, Open: !r.Claimed && r.State != CircuitClosed}
	if p.Open {
		p.Wait = max(time.Duration(r.WaitSecs*float64(time.Second)), 0)
	}
	return p, nil
}

// CircuitTransition is what a success or failure did to the circuit.
type CircuitTransition struct {
	Opened, Closed, Disabled bool
	// Trigger is what opened it (TriggerConsecutiveFailures or
	// TriggerFailureRate), when Opened.
	Trigger string
	// Window is the failure rate's count, when the failure counted it.
	Window  *RateWindow
	Circuit Circuit
}

// RateWindow is a failure's count of its endpoint's window: the attempts
// started after Since (the window's start, or the circuit's last close if
// later), and the retryable failures among them.
type RateWindow struct {
	Since              time.Time
	Attempts, Failures int
}

// CircuitSucceeded records that the endpoint answered (a delivery, or a
// rejection: either way it is up): the failures counted are forgotten. An
// open or half-open circuit counts the answer, and closes at
// closeSuccesses in a row (zero: DefaultCloseSuccesses); short of it, it is
// half-open, with its next probe due at once and nothing published. When
// it closes and autoReplay is set, the outage's auto-replay is scheduled
// (AutoReplayPendingSince = the outage's first failure) in the same
// transaction. Callers skip it on the happy path (closed, nothing
// counted), which their attempt's start read tells them.
func (s *Store) CircuitSucceeded(ctx context.Context, endpointID string, autoReplay bool, closeSuccesses int) (CircuitTransition, error) {
	closeSuccesses = cmp.Or(closeSuccesses, DefaultCloseSuccesses)
	var t CircuitTransition
	err := s.lockedCircuit(ctx, endpointID, func(tx pgx.Tx, c Circuit) error {
		var err error
		switch {
		case c.State == CircuitClosed && c.ConsecutiveFailures == 0:
			t.Circuit = c
			return nil
		case c.Open() && c.ProbeSuccesses+1 < closeSuccesses:
			// Not yet: the next attempt probes at once, holding the lease
			// as any probe does. The row asks to wake the endpoint's lanes
			// (CircuitSet, as probe_successes goes up): one parked on the
			// circuit sends that probe now, not when its timer ends.
			now := c.Now
			c.State, c.ProbeSuccesses, c.ConsecutiveFailures = CircuitHalfOpen, c.ProbeSuccesses+1, 0
			c.NextProbeAt, c.ProbeOwner, c.ProbeLease = &now, nil, nil
			t.Circuit = c
			return s.setCircuit(ctx, tx, endpointID, c)
		}
		t, err = s.circuitClose(ctx, tx, endpointID, c, autoReplay)
		return err
	})
	if err != nil {
		return t, fmt.Errorf("record circuit success: %w", err)
	}
	return t, nil
}

// circuitClose is the transition to closed, in tx holding the row's lock:
// the one place that publishes circuit_closed (circuitEvent). The outage
// it ends is kept (OutageFailingSince, OutageBackoff) for a reopening
// within FlapReopenMultiple of its backoff. With autoReplay it schedules
// the replay of the outage's dead letters from c.replayFrom().
func (s *Store) circuitClose(ctx context.Context, tx pgx.Tx, endpointID string, c Circuit, autoReplay bool) (CircuitTransition, error) {
	t := CircuitTransition{Closed: c.Open()}
	if t.Closed && autoReplay {
		since := c.replayFrom()
		c.AutoReplayPendingSince = &since
	}
	opened := c
	if t.Closed {
		c.OutageFailingSince, c.OutageBackoff, c.OutageOpenedAt = c.FailingSince, c.ProbeBackoff, c.OpenedAt
	}
	c.State, c.ConsecutiveFailures, c.FailingSince, c.OpenedAt, c.NextProbeAt = CircuitClosed, 0, nil, nil, nil
	c.ProbeBackoff, c.ProbeOwner, c.ProbeLease, c.ProbeSuccesses = ProbeBackoffInitial, nil, nil, 0
	var publish bool
	var left int
	if t.Closed {
		// The outage's failures are the breaker's past: the failure rate
		// counts from here.
		closed := c.Now
		c.ClosedAt = &closed
		publish, left = c.circuitEventDue()
	}
	t.Circuit = c
	if err := s.setCircuit(ctx, tx, endpointID, c); err != nil {
		return t, err
	}
	if publish {
		return t, s.circuitClosedEvent(ctx, tx, endpointID, opened, left)
	}
	return t, nil
}

// replayFrom is where the auto-replay of a close of c (open, in the
// transaction that closes it) starts: the outage's first failure, or the
// circuit's previous close (or enabling) when that came first, or the
// pending auto-replay's start when earlier still. Every time in it is the
// database's, as dead_lettered_at is. So a close takes every open dead
// letter of an outage written since the replay point before it, whatever
// came between: a reopening later than FlapReopenMultiple backoffs (a new
// failing_since), an operator's enabling (which forgets the outage before
// it), or none; a dead letter written after this close whose delivery was
// in flight at it asks for a pass of its own
// (CircuitLateOutageDeadLetter).
func (c Circuit) replayFrom() time.Time {
	since := c.Now
	for _, t := range []*time.Time{c.FailingSince, c.ClosedAt, c.AutoReplayPendingSince} {
		if t != nil && t.Before(since) {
			since = *t
		}
	}
	return since
}

// circuitEventDue says whether the transition c just made (its State is
// the new one) publishes its event now, and records it in c: yes unless
// one was published within CircuitEventEvery, and then the transition is
// counted for the sweep (CircuitsEventCatchUp). It returns the
// transitions left out before this one, which its event names.
func (c *Circuit) circuitEventDue() (bool, int) {
	resolves := !c.Open() && c.EventState != nil && *c.EventState == CircuitOpen
	if c.EventAt != nil && c.Now.Sub(*c.EventAt) < CircuitEventEvery && !resolves {
		c.EventsCoalesced++
		return false, 0
	}
	told, at, left := CircuitClosed, c.Now, c.EventsCoalesced
	if c.Open() {
		told = CircuitOpen
	}
	c.EventState, c.EventAt, c.EventsCoalesced = &told, &at, 0
	return true, left
}

// CircuitFailed records a retryable failure of an attempt to the endpoint
// (owner names the attempt, as it claimed a probe), recorded already in
// its attempts, under its settings st: a closed circuit counts it and
// opens at FailureThreshold consecutive ones, or when the window's failure
// rate reaches FailureRate (circuitTrigger), due for its first probe
// ProbeBackoffInitial later (or, within FlapReopenMultiple of a close, on
// from the outage that close ended: reopenBackoff); the failed probe of an
// open one, or any failure of a half-open one, opens it again for twice
// the backoff (up to ProbeBackoffMax), and frees the lease. An attempt
// that was in flight when the circuit opened only counts. When the
// run of failures has lasted DisableAfterOrDefault, the endpoint is
// disabled, in the same transaction.
func (s *Store) CircuitFailed(ctx context.Context, endpointID, owner string, st Settings) (CircuitTransition, error) {
	disableAfter := st.DisableAfterOrDefault()
	var t CircuitTransition
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := q.CircuitEnsure(ctx, endpointID); err != nil {
			return err
		}
		r, err := q.CircuitForUpdate(ctx, endpointID)
		if err != nil {
			return translate(err)
		}
		c := circuitOf(dbsqlc.CircuitGetRow(r))
		c.ConsecutiveFailures++
		if c.FailingSince == nil {
			now := c.Now
			c.FailingSince = &now
		}
		switch {
		case c.State == CircuitClosed:
			if t.Trigger, t.Window, err = s.circuitTrigger(ctx, tx, endpointID, &c, st); err != nil {
				return err
			}
			if t.Trigger != "" {
				circuitOpen(&c, c.reopenBackoff())
				t.Opened = true
			}
		case c.State == CircuitHalfOpen:
			// Any failure before the answers in a row are in: the outage
			// goes on, from its failing_since, the backoff doubled.
			circuitOpen(&c, min(2*c.ProbeBackoff, ProbeBackoffMax))
		case c.State == CircuitOpen && c.ProbeOwner != nil && *c.ProbeOwner == owner:
			backoff := min(2*c.ProbeBackoff, ProbeBackoffMax)
			if c.NextProbeAt != nil && c.Now.Before(*c.NextProbeAt) {
				// A replay's probe, made before the probe was due, failed: the
				// backoff stays, so a burst of replays (an auto-replay's, an
				// operator's) each probing at once cannot push the next probe
				// out to ProbeBackoffMax within a second (found by the chaos
				// run: 6 replays took it from 5 s to 5 min).
				backoff = c.ProbeBackoff
			}
			circuitOpen(&c, backoff)
		}
		var publishOpened bool
		var left int
		if t.Opened {
			publishOpened, left = c.circuitEventDue()
		}
		t.Circuit = c
		if err := s.setCircuit(ctx, tx, endpointID, c); err != nil {
			return err
		}
		// The endpoint's row is locked before the operational events' sequence
		// row, as in every transaction that locks both (a dead letter of the
		// disabling checks the endpoint before publishing): none waits for
		// the other's.
		var reason string
		if c.Now.Sub(*c.FailingSince) >= disableAfter {
			if t.Disabled, reason, err = s.circuitDisable(ctx, tx, endpointID, c, disableAfter); err != nil {
				return err
			}
		}
		if publishOpened {
			if err := s.circuitOpenedEvent(ctx, tx, endpointID, t, st, left); err != nil {
				return err
			}
		}
		if t.Disabled {
			return s.endpointDisabledEvent(ctx, tx, endpointID, reason)
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("record circuit failure: %w", err)
	}
	return t, nil
}

// circuitTrigger says whether the failure just counted in c, a closed
// circuit, opens it, and by which trigger: its consecutive failures at
// their threshold, or else the failure rate of its window. The window is
// counted from the recorded attempts, on this failure path alone (a
// success costs the rate nothing), and at most once per RateCountEvery
// (c.RateCountedAt, which the caller writes with the row): it returns the
// count when it made one.
func (s *Store) circuitTrigger(ctx context.Context, tx pgx.Tx, endpointID string, c *Circuit, st Settings) (string, *RateWindow, error) {
	if c.ConsecutiveFailures >= st.FailureThreshold() {
		return TriggerConsecutiveFailures, nil, nil
	}
	if c.RateCountedAt != nil && c.Now.Sub(*c.RateCountedAt) < RateCountEvery {
		return "", nil, nil
	}
	now := c.Now
	c.RateCountedAt = &now
	w := RateWindow{Since: c.Now.Add(-st.RateWindow())}
	if c.ClosedAt != nil && c.ClosedAt.After(w.Since) {
		w.Since = *c.ClosedAt
	}
	r, err := s.q.WithTx(tx).CircuitWindowAttempts(ctx, dbsqlc.CircuitWindowAttemptsParams{EndpointID: endpointID, StartedAt: w.Since})
	if err != nil {
		return "", nil, fmt.Errorf("count window: %w", err)
	}
	w.Attempts, w.Failures = int(r.Attempts), int(r.Failures)
	if w.Attempts >= st.MinAttempts() && 100*w.Failures >= st.FailureRate()*w.Attempts {
		return TriggerFailureRate, &w, nil
	}
	return "", &w, nil
}

// reopenBackoff is the probe backoff of a closed circuit c that opens
// now: ProbeBackoffInitial, unless it closed less than FlapReopenMultiple
// times the backoff of the outage that close ended ago. Then it is that
// outage going on (a flapping receiver): c's failing_since becomes the
// outage's, and the backoff doubles on from the outage's.
func (c *Circuit) reopenBackoff() time.Duration {
	if c.OutageFailingSince == nil || c.ClosedAt == nil || c.Now.Sub(*c.ClosedAt) >= FlapReopenMultiple*c.OutageBackoff {
		return ProbeBackoffInitial
	}
	if c.FailingSince == nil || c.OutageFailingSince.Before(*c.FailingSince) {
		since := *c.OutageFailingSince
		c.FailingSince = &since
	}
	return min(2*c.OutageBackoff, ProbeBackoffMax)
}

// circuitOpen opens c (again) for backoff, and frees its probe lease; a
// half-open circuit's answers in a row start over.
func circuitOpen(c *Circuit, backoff time.Duration) {
	if !c.Open() {
		opened := c.Now
		c.OpenedAt = &opened
	}
	next := c.Now.Add(backoff)
	c.State, c.NextProbeAt, c.ProbeBackoff, c.ProbeOwner, c.ProbeLease = CircuitOpen, &next, backoff, nil, nil
	c.ProbeSuccesses = 0
}

// circuitDisable disables the endpoint whose failures have lasted
// disableAfter, in tx, and reports whether it did (not when it already
// was) and why; CircuitFailed publishes endpoint disabled for it.
func (s *Store) circuitDisable(ctx context.Context, tx pgx.Tx, endpointID string, c Circuit, disableAfter time.Duration) (bool, string, error) {
	reason := fmt.Sprintf("failing since %s, longer than disable_after (%s): disabled by hookflow", c.FailingSince.UTC().Format(time.RFC3339), disableAfter)
	n, err := s.q.WithTx(tx).EndpointDisableIfEnabled(ctx, dbsqlc.EndpointDisableIfEnabledParams{ID: endpointID, DisabledReason: &reason})
	if err != nil || n == 0 {
		return false, "", err
	}
	return true, reason, nil
}

// lockedCircuit runs fn in a transaction that holds the lock on the
// endpoint's circuit row, with the row as read; nothing runs when the
// endpoint has none (it never failed).
func (s *Store) lockedCircuit(ctx context.Context, endpointID string, fn func(pgx.Tx, Circuit) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := s.q.WithTx(tx).CircuitForUpdate(ctx, endpointID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(tx, circuitOf(dbsqlc.CircuitGetRow(r)))
	})
}

// CircuitReset closes the endpoint's circuit and forgets its failures (an
// operator enabled it again), keeping a pending auto-replay. An open (or
// half-open) circuit closes as a probe's success closes it (circuitClose): the
// operator says the endpoint answers again, so circuit_closed is published
// and, with autoReplay, the outage's dead letters are scheduled for
// auto-replay; enabling replays only those its disabling wrote. With
// autoReplay a closed circuit that closed before schedules the outages'
// dead letters written since that close (its replay point, which the
// enabling moves on): those a delivery in flight at it wrote while the
// endpoint was disabled, and those written before a reopening that would
// now be a new outage's. One that never closed only forgets its failures.
func (s *Store) CircuitReset(ctx context.Context, endpointID string, autoReplay bool) error {
	err := s.lockedCircuit(ctx, endpointID, func(tx pgx.Tx, c Circuit) error {
		var since *time.Time
		switch {
		case c.Open():
			if _, err := s.circuitClose(ctx, tx, endpointID, c, autoReplay); err != nil {
				return err
			}
		case autoReplay && c.ClosedAt != nil:
			from := c.replayFrom()
			since = &from
		}
		return s.q.WithTx(tx).CircuitReset(ctx, dbsqlc.CircuitResetParams{EndpointID: endpointID, ReplaySince: since})
	})
	if err != nil {
		return fmt.Errorf("reset circuit: %w", err)
	}
	return nil
}

// AutoReplayPending is a closed circuit's auto-replay not yet done: the
// endpoint's open dead letters written since Since are the outage's.
type AutoReplayPending struct {
	TenantID   string
	EndpointID string
	Since      time.Time
	// Requested is the stamp of the close (or late dead letter) that asked
	// for it: CircuitAutoReplayDone clears only that request.
	Requested *time.Time
}

// CircuitsAutoReplayPending returns up to limit pending auto-replays,
// tenants in turn (every tenant's first before anyone's second), each
// tenant's oldest first.
func (s *Store) CircuitsAutoReplayPending(ctx context.Context, limit int) ([]AutoReplayPending, error) {
	rows, err := s.q.CircuitsAutoReplayPending(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("list pending auto-replays: %w", err)
	}
	out := make([]AutoReplayPending, len(rows))
	for i, r := range rows {
		// The query reads only rows with a pending since.
		out[i] = AutoReplayPending{TenantID: r.TenantID, EndpointID: r.EndpointID, Since: orZero(r.AutoReplayPendingSince), Requested: r.AutoReplayRequestedAt}
	}
	return out, nil
}

// CircuitAutoReplayTurn puts the pending auto-replay of endpointID behind
// the others: a pass replayed its share of the endpoint's dead letters and
// left the rest to a later one.
func (s *Store) CircuitAutoReplayTurn(ctx context.Context, endpointID string) error {
	if err := s.q.CircuitAutoReplayTurn(ctx, endpointID); err != nil {
		return fmt.Errorf("turn pending auto-replay: %w", err)
	}
	return nil
}

// CircuitAutoReplayDone clears the pending auto-replay p, unless a close
// or a late dead letter asked for it again since p was read (its pass may
// have read the dead letters before they were written).
func (s *Store) CircuitAutoReplayDone(ctx context.Context, p AutoReplayPending) error {
	if err := s.q.CircuitAutoReplayDone(ctx, dbsqlc.CircuitAutoReplayDoneParams{EndpointID: p.EndpointID, AutoReplayRequestedAt: p.Requested}); err != nil {
		return fmt.Errorf("clear pending auto-replay: %w", err)
	}
	return nil
}

// CircuitWake is a closed circuit whose held lanes are not yet signalled,
// or an endpoint whose rate_limit changed with its lanes not yet woken
// (EndpointRateSlotsReset): Requested is the stamp of the close or the
// change, which CircuitWakeDone clears.
type CircuitWake struct {
	TenantID   string
	EndpointID string
	Requested  time.Time
	// After is the last event a pass signalled for Requested ("" for
	// none): the wake goes on after it (CircuitWakeProgress).
	After string
}

// CircuitsWakePending returns up to limit circuits that closed (a probe's
// success, or an operator enabling the endpoint) or had an answer while
// half-open (the next probe is due at once), or whose endpoint's
// rate_limit changed, whose lanes delivering to the endpoint are still to
// be told, tenants in turn, each tenant's oldest first.
func (s *Store) CircuitsWakePending(ctx context.Context, limit int) ([]CircuitWake, error) {
	rows, err := s.q.CircuitsWakePending(ctx, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("list circuits to wake: %w", err)
	}
	out := make([]CircuitWake, len(rows))
	for i, r := range rows {
		// The query reads only rows with a wake requested.
		out[i] = CircuitWake{TenantID: r.TenantID, EndpointID: r.EndpointID, Requested: orZero(r.WakeRequestedAt), After: r.After}
	}
	return out, nil
}

// CircuitWakeDone clears w, unless the circuit closed again since w was
// read (a lane that waited on the later opening may not have been told).
func (s *Store) CircuitWakeDone(ctx context.Context, w CircuitWake) error {
	if err := s.q.CircuitWakeDone(ctx, dbsqlc.CircuitWakeDoneParams{EndpointID: w.EndpointID, WakeRequestedAt: &w.Requested}); err != nil {
		return fmt.Errorf("clear circuit wake: %w", err)
	}
	return nil
}

// CircuitWakeProgress records that a pass signalled w's lanes up to event
// after and left the rest: the next pass goes on from there, once the
// other endpoints had their turn. Nothing is recorded when the circuit
// closed again since w was read (the wake then starts over).
func (s *Store) CircuitWakeProgress(ctx context.Context, w CircuitWake, after string) error {
	if err := s.q.CircuitWakeProgress(ctx, dbsqlc.CircuitWakeProgressParams{EndpointID: w.EndpointID, WakeAfterStamp: &w.Requested, WakeAfter: &after}); err != nil {
		return fmt.Errorf("record circuit wake progress: %w", err)
	}
	return nil
}

// CircuitsEventCatchUp publishes, for up to limit endpoints whose circuit
// transitions published nothing within CircuitEventEvery of their last
// event, the state in force once that interval is over, when it is not
// the one the last event told (a close left out after an opened event,
// say): circuit_opened (with the endpoint's failure_threshold) or
// circuit_closed (with the outage's failing_since and opened_at), with
// transitions_coalesced, tenants in turn. It returns how many it
// published. An endpoint
// that fails does not hold up the ones after it: the pass goes on, and
// answers their errors joined, each naming its endpoint.
func (s *Store) CircuitsEventCatchUp(ctx context.Context, limit int) (int, error) {
	rows, err := s.q.CircuitsEventCatchUp(ctx, dbsqlc.CircuitsEventCatchUpParams{Secs: CircuitEventEvery.Seconds(), Limit: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("list circuit events to catch up: %w", err)
	}
	n := 0
	var errs []error
	for _, r := range rows {
		// The endpoint's operational events are its tenant's.
		published, err := s.Tenant(r.TenantID).circuitEventCatchUp(ctx, r.EndpointID)
		if err != nil {
			errs = append(errs, fmt.Errorf("catch up circuit events of %s: %w", r.EndpointID, err))
			continue
		}
		if published {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// circuitEventCatchUp is CircuitsEventCatchUp's work for one endpoint, and
// says whether it published.
func (s *Store) circuitEventCatchUp(ctx context.Context, id string) (bool, error) {
	ep, err := s.EndpointGet(ctx, id)
	if err != nil {
		return false, err
	}
	published := false
	err = s.lockedCircuit(ctx, id, func(tx pgx.Tx, c Circuit) error {
		if c.EventsCoalesced == 0 || c.EventAt == nil || c.Now.Sub(*c.EventAt) < CircuitEventEvery {
			return nil // caught up, or published, meanwhile
		}
		told := c.EventState
		_, left := c.circuitEventDue()
		if err := s.setCircuit(ctx, tx, id, c); err != nil {
			return err
		}
		if told != nil && *told == *c.EventState {
			return nil // left out an even number: the state told holds
		}
		published = true
		if c.Open() {
			return s.circuitOpenedEvent(ctx, tx, id, CircuitTransition{Opened: true, Trigger: TriggerCaughtUp, Circuit: c}, ep.Settings, left)
		}
		closed := c
		if c.ClosedAt != nil {
			closed.Now = *c.ClosedAt
		}
		closed.FailingSince, closed.OpenedAt = c.OutageFailingSince, c.OutageOpenedAt
		return s.circuitClosedEvent(ctx, tx, id, closed, left)
	})
	return published, err
}

// DeliveringAt returns up to limit IDs of the events delivering to the
// endpoint (released and not finished: the heads of its lanes), after
// event after, in ID order.
func (s *Store) DeliveringAt(ctx context.Context, endpointID, after string, limit int) ([]string, error) {
	ids, err := s.q.DeliveringAt(ctx, dbsqlc.DeliveringAtParams{EndpointID: endpointID, EventID: after, Limit: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("list deliveries in flight: %w", err)
	}
	return ids, nil
}

// The operational events of the transitions, each published in the
// transaction of its state change, about the endpoint.
// Their data hold the breaker's state, never a setting's secret.

// circuitOpenedEvent names the trigger that opened the circuit, and for
// the failure rate its figures: the window counted, its attempts and
// failures, and their rate in percent beside the endpoint's.
func (s *Store) circuitOpenedEvent(ctx context.Context, tx pgx.Tx, endpointID string, t CircuitTransition, st Settings, coalesced int) error {
	c := t.Circuit
	data := map[string]any{
		"transitions_coalesced": coalesced,
		"trigger":               t.Trigger,
		"consecutive_failures":  c.ConsecutiveFailures,
		"failure_threshold":     st.FailureThreshold(),
		"failing_since":         c.FailingSince.UTC(),
		"opened_at":             c.OpenedAt.UTC(),
		"next_probe_at":         c.NextProbeAt.UTC(),
	}
	if w := t.Window; t.Trigger == TriggerFailureRate {
		data["failure_rate"] = st.FailureRate()
		data["window_since"] = w.Since.UTC()
		data["window_attempts"] = w.Attempts
		data["window_failures"] = w.Failures
		data["window_failure_rate"] = math.Round(1000*float64(w.Failures)/float64(w.Attempts)) / 10
	}
	_, err := s.OperationalEventInsert(ctx, tx, endpointID, contract.OpCircuitOpened, data)
	return err
}

func (s *Store) circuitClosedEvent(ctx context.Context, tx pgx.Tx, endpointID string, opened Circuit, coalesced int) error {
	data := map[string]any{"closed_at": opened.Now.UTC(), "auto_replay": opened.AutoReplayPendingSince != nil, "transitions_coalesced": coalesced}
	if opened.OpenedAt != nil {
		data["opened_at"] = opened.OpenedAt.UTC()
	}
	if opened.FailingSince != nil {
		data["failing_since"] = opened.FailingSince.UTC()
	}
	_, err := s.OperationalEventInsert(ctx, tx, endpointID, contract.OpCircuitClosed, data)
	return err
}

func (s *Store) endpointDisabledEvent(ctx context.Context, tx pgx.Tx, endpointID, reason string) error {
	_, err := s.OperationalEventInsert(ctx, tx, endpointID, contract.OpEndpointDisabled, map[string]any{"reason": reason})
	return err
}

// DeadLetterAutoReplayed claims the replay of dead letter d as by (the
// auto-replay of its endpoint's outage) and publishes its
// hookflow.dead_letter.auto_replayed event in the same transaction; false,
// and nothing published, when someone claimed it first. A dead letter of
// an operational event publishes none (as deadLetterPublish).
func (s *Store) DeadLetterAutoReplayed(ctx context.Context, d DeadLetter, by string) (bool, error) {
	var ok bool
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.DeadLetterMarkReplayed(ctx, dbsqlc.DeadLetterMarkReplayedParams{TenantID: s.tenant, EventID: d.EventID, Generation: d.Generation,
			ReplayedBy: &by, EndpointID: d.EndpointID})
		if err != nil || n == 0 {
			return err
		}
		ok = true
		typ, err := q.EventTypeGet(ctx, dbsqlc.EventTypeGetParams{TenantID: s.tenant, ID: d.EventID})
		if err != nil {
			return fmt.Errorf("read event type: %w", err)
		}
		if contract.Operational(typ) {
			return nil
		}
		_, err = s.OperationalEventInsert(ctx, tx, d.EndpointID, contract.OpDeadLetterAutoReplayed, map[string]any{
			"event_id":       d.EventID,
			"event_type":     typ,
			"correlation_id": d.CorrelationID,
			"sequence":       d.Sequence,
			"generation":     d.Generation,
			"reason":         d.Reason,
			"replayed_by":    by,
		})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("auto-replay dead letter: %w", err)
	}
	return ok, nil
}

// CircuitsProbeReplayClaim takes up to limit open circuits of endpoints
// with auto_replay whose probe is due with no probe in flight, and none
// taken so within every: an outage longer than the window leaves no
// attempt to probe, so the caller replays one of the outage's dead letters
// of each (Since is the outage's first failure), whose attempt probes.
// Tenants are taken in turn, each tenant's longest due first.
func (s *Store) CircuitsProbeReplayClaim(ctx context.Context, limit int, every time.Duration) ([]AutoReplayPending, error) {
	rows, err := s.q.CircuitsProbeReplayClaim(ctx, dbsqlc.CircuitsProbeReplayClaimParams{Limit: int32(limit), Secs: every.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("claim probe replays: %w", err)
	}
	out := make([]AutoReplayPending, len(rows))
	for i, r := range rows {
		// The query answers COALESCE(failing_since, opened_at, now()): never NULL.
		out[i] = AutoReplayPending{TenantID: r.TenantID, EndpointID: r.EndpointID, Since: orZero(r.FailingSince), Requested: r.AutoReplayRequestedAt}
	}
	return out, nil
}
