package starter

import (
	"context"
	"fmt"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// SweepCircuitWake tells the lanes an open circuit held that it closed
// (store.CircuitsWakePending: a probe answered, or an operator enabled the
// endpoint): every event delivering to the endpoint gets
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
func (s *Starter) SweepCircuitWake(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	wakes, err := s.store.CircuitsWakePending(ctx, sweepBatch)
	if err != nil {
		return res, err
	}
	for _, w := range wakes {
		res.Claimed++
		n, err := s.wake(ctx, w)
		if err == nil {
			err = s.store.CircuitWakeDone(ctx, w)
		}
		if err != nil {
			res.Failed++
			s.logger.Warn("wake the lanes of a closed circuit", "endpoint_id", w.EndpointID, "signalled", n, "error", err)
			continue
		}
		res.Done++
		if n > 0 {
			s.logger.Info("woke the lanes of a closed circuit", "endpoint_id", w.EndpointID, "signalled", n)
		}
	}
	return res, nil
}

// wake signals every event delivering to w's endpoint, a page at a time,
// and returns how many it signalled. A signal that fails does not stop the
// rest: the pass goes on to the end and answers the first error, which
// keeps w for a later pass.
func (s *Starter) wake(ctx context.Context, w store.CircuitWake) (int, error) {
	arg := contract.CircuitClosed{EndpointID: w.EndpointID}
	n, after := 0, ""
	var failed error
	for {
		ids, err := s.store.DeliveringAt(ctx, w.EndpointID, after, autoReplayPage)
		if err != nil {
			return n, err
		}
		for _, id := range ids {
			rctx, cancel := context.WithTimeout(ctx, s.cfg.RowTimeout)
			err := s.temporal.SignalWorkflow(rctx, id, "", contract.SignalCircuitClosed, arg)
			cancel()
			switch {
			case err == nil:
				n++
			case !isNotFound(err) && failed == nil:
				failed = fmt.Errorf("signal %s: %w", id, err)
			}
		}
		if len(ids) < autoReplayPage {
			return n, failed
		}
		after = ids[len(ids)-1]
	}
}
