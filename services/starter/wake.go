package starter

import (
	"context"
	"fmt"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// SweepCircuitWake tells the lanes an open circuit held that it closed
// (store.CircuitsWakePending: a probe answered, or an operator enabled the
// endpoint), or that it is half-open short of closing (a probe answered,
// and the next is due at once: a woken lane sends it, the probe's claim
// letting one through): every event delivering to the endpoint gets
// SignalCircuitClosed, and a lane of it waiting on the circuit makes its
// attempt at once rather than when its timer ends (the next probe time,
// up to the backoff's 5 minutes, or another probe's lease). The stamp is
// in the row the close committed, so a crash anywhere in between only
// makes a later pass signal them (again: a lane takes a repeated wake as
// one more look at the circuit, and one not waiting keeps a single one).
// An event whose workflow is gone is left to the heads sweep, which starts
// it again; its lane then attempts afresh. A change of the endpoint's
// rate_limit stamps the same wake (store.EndpointRateSlotsReset): a lane
// waiting its turn under the old rate then reserves a fresh slot.
//
// A pass signals at most wakePerPass lanes of each endpoint, then goes on
// to the next: an endpoint with more keeps its stamp and where it got to
// (store.CircuitWakeProgress), and goes behind the others, so one endpoint
// with thousands of lanes holds none of the others up.
func (s *Starter) SweepCircuitWake(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	wakes, err := s.store.CircuitsWakePending(ctx, sweepBatch)
	if err != nil {
		return res, err
	}
	for _, w := range wakes {
		res.Claimed++
		// An endpoint's lanes are its tenant's.
		n, after, err := s.Tenant(w.TenantID).wake(ctx, w, wakePerPass)
		switch {
		case err != nil:
		case after != "":
			err = s.store.CircuitWakeProgress(ctx, w, after)
		default:
			err = s.store.CircuitWakeDone(ctx, w)
		}
		if err != nil {
			res.Failed++
			s.logger.Warn("wake the lanes of a closed circuit", "endpoint_id", w.EndpointID, "signalled", n, "error", err)
			continue
		}
		res.Done++
		if n > 0 {
			s.logger.Info("woke the lanes of a closed circuit", "endpoint_id", w.EndpointID, "signalled", n, "more", after != "")
		}
	}
	if _, err := s.store.CircuitsEventCatchUp(ctx, sweepBatch); err != nil {
		// The endpoints that failed are named; the others were served.
		s.logger.Warn("catch up circuit events", "error", err)
	}
	return res, nil
}

// wakePerPass bounds the lanes of one endpoint a pass of the wake
// signals, and autoReplayPerPass the dead letters of one endpoint a pass
// of the auto-replay replays, before the pass serves the next endpoint.
const (
	wakePerPass       = autoReplayPage
	autoReplayPerPass = autoReplayPage
)

// wake signals the events delivering to w's endpoint after w.After, up to
// limit of them, and returns how many it signalled and, when it stopped at
// limit with more maybe left, the last event it signalled ("" when it
// reached the end). A signal that fails does not stop the rest: the pass
// goes on to the end of its share and answers the first error, which
// keeps w for a later pass.
func (s *Starter) wake(ctx context.Context, w store.CircuitWake, limit int) (int, string, error) {
	arg := contract.CircuitClosed{EndpointID: w.EndpointID}
	ids, err := s.store.DeliveringAt(ctx, w.EndpointID, w.After, limit)
	if err != nil {
		return 0, "", err
	}
	n := 0
	var failed error
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.RowTimeout)
		err := s.temporal.SignalWorkflow(rctx, s.workflowID(id), "", contract.SignalCircuitClosed, arg)
		cancel()
		switch {
		case err == nil:
			n++
		case !isNotFound(err) && failed == nil:
			failed = fmt.Errorf("signal %s: %w", id, err)
		}
	}
	if len(ids) < limit || failed != nil {
		return n, "", failed
	}
	return n, ids[len(ids)-1], nil
}
