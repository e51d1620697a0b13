package starter

import (
	"context"
	"fmt"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// AutoReplayBy records who replayed the dead letters an endpoint's outage
// caused, once its circuit closed (auto_replay).
const AutoReplayBy = "hookflow (auto-replay)"

// autoReplayPage bounds the dead letters one page of an auto-replay reads.
const autoReplayPage = 200

// SweepAutoReplay carries out the auto-replays that closed circuits
// scheduled (store.CircuitsAutoReplayPending): for each endpoint, every
// open dead letter written since the pending replay's start whose reason
// is an outage's (contract.OutageCaused: never a permanent rejection) is
// replayed, each lane in sequence order, as AutoReplayBy. That start is on
// the database's clock, as dead_lettered_at is: the outage's first failure,
// or the circuit's previous close or enabling when earlier, so whatever
// order the closes, reopenings and enablings came in, no outage's dead
// letter falls between two passes (a late one asks for a pass of its own,
// store.CircuitLateOutageDeadLetter). Then the pending
// replay is cleared. The schedule is in the row that the close committed,
// so a crash anywhere in between only makes a later pass do it (again: a
// dead letter replayed already is no longer open, and the claim on each
// row lets one replay through). A pass replays at most autoReplayPerPass
// dead letters of each endpoint, then serves the next: an endpoint with
// more keeps its pending replay and goes behind the others
// (store.CircuitAutoReplayTurn); what it replayed is no longer open, so
// the next pass goes on from there.
//
// An outage longer than the window leaves no attempt to probe the
// endpoint (every lane's head is dead-lettered): when a probe is due, the
// pass replays the first of the outage's dead letters, in lane order, of
// each such endpoint (store.CircuitsProbeReplayClaim), and that replay's
// attempt is the probe that closes the circuit or opens it again.
func (s *Starter) SweepAutoReplay(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	probes, err := s.store.CircuitsProbeReplayClaim(ctx, sweepBatch, probeReplayEvery)
	if err != nil {
		return res, err
	}
	for _, p := range probes {
		res.Claimed++
		// An endpoint's dead letters are its tenant's.
		if _, err := s.Tenant(p.TenantID).autoReplay(ctx, p, 1); err != nil {
			res.Failed++
			s.logger.Warn("replay a dead letter to probe an open circuit", "endpoint_id", p.EndpointID, "error", err)
			continue
		}
		res.Done++
	}
	pending, err := s.store.CircuitsAutoReplayPending(ctx, sweepBatch)
	if err != nil {
		return res, err
	}
	for _, p := range pending {
		res.Claimed++
		n, err := s.Tenant(p.TenantID).autoReplay(ctx, p, autoReplayPerPass)
		more := n >= autoReplayPerPass
		switch {
		case err != nil:
		case more:
			// Its share of this pass: the rest after the other endpoints'.
			err = s.store.CircuitAutoReplayTurn(ctx, p.EndpointID)
		default:
			err = s.store.CircuitAutoReplayDone(ctx, p)
		}
		if err != nil {
			res.Failed++
			s.logger.Warn("auto-replay", "endpoint_id", p.EndpointID, "replayed", n, "error", err)
			continue
		}
		res.Done++
		s.logger.Info("auto-replayed the dead letters of an endpoint's outage", "endpoint_id", p.EndpointID, "replayed", n, "since", p.Since, "more", more)
	}
	return res, nil
}

// probeReplayEvery bounds how often the sweep replays a dead letter to
// probe one endpoint's open circuit (the attempt that replay makes claims
// the probe's lease within moments).
const probeReplayEvery = 10 * time.Second

// autoReplay replays p's dead letters, a page at a time, up to limit of
// them (0: all), and returns how many it replayed.
func (s *Starter) autoReplay(ctx context.Context, p store.AutoReplayPending, limit int) (int, error) {
	since := p.Since
	f := store.DeadLetterFilter{EndpointID: p.EndpointID, Status: store.DeadLetterOpen, Since: &since, Limit: autoReplayPage}
	n := 0
	err := s.eachDeadLetter(ctx, f, func(d store.DeadLetter) (bool, error) {
		if !contract.OutageCaused(d.Reason) {
			return true, nil
		}
		ok, err := s.replayDeadLetter(ctx, d)
		if ok {
			n++
		}
		return err == nil && (limit <= 0 || n < limit), err
	})
	return n, err
}

// eachDeadLetter calls do on each dead letter f selects, lane by lane in
// sequence order (DeadLetterReplayPage), a page of f.Limit at a time, until
// do answers false or fails.
func (s *Starter) eachDeadLetter(ctx context.Context, f store.DeadLetterFilter, do func(store.DeadLetter) (bool, error)) error {
	var after *store.ReplayCursor
	for {
		page, err := s.store.DeadLetterReplayPage(ctx, f, after)
		if err != nil {
			return err
		}
		for _, d := range page {
			if more, err := do(d); err != nil || !more {
				return err
			}
		}
		if len(page) < f.Limit {
			return nil
		}
		last := page[len(page)-1]
		after = &store.ReplayCursor{CorrelationID: last.CorrelationID, EndpointID: last.EndpointID, Sequence: last.Sequence, EventID: last.EventID}
	}
}

// replayDeadLetter claims the replay of d as AutoReplayBy, publishing its
// auto_replayed event with the claim (store.DeadLetterAutoReplayed), and
// signals its workflow; false when someone else claimed it first or its
// event is finished. A signal that fails keeps the claim, as an operator's
// replay that the API could not undo does: the heads sweep sends a claimed
// replay whose signal never arrived again (resendLostClaim), so the replay
// and its event each happen once.
func (s *Starter) replayDeadLetter(ctx context.Context, d store.DeadLetter) (bool, error) {
	ok, err := s.store.DeadLetterAutoReplayed(ctx, d, AutoReplayBy)
	if err != nil || !ok {
		return false, err
	}
	ended, err := s.SignalDeadLetter(ctx, d, contract.SignalReplay, contract.Replay{EndpointID: d.EndpointID, Generation: d.Generation, By: AutoReplayBy})
	if ended {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("signal %s: %w", d.EventID, err)
	}
	return true, nil
}
