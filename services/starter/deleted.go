package starter

import (
	"context"
	"fmt"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
)

// SkipDeletedDeadLetters skips every open dead letter of the deleted
// endpoint, each lane in sequence order, as by (who deleted it), and returns
// how many it skipped: the claim on each row, then the skip signal to its
// workflow, as an operator's skip. A signal that fails keeps the claim, as
// an auto-replay's does: the heads sweep sends a claimed skip whose signal
// never arrived again (resendLostClaim). The delete's handler calls it, and
// so does SweepDeletedEndpoints, for a dead letter written while the delete
// ran (its attempt found the endpoint before the delete) or one an API
// process left when it stopped half way.
func (s *Starter) SkipDeletedDeadLetters(ctx context.Context, tenant, endpointID, by string) (int, error) {
	s = s.Tenant(tenant)
	f := store.DeadLetterFilter{EndpointID: endpointID, Status: store.DeadLetterOpen, Limit: autoReplayPage}
	n := 0
	err := s.eachDeadLetter(ctx, f, func(d store.DeadLetter) (bool, error) {
		ok, err := s.store.DeadLetterMarkSkipped(ctx, d.EventID, d.EndpointID, d.Generation, by, contract.EndpointDeletedNote)
		if err != nil || !ok {
			return err == nil, err // !ok: replayed or skipped meanwhile by someone else
		}
		sk := contract.Skip{EndpointID: d.EndpointID, Generation: d.Generation, By: by, Note: contract.EndpointDeletedNote}
		ended, err := s.SignalDeadLetter(ctx, d, contract.SignalSkip, sk)
		if err != nil {
			return false, fmt.Errorf("signal %s: %w", d.EventID, err)
		}
		if !ended {
			n++
		}
		return true, nil
	})
	return n, err
}

// SweepDeletedEndpoints skips the open dead letters of deleted endpoints
// (SkipDeletedDeadLetters), up to a batch of endpoints a pass.
func (s *Starter) SweepDeletedEndpoints(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	eps, err := s.store.EndpointsDeletedOpen(ctx, sweepBatch)
	if err != nil {
		return res, err
	}
	for _, ep := range eps {
		res.Claimed++
		// An endpoint's dead letters are its tenant's.
		n, err := s.SkipDeletedDeadLetters(ctx, ep.TenantID, ep.ID, ep.DeletedBy)
		if err != nil {
			res.Failed++
			s.logger.Warn("skip a deleted endpoint's dead letters", "endpoint_id", ep.ID, "skipped", n, "error", err)
			continue
		}
		res.Done++
	}
	return res, nil
}
