// Package activities holds the side effects of hookflow's workflows: the
// delivery (through the transport of each endpoint's type, package
// transport), the ledger writes in Postgres, and the hand-over to a
// correlation's sequencer when an event is finished.
package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/metrics"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
)

// Activities carries the activities' dependencies; workers register one.
type Activities struct {
	store *store.Store
	// transports send the attempts, by endpoint type.
	transports *transport.Registry
	logger     *slog.Logger
	metrics    *metrics.Metrics
	sequencer  Sequencer
	now        func() time.Time
	// closeSuccesses is how many answers in a row close an open circuit.
	closeSuccesses int
}

// Sequencer hands a finished event over to its correlation's sequencer
// (starter.Starter): it reports Done, and releases the event the sequencer
// names next with the release signal.
type Sequencer interface {
	HandOver(ctx context.Context, tenant, correlationID string, d contract.Done) error
}

// Deps are what the activities need; all are required but Metrics.
type Deps struct {
	Store *store.Store
	// Transports send the attempts, by endpoint type.
	Transports *transport.Registry
	Logger     *slog.Logger
	Sequencer  Sequencer
	// Metrics is optional: nil records nothing.
	Metrics *metrics.Metrics
	// CircuitCloseSuccesses is how many answers in a row close an open
	// circuit (HOOKFLOW_CIRCUIT_CLOSE_SUCCESSES); zero is
	// store.DefaultCloseSuccesses.
	CircuitCloseSuccesses int
}

// New returns the activities.
func New(d Deps) (*Activities, error) {
	switch {
	case d.Store == nil:
		return nil, errors.New("activities: store is required")
	case d.Transports == nil:
		return nil, errors.New("activities: transports are required")
	case d.Logger == nil:
		return nil, errors.New("activities: logger is required")
	case d.Sequencer == nil:
		return nil, errors.New("activities: sequencer is required")
	}
	return &Activities{store: d.Store, transports: d.Transports, logger: d.Logger, metrics: d.Metrics, sequencer: d.Sequencer, now: time.Now,
		closeSuccesses: d.CircuitCloseSuccesses}, nil
}

// Finish tells the correlation's sequencer that deliveries of the event are
// finished and releases what it names next in their lanes. Deliver and Skip
// do it themselves; the workflow runs this when their hand-over failed
// (Temporal was unavailable). Repeating it is harmless: the sequencer
// changes nothing for a repeated Done, and a lane ignores a second release.
func (a *Activities) Finish(ctx context.Context, in contract.FinishInput) error {
	return a.sequencer.HandOver(ctx, in.Tenant, in.CorrelationID, contract.Done{Sequence: in.Sequence, EventID: in.EventID, Lanes: in.Lanes})
}

// HandOverPause waits d, or until the workflow gives up on it. An event
// with several lanes runs it as a local activity when one lane is
// delivered while its peers' first attempts are still in flight: a timer
// would not fire before the workflow task those attempts hold open ends,
// so the workflow's only clock mid-task is a local activity's end.
func (a *Activities) HandOverPause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// LoadSequencer reads what a sequencer loads of its correlation from the
// ledger: its cursor, which sequences have arrived from it on, and the
// position of each lane with open deliveries with its first ones, within
// the load's budget (store.SequencerLoadOf). The other lanes it leaves
// out: the sequencer loads one when an event for it arrives.
func (a *Activities) LoadSequencer(ctx context.Context, tenant, correlationID string) (contract.SequencerLoad, error) {
	l, err := a.store.Tenant(tenant).SequencerLoadOf(ctx, correlationID)
	if err != nil {
		return contract.SequencerLoad{}, err
	}
	out := contract.SequencerLoad{Next: l.Next, Frontier: l.Frontier, Arrived: l.Arrived, Voided: l.Voided}
	for _, ln := range l.Lanes {
		out.Lanes = append(out.Lanes, laneState(ln))
	}
	return out, nil
}

// LoadLanes reads the next open deliveries of lanes of a correlation
// (contract.MaxQueuedPerLane each), for a sequencer whose lanes ran out of
// the events they kept.
func (a *Activities) LoadLanes(ctx context.Context, in contract.LoadLanesInput) ([]contract.LaneState, error) {
	eps, after := make([]string, len(in.Lanes)), make([]int64, len(in.Lanes))
	for i, la := range in.Lanes {
		eps[i], after[i] = la.Endpoint, la.After
	}
	ls, err := a.store.Tenant(in.Tenant).LanesLoad(ctx, in.CorrelationID, eps, after, contract.MaxQueuedPerLane)
	if err != nil {
		return nil, err
	}
	out := make([]contract.LaneState, 0, len(ls))
	for _, ln := range ls {
		out = append(out, laneState(ln))
	}
	return out, nil
}

// laneState is a lane of the ledger as a sequencer takes it: its position,
// and its open deliveries, Partial (known through the last) when the
// ledger has more.
func laneState(ln store.LaneLoad) contract.LaneState {
	st := contract.LaneState{Endpoint: ln.EndpointID, Previous: ln.Previous, Skipped: ln.Skipped, LastFinished: ln.LastFinished, Queued: ln.Open, Voided: ln.Voided}
	if ln.More {
		// A lane the load's budget left with none knows nothing past its
		// position.
		st.Partial, st.KnownThrough = true, ln.LastFinished
		if len(ln.Open) > 0 {
			st.KnownThrough = ln.Open[len(ln.Open)-1].Sequence
		}
	}
	return st
}

// Skip claims the skip of the dead letter (the API may have claimed it
// already), marks the event skipped and moves its correlation's cursor past
// it, then hands over to the sequencer (Finish). When the dead letter was
// claimed for a replay first, it does nothing and says so (Lost): of an
// API call and a signal sent by hand, only one acts. Repeating it is
// harmless.
func (a *Activities) Skip(ctx context.Context, in contract.SkipInput) (contract.OperatorResult, error) {
	in.By = byOrRawSignal(in.By)
	st := a.store.Tenant(in.Tenant)
	ok, err := st.DeadLetterMarkSkipped(ctx, in.EventID, in.EndpointID, in.Generation, in.By, in.Note)
	if err != nil {
		return contract.OperatorResult{}, err
	}
	if !ok {
		if res, err := a.claimedOtherwise(ctx, st, in.EventID, in.EndpointID, in.Generation, store.DeadLetterSkipped); err != nil || res.Lost != "" {
			return res, err
		}
	}
	if err := st.DeliverySkipped(ctx, in.EventID, in.EndpointID, in.CorrelationID, in.Sequence, a.now()); err != nil {
		return contract.OperatorResult{}, err
	}
	return contract.OperatorResult{}, a.Finish(ctx, contract.FinishInput{Tenant: in.Tenant, CorrelationID: in.CorrelationID, Sequence: in.Sequence, EventID: in.EventID,
		Lanes: []contract.LaneDone{{Endpoint: in.EndpointID, Skipped: true}}})
}

// claimedOtherwise is called when the claim of action (replayed, skipped)
// on dead letter gen of the event failed. It returns no loss when that
// very action holds the claim (the API claimed it before it signalled);
// else the status that won, or the generation the row is at when it is
// another (a run that a Reset discarded dead-lettered it again), which the
// workflow then waits on.
func (a *Activities) claimedOtherwise(ctx context.Context, st *store.Store, eventID, endpointID string, gen int32, action string) (contract.OperatorResult, error) {
	d, err := st.DeadLetterGet(ctx, eventID, endpointID)
	if err != nil {
		return contract.OperatorResult{}, err
	}
	if d.Generation == gen && d.Status == action {
		return contract.OperatorResult{}, nil
	}
	a.logger.Warn("operator action lost to another claimed first", "event_id", eventID, "endpoint_id", endpointID, "generation", gen, "action", action, "claimed", d.Status, "claimed_generation", d.Generation)
	if d.Generation != gen {
		return contract.OperatorResult{Lost: fmt.Sprintf("generation %d", d.Generation), Generation: d.Generation}, nil
	}
	return contract.OperatorResult{Lost: d.Status}, nil
}

// WriteDeadLetter stores the dead letter with the signed envelope and every
// attempt recorded so far, marks the event dead-lettered, and returns the
// dead letter's generation; or, for an event the ledger has as finished,
// writes nothing and says so.
func (a *Activities) WriteDeadLetter(ctx context.Context, in contract.DeadLetterInput) (contract.DeadLetterResult, error) {
	// The generation's own attempts: each generation of a replayed
	// delivery holds those of its window, not a copy of every one so far.
	st := a.store.Tenant(in.Event.Tenant)
	if res, written, err := a.deadLetterWritten(ctx, st, in); err != nil || written {
		return res, err
	}
	attempts, lastAttempt, err := st.AttemptsSinceDeadLetter(ctx, in.Event.EventID, in.Event.EndpointID)
	if err != nil {
		return contract.DeadLetterResult{}, err
	}
	if len(in.Event.Data) == 0 {
		// The workflow carries no payload: the envelope kept in the dead
		// letter takes the ledger's (an unfinished event keeps it).
		ev, err := st.EventGet(ctx, in.Event.EventID)
		if err != nil {
			return contract.DeadLetterResult{}, err
		}
		in.Event.Data = ev.Data
	}
	env, err := json.Marshal(in.Event.Envelope())
	if err != nil {
		return contract.DeadLetterResult{}, fmt.Errorf("encode envelope: %w", err)
	}
	var first *time.Time
	for _, at := range attempts {
		if at.Outcome != OutcomeDelivered {
			t := at.StartedAt
			first = &t
			break
		}
	}
	gen, err := st.DeadLetterUpsert(ctx, store.DeadLetter{
		EventID: in.Event.EventID, CorrelationID: in.Event.CorrelationID, Sequence: in.Event.Sequence,
		EndpointID: in.Event.EndpointID, Envelope: env, Attempts: attempts, Reason: in.Reason,
		FirstFailureAt: first, WindowStart: in.WindowStart, LastAttemptID: lastAttempt,
	}, in.Window)
	if errors.Is(err, store.ErrEventFinished) {
		ev, err := st.EventGet(ctx, in.Event.EventID)
		if err != nil {
			return contract.DeadLetterResult{}, err
		}
		state := contract.StateDelivered
		for _, d := range ev.Deliveries {
			if d.EndpointID == in.Event.EndpointID {
				state = d.State
			}
		}
		a.logger.Warn("not dead-lettering a delivery the ledger has as finished", "event_id", ev.ID, "endpoint_id", in.Event.EndpointID, "state", state)
		return contract.DeadLetterResult{Finished: state}, nil
	}
	if err != nil {
		return contract.DeadLetterResult{}, err
	}
	a.metrics.DeadLettered(in.Event.EndpointID)
	a.logger.Warn("event dead-lettered",
		"event_id", in.Event.EventID, "correlation_id", in.Event.CorrelationID, "sequence", in.Event.Sequence,
		"endpoint_id", in.Event.EndpointID, "reason", in.Reason, "attempts", len(attempts), "generation", gen)
	return contract.DeadLetterResult{Generation: gen}, nil
}

// deadLetterWritten reports whether the ledger holds the dead letter of
// the window in already: a generation past the one whose replay began it
// (in.Follows). A run that an operator's Reset took back to before its
// write writes it again, under another run's window key, after the API may
// have claimed a replay or skip of it: writing a fresh generation would
// leave that claim naming one the workflow no longer waits on. So the
// answer is that dead letter, with the action claimed on it, or the
// delivery's final state when the claim was carried out already.
func (a *Activities) deadLetterWritten(ctx context.Context, st *store.Store, in contract.DeadLetterInput) (contract.DeadLetterResult, bool, error) {
	d, err := st.DeadLetterGet(ctx, in.Event.EventID, in.Event.EndpointID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.Generation <= in.Follows) {
		return contract.DeadLetterResult{}, false, nil
	}
	if err != nil {
		return contract.DeadLetterResult{}, false, err
	}
	ev, err := st.EventGet(ctx, in.Event.EventID)
	if err != nil {
		return contract.DeadLetterResult{}, false, err
	}
	for _, dl := range ev.Deliveries {
		if dl.EndpointID == in.Event.EndpointID && dl.State.Final() {
			return contract.DeadLetterResult{Finished: dl.State}, true, nil
		}
	}
	res := contract.DeadLetterResult{Generation: d.Generation}
	switch d.Status {
	case store.DeadLetterReplayed:
		res.Claimed, res.By = contract.DeadLetterClaimReplayed, deref(d.ReplayedBy)
	case store.DeadLetterSkipped:
		res.Claimed, res.By, res.Note = contract.DeadLetterClaimSkipped, deref(d.SkippedBy), deref(d.SkipNote)
	}
	a.logger.Warn("the window's dead letter is written already; taking it", "event_id", in.Event.EventID, "endpoint_id", in.Event.EndpointID,
		"generation", d.Generation, "follows", in.Follows, "claimed", res.Claimed)
	return res, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Replayed claims the replay of the dead letter of that generation (the
// API may have claimed it already). When the dead letter was claimed for a
// skip first, it says so (Lost) and the workflow does not replay. A late
// one never touches a later generation.
func (a *Activities) Replayed(ctx context.Context, in contract.ReplayedInput) (contract.OperatorResult, error) {
	in.By = byOrRawSignal(in.By)
	st := a.store.Tenant(in.Tenant)
	ok, err := st.DeadLetterMarkReplayed(ctx, in.EventID, in.EndpointID, in.Generation, in.By)
	if err != nil || ok {
		return contract.OperatorResult{}, err
	}
	return a.claimedOtherwise(ctx, st, in.EventID, in.EndpointID, in.Generation, store.DeadLetterReplayed)
}

// RawSignalBy is who the dead letter row says acted when a replay or skip
// came as a signal sent by hand (the Web UI's Signal button), which names
// nobody: the API's signals carry the API key's name.
const RawSignalBy = "a signal sent by hand (Temporal Web UI)"

func byOrRawSignal(by string) string {
	if by == "" {
		return RawSignalBy
	}
	return by
}
