package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	wire "github.com/hookflow/hookflow/kit/client"
)

// Attempt outcomes recorded in delivery_attempts: the document's (an
// attempt's outcome in api/openapi.json), so that an outcome the API would
// show and the document not name cannot be written.
const (
	OutcomeDelivered = string(wire.AttemptOutcomeDelivered)
	OutcomeRetry     = string(wire.AttemptOutcomeRetry)
	OutcomePermanent = string(wire.AttemptOutcomePermanent)
	OutcomeGone      = string(wire.AttemptOutcomeGone)
	OutcomeDisabled  = string(wire.AttemptOutcomeDisabled)
	// OutcomeDeleted: the endpoint was deleted; nothing was sent, and the
	// delivery ended skipped.
	OutcomeDeleted = string(wire.AttemptOutcomeDeleted)
)

// deliveredAgain is the status an attempt answers for an event the ledger
// has as delivered already: the 200 the contract's delivered answers stand
// for, since the destination's own answer went with the earlier attempt.
const deliveredAgain = 200

// Deliver makes one attempt of the event at its endpoint, through the
// transport of the endpoint's type (package transport), and keeps what
// every destination shares around it: the ledger's gate, the circuit
// breaker, the cap on attempts in flight, the rate limits, the recording
// of the attempt and the hand-over. What the transport answers maps to
// the workflow's retry policy: delivered → the ledger is updated, then the
// event is handed over to its sequencer, which names the event it releases
// next, and that one is signalled, before returning; gone → the endpoint
// is disabled, non-retryable; permanent → non-retryable; retry → retryable,
// after the wait the destination asked for when it asked. An event the
// ledger holds as final, delivered or skipped, is never sent again, nor is
// a dead-lettered one before a replay of its dead letter is claimed, nor
// is one while an earlier delivery of its lane is still open
// (heldByEarlier).
func (a *Activities) Deliver(ctx context.Context, in contract.DeliverInput) (contract.DeliverResult, error) {
	attempt := activity.GetInfo(ctx).Attempt + in.AttemptOffset
	st := a.store.Tenant(in.Tenant)
	start, err := st.DeliveryStartAttempt(ctx, in.EventID, in.EndpointID)
	ep := start.Endpoint
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("endpoint "+in.EndpointID+" does not exist", contract.ErrTypeEndpointDisabled, nil)
		}
		return contract.DeliverResult{}, err
	}
	switch start.State {
	case contract.StateDelivered:
		// An earlier attempt was delivered and recorded, and its result lost
		// on the way back (a workflow task that timed out after its local
		// activity finished, or an operator's reset): nothing is sent again,
		// and the hand-over, which may not have happened, is repeated.
		return a.handOver(ctx, in, contract.DeliverResult{StatusCode: deliveredAgain, Attempt: attempt}), nil
	case contract.StateSkipped:
		// An operator skipped it, and a Reset ran its delivery again: the
		// receiver must never get it. The workflow ends it as skipped.
		return contract.DeliverResult{Skipped: true, Attempt: attempt}, nil
	case contract.StateDeadLettered:
		if start.DeadLetterStatus != store.DeadLetterReplayed {
			// A Reset ran its delivery again while its dead letter waits for
			// an operator (who may be skipping it): nothing is sent, and the
			// workflow waits on that dead letter as it did.
			return contract.DeliverResult{DeadLettered: start.Generation, Attempt: attempt}, nil
		}
	}
	if start.HeldBy != nil {
		return a.heldByEarlier(ctx, in, attempt, *start.HeldBy), nil
	}
	started := a.now()
	if start.DeletedBy != nil {
		return a.skipDeleted(ctx, in, attempt, started, *start.DeletedBy)
	}
	if ep.Disabled {
		a.record(ctx, in, store.Attempt{Attempt: attempt, StartedAt: started, Outcome: OutcomeDisabled, Error: ptr("endpoint is disabled")})
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("endpoint "+ep.ID+" is disabled", contract.ErrTypeEndpointDisabled, nil)
	}
	if start.Tenant.Disabled {
		// Its tenant is disabled: the head waits, sending nothing and
		// reserving nothing, and looks again in a while or when the
		// tenant is enabled (which wakes its lanes). The wait is a
		// throttle's: it spends no recovery window.
		return contract.DeliverResult{Throttled: tenantDisabledWait, InFlightFull: true, Attempt: attempt}, nil
	}
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	// A type this worker has no transport for waits for a worker that has
	// one (a newer worker in a rollout): the API refused any other.
	tr, err := a.transports.Lookup(ep.Type)
	if err != nil {
		return contract.DeliverResult{}, temporal.NewApplicationError(err.Error(), contract.ErrTypeRetryable)
	}
	// The circuit before the rate limit: an attempt that will not send
	// reserves no send slot.
	cb := circuitAttempt{st: st, start: start, owner: fmt.Sprintf("%s/%s/%d", in.EventID, in.EndpointID, attempt)}
	if start.CircuitOpen {
		p, err := a.store.CircuitProbeClaim(ctx, ep.ID, cb.owner, timeout+10*time.Second, in.Probe)
		if err != nil {
			return contract.DeliverResult{}, err
		}
		if p.Open {
			return contract.DeliverResult{CircuitOpen: max(p.Wait, minCircuitWait), Attempt: attempt}, nil
		}
		cb.probe = p.Claimed
	}
	// The cap on attempts in flight before the rate limit: an attempt that
	// waits for a place reserves no send slot. The place is held until the
	// answer is in (or the lease expires, a little after the timeout, if
	// this worker dies).
	if wait, err := a.takeInFlight(ctx, ep, cb.owner, timeout); err != nil || wait > 0 {
		return contract.DeliverResult{Throttled: wait, InFlightFull: wait > 0, Attempt: attempt}, err
	}
	defer a.releaseInFlight(ctx, ep.ID, cb.owner)
	if wait, err := a.awaitSlot(ctx, in, ep, start.Tenant.DeliveriesPerSecond); err != nil || wait > 0 {
		return contract.DeliverResult{Throttled: wait, Attempt: attempt}, err
	}
	started = a.now()
	// The payload is the ledger's: the workflow carries none, so that no
	// activity input (and no history event) copies it.
	if len(start.Data) > 0 {
		in.Data = start.Data
	}
	if len(in.Data) == 0 {
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("the ledger has no payload for event "+in.EventID, contract.ErrTypePermanent, nil)
	}
	body, err := json.Marshal(in.Envelope())
	if err != nil {
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError("encode envelope: "+err.Error(), contract.ErrTypePermanent, nil)
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := tr.Send(sctx, ep.Destination(start.Tenant.AllowPrivateTargets, started), transport.Message{EventID: in.EventID, Body: body, At: started,
		CorrelationID: in.CorrelationID, Sequence: in.Sequence, Attempt: attempt, Previous: in.Previous, Skipped: in.Skipped, Type: in.Type})
	if err != nil {
		// Nothing was sent, and these settings cannot send: no attempt is
		// recorded. The transport's text names nothing secret.
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypePermanent, nil)
	}
	latency := a.now().Sub(started)
	rec := store.Attempt{Attempt: attempt, StartedAt: started, LatencyMS: int32(latency.Milliseconds())}
	if res.Status != 0 {
		code := int32(res.Status)
		rec.StatusCode = &code
	}
	if res.Outcome != transport.Delivered {
		rec.Error = ptr(res.Detail)
	}

	// Any answer but an outage says the destination is up: a circuit that
	// counted failures forgets them, and an open one closes. A failure is
	// counted once its attempt is recorded (below): the breaker's failure
	// rate is counted from the recorded attempts.
	if !res.Outage {
		a.circuitAnswered(ctx, ep, cb)
	}
	switch res.Outcome {
	case transport.Delivered:
		rec.Outcome = OutcomeDelivered
		a.observe(in.EndpointID, rec, latency)
		if err := st.DeliveryDelivered(ctx, in.EventID, in.EndpointID, in.CorrelationID, in.Sequence, rec, a.now()); err != nil {
			// The destination has it; a retry re-sends and gets "already processed".
			return contract.DeliverResult{}, err
		}
		return a.handOver(ctx, in, contract.DeliverResult{StatusCode: res.Status, Attempt: attempt}), nil
	case transport.Gone:
		rec.Outcome = OutcomeGone
		a.record(ctx, in, rec)
		a.observe(in.EndpointID, rec, latency)
		if err := st.EndpointDisable(ctx, ep.ID, res.Summary+" for event "+in.EventID); err != nil {
			return contract.DeliverResult{}, err
		}
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError(res.Detail, contract.ErrTypeEndpointGone, nil)
	case transport.Permanent:
		rec.Outcome = OutcomePermanent
		a.record(ctx, in, rec)
		a.observe(in.EndpointID, rec, latency)
		return contract.DeliverResult{}, temporal.NewNonRetryableApplicationError(res.Detail, contract.ErrTypePermanent, nil)
	case transport.Retry:
		rec.Outcome = OutcomeRetry
		a.record(ctx, in, rec)
		a.observe(in.EndpointID, rec, latency)
		if res.Outage {
			a.circuitFailed(ctx, ep, cb)
		}
		if res.RetryAfter > 0 {
			return contract.DeliverResult{}, temporal.NewApplicationErrorWithOptions(res.Detail, contract.ErrTypeRetryAfter, temporal.ApplicationErrorOptions{NextRetryDelay: res.RetryAfter})
		}
		msg := res.Detail
		if res.Status == 0 {
			// No answer came (a connection error, a timeout): the failure
			// is named as the delivery's, as an answer names itself.
			msg = "deliver: " + msg
		}
		return contract.DeliverResult{}, temporal.NewApplicationError(msg, contract.ErrTypeRetryable)
	}
	return contract.DeliverResult{}, fmt.Errorf("transport answered %s for event %s", res.Outcome, in.EventID)
}

// Resyncer makes a correlation's sequencer merge the ledger into its
// state and passes on the releases it answers (starter.Starter). A
// Sequencer that is one is asked to when the ledger holds an attempt back
// (heldByEarlier).
type Resyncer interface {
	Resync(ctx context.Context, tenant, correlationID string) error
}

// heldWait is how long an attempt held back by an earlier open delivery of
// its lane waits before it looks again (and up to as much again at random,
// so the heads held on one lane do not all look at once); heldOperatorWait
// when that delivery waits on its dead letter, which only an operator ends.
// heldResyncTimeout bounds the resync the attempt asks for: the attempt
// answers the workflow whatever the sequencer does.
const (
	heldWait          = 5 * time.Second
	heldOperatorWait  = time.Minute
	heldResyncTimeout = 5 * time.Second
)

// heldByEarlier answers an attempt the ledger refused because an earlier
// delivery of its lane (head) is still open: the lane's receiver must get
// that one first. Only a sequencer that lost track of the lane (its state
// behind the ledger's) or a release signalled by hand from the Web UI
// releases such an attempt. Nothing is sent, recorded or reserved, and the
// delivery stays as it was. The answer is a throttle's (InFlightFull, as
// for a disabled tenant): the workflow waits on a timer that spends no
// recovery window and makes the same attempt, with its number, again, so
// the lane neither dead-letters nor breaks; once the earlier delivery is
// finished, the attempt goes through. The sequencer is asked to resync from
// the ledger, which gives it the lane's open deliveries: a failure to ask
// is logged, as the heads sweep resyncs a lane that stays stuck.
func (a *Activities) heldByEarlier(ctx context.Context, in contract.DeliverInput, attempt int32, head store.LaneHead) contract.DeliverResult {
	a.logger.Warn("attempt held: an earlier delivery of its lane is still open; resyncing its sequencer",
		"tenant_id", in.Tenant, "event_id", in.EventID, "endpoint_id", in.EndpointID, "correlation_id", in.CorrelationID, "sequence", in.Sequence,
		"held_by_event_id", head.EventID, "held_by_sequence", head.Sequence, "held_by_state", head.State)
	if r, ok := a.sequencer.(Resyncer); ok {
		rctx, cancel := context.WithTimeout(ctx, heldResyncTimeout)
		err := r.Resync(rctx, in.Tenant, in.CorrelationID)
		cancel()
		if err != nil {
			a.logger.Warn("resync the sequencer of a held attempt", "tenant_id", in.Tenant, "correlation_id", in.CorrelationID, "event_id", in.EventID, "error", err)
		}
	}
	wait := heldWait
	if head.State == contract.StateDeadLettered {
		wait = heldOperatorWait
	}
	return contract.DeliverResult{Throttled: wait + rand.N(wait), InFlightFull: true, Attempt: attempt}
}

// minCircuitWait is the shortest wait an attempt that found its endpoint's
// circuit open is told: a probe due now that another attempt has just
// claimed is answered within its lease, not by a busy loop of attempts.
const minCircuitWait = time.Second

// circuitAttempt is what an attempt knows of its endpoint's circuit: the
// start's read, its name as a prober, and whether it claimed the probe.
type circuitAttempt struct {
	// st is the event's tenant's ledger, where the circuit's
	// operational events go.
	st    *store.Store
	start store.AttemptStart
	owner string
	probe bool
}

// circuitAnswered records that the endpoint answered, unless its circuit
// was closed with nothing counted when the attempt started (the happy path
// writes nothing). A failure to record is logged: the attempt happened.
func (a *Activities) circuitAnswered(ctx context.Context, ep store.Endpoint, cb circuitAttempt) {
	if !cb.start.CircuitOpen && cb.start.CircuitFailures == 0 && !cb.probe {
		return
	}
	t, err := cb.st.CircuitSucceeded(ctx, ep.ID, ep.Settings.AutoReplay, a.closeSuccesses)
	if err != nil {
		a.logger.Error("record circuit success", "endpoint_id", ep.ID, "error", err)
		return
	}
	if t.Closed {
		a.logger.Info("endpoint circuit closed", "endpoint_id", ep.ID, "probe", cb.probe, "auto_replay", ep.Settings.AutoReplay)
	}
}

// circuitFailed records a failure of the endpoint, once its attempt is
// recorded: it may open its circuit (by its consecutive failures, or by
// the failure rate of its attempts of the window) or, when it has failed
// for longer than its disable_after, disable it.
func (a *Activities) circuitFailed(ctx context.Context, ep store.Endpoint, cb circuitAttempt) {
	t, err := cb.st.CircuitFailed(ctx, ep.ID, cb.owner, ep.Settings)
	if err != nil {
		a.logger.Error("record circuit failure", "endpoint_id", ep.ID, "error", err)
		return
	}
	if t.Opened {
		attrs := []any{"endpoint_id", ep.ID, "trigger", t.Trigger, "consecutive_failures", t.Circuit.ConsecutiveFailures}
		if t.Trigger == store.TriggerFailureRate {
			attrs = append(attrs, "window_attempts", t.Window.Attempts, "window_failures", t.Window.Failures)
		}
		a.logger.Warn("endpoint circuit opened", attrs...)
	}
	if t.Disabled {
		a.logger.Warn("endpoint disabled: failing for longer than its disable_after", "endpoint_id", ep.ID, "disable_after", ep.Settings.DisableAfterOrDefault().String())
	}
}

// maxInlineThrottle is the longest wait for a send slot that an attempt
// sits out itself; a longer one goes back to the workflow (Throttled), which
// waits on a timer instead of holding a worker's slot. Below it, a timer's
// round trip would cost more than the wait.
const maxInlineThrottle = 500 * time.Millisecond

// tenantDisabledWait is how long the head of a disabled tenant's lane
// waits before it looks again; enabling the tenant wakes it before.
const tenantDisabledWait = time.Minute

// awaitSlot holds the attempt to its endpoint's rate limit and its
// tenant's deliveries_per_second (tenantRate, nil: none), each shared by
// every lane on every worker: it reserves the attempt's send slot under
// each in the ledger (EndpointRateReserve, TenantRateReserve; slots the
// workflow waited for already are used as they are) and waits for the
// later when it is close, or returns how long until it is far. Nothing is
// recorded of a throttled attempt: nothing was sent.
func (a *Activities) awaitSlot(ctx context.Context, in contract.DeliverInput, ep store.Endpoint, tenantRate *float64) (time.Duration, error) {
	if ep.Settings.RateLimit <= 0 && tenantRate == nil || in.SlotReserved && activity.GetInfo(ctx).Attempt == 1 {
		return 0, nil
	}
	var wait time.Duration
	if tenantRate != nil {
		slot, err := a.store.Tenant(in.Tenant).TenantRateReserve(ctx, *tenantRate)
		if err != nil {
			return 0, err
		}
		wait = slot.Wait
	}
	if ep.Settings.RateLimit > 0 {
		slot, err := a.store.EndpointRateReserve(ctx, ep.ID, ep.Settings.RateLimit)
		if err != nil {
			return 0, err
		}
		wait = max(wait, slot.Wait)
	}
	if wait > 0 {
		a.metrics.Throttled(ep.ID)
	}
	if wait > maxInlineThrottle {
		return wait, nil
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
	return 0, nil
}

// inFlightWait is how long an attempt that found its endpoint's
// attempts in flight at its cap waits before it asks again: an eighth of
// its timeout, between 0.5 and 2 s, and up to as much again at random, so
// that the heads waiting on a slow receiver do not all ask at once. Each
// wait costs its lane a timer; a longer one would leave the cap's places
// idle between a release and the next ask.
func inFlightWait(timeout time.Duration) time.Duration {
	d := min(max(500*time.Millisecond, timeout/8), 2*time.Second)
	return d + rand.N(d)
}

// takeInFlight takes one of the endpoint's max_in_flight places for the
// attempt (owner), shared by every worker, for a little longer than the
// attempt can take; or answers how long to wait before asking again when
// they are all held. A slow receiver so holds at most its cap of worker
// slots, and the heads that wait on it wait on timers, as throttled ones
// do: the wait spends no recovery window.
func (a *Activities) takeInFlight(ctx context.Context, ep store.Endpoint, owner string, timeout time.Duration) (time.Duration, error) {
	l, err := a.store.EndpointLeaseAcquire(ctx, ep.ID, owner, ep.Settings.InFlightCap(), timeout+leaseGrace)
	if err != nil {
		return 0, err
	}
	if l.Taken {
		return 0, nil
	}
	a.metrics.Throttled(ep.ID)
	return inFlightWait(timeout), nil
}

// leaseGrace is how long past its HTTP timeout an attempt's place is held
// when it is never given back (its worker died).
const leaseGrace = 10 * time.Second

// releaseInFlight gives the attempt's place back. A failure is logged: the
// lease frees itself when it expires.
func (a *Activities) releaseInFlight(ctx context.Context, endpointID, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := a.store.EndpointLeaseRelease(rctx, endpointID, owner); err != nil {
		a.logger.Warn("release endpoint lease", "endpoint_id", endpointID, "error", err)
	}
}

// handOver tells the sequencer the delivered event is finished, which
// releases its successor. A failure is not the attempt's: the event is
// delivered, and failing here would send it again; the workflow repeats the
// hand-over (Finish) instead.
func (a *Activities) handOver(ctx context.Context, in contract.DeliverInput, res contract.DeliverResult) contract.DeliverResult {
	if in.DeferHandOver {
		res.HandOffPending = true // the workflow hands the event's finished lanes over together
		return res
	}
	if err := a.Finish(ctx, contract.FinishInput{Tenant: in.Tenant, CorrelationID: in.CorrelationID, Sequence: in.Sequence, EventID: in.EventID,
		Lanes: []contract.LaneDone{{Endpoint: in.EndpointID}}}); err != nil {
		a.logger.Warn("hand delivered event over to its sequencer", "event_id", in.EventID, "error", err)
		res.HandOffPending = true
	}
	return res
}

// skipDeleted ends a delivery whose endpoint was deleted: nothing is sent,
// the attempt is recorded with who deleted it, and the delivery is skipped
// in the ledger (its lane moves past it). The workflow ends the lane as
// skipped and hands it over to its sequencer, which releases the lane's
// next delivery, which ends the same way: the deleted endpoint's lanes
// empty in order and hold nothing back.
func (a *Activities) skipDeleted(ctx context.Context, in contract.DeliverInput, attempt int32, at time.Time, by string) (contract.DeliverResult, error) {
	a.record(ctx, in, store.Attempt{Attempt: attempt, StartedAt: at, Outcome: OutcomeDeleted, Error: ptr("endpoint deleted by " + by)})
	if err := a.store.Tenant(in.Tenant).DeliverySkipped(ctx, in.EventID, in.EndpointID, in.CorrelationID, in.Sequence, at); err != nil {
		return contract.DeliverResult{}, err
	}
	// A replay brought it here: its dead letter says skipped, not replayed.
	if err := a.store.Tenant(in.Tenant).DeadLetterEndDeleted(ctx, in.EventID, in.EndpointID, by); err != nil {
		return contract.DeliverResult{}, err
	}
	return contract.DeliverResult{Skipped: true, Attempt: attempt}, nil
}

// observe records an HTTP attempt's metrics.
func (a *Activities) observe(endpointID string, rec store.Attempt, latency time.Duration) {
	a.metrics.Attempt(endpointID, rec.Outcome, latency, rec.Outcome == OutcomeDelivered)
	if rec.Outcome == OutcomeRetry {
		a.metrics.Retry(endpointID)
	}
}

// record stores an attempt. A failure to record is logged, not returned: the
// attempt happened either way, and failing the activity would re-send.
func (a *Activities) record(ctx context.Context, in contract.DeliverInput, at store.Attempt) {
	if err := a.store.Tenant(in.Tenant).AttemptInsert(ctx, in.EventID, in.EndpointID, at); err != nil {
		a.logger.Error("record delivery attempt", "event_id", in.EventID, "endpoint_id", in.EndpointID, "attempt", at.Attempt, "error", err)
	}
}

func ptr[T any](v T) *T { return &v }
