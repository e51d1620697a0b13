package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// CorrelationSkip voids sequences that the producer lost (they never
// arrived, and never will): each is stored as a tombstone in its place,
// recorded with the key's name, when and the note, so that every lane of the
// correlation moves past it (receivers find it in the skipped_sequences of
// each lane's next envelope) and a later post of it is refused as taken
// (409) and delivered nowhere. A sequence that has arrived is no producer's
// loss: any such refuses the whole request (422, naming them), and nothing
// is stored. The sequencer learns of them by a resync (which loads the
// ledger) before the answer; when that fails the answer is 503, and a repeat
// of the request, which finds them voided, tells it again.
//
// A void is kept in its lane and bounded (store.CorrelationVoid): a
// hookflow: correlation is refused (422, field correlation_id), and so are
// sequences more than store.MaxVoidAhead past the highest the correlation
// holds (422, field sequences); a portal session limited to endpoints finds
// a correlation with no lane at them as one that does not exist (404).
func (s *Server) CorrelationSkip(c echo.Context, id wire.Key, _ wire.CorrelationSkipParams) error {
	var req wire.CorrelationSkip
	if err := s.decode(c, &req); err != nil {
		return err
	}
	// The document bounds sequences (1 to 100 of them, each 1 or more):
	// what stays here is what the ledger knows.
	ctx := c.Request().Context()
	by := principalOf(c).name
	v, err := s.ledger(c).CorrelationVoid(ctx, id, req.Sequences, by, req.Note)
	if errors.Is(err, store.ErrReservedCorrelation) {
		p := problem(http.StatusUnprocessableEntity, "reserved-correlation", "Reserved correlation",
			fmt.Sprintf("correlation %s is hookflow's own (its operational or test events): its sequences cannot be voided; nothing was voided", id))
		p.Field = "correlation_id"
		return p
	}
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no events for correlation "+id)
	}
	if err != nil {
		return err
	}
	if len(v.Beyond) > 0 {
		p := problem(http.StatusUnprocessableEntity, "sequence-out-of-reach", "Sequence out of reach",
			fmt.Sprintf("correlation %s may be voided up to sequence %d (at most %d past the highest sequence it holds): %v are beyond it; nothing was voided",
				id, v.Ceiling, store.MaxVoidAhead, v.Beyond))
		p.Field = "sequences"
		p.Extensions = map[string]any{"beyond": v.Beyond, "ceiling": v.Ceiling}
		return p
	}
	if len(v.Arrived) > 0 {
		p := problem(http.StatusUnprocessableEntity, "sequence-arrived", "Sequence arrived",
			fmt.Sprintf("correlation %s has sequences %v already: only a sequence that never arrived can be voided (skip a dead letter instead); nothing was voided", id, v.Arrived))
		p.Field = "sequences"
		p.Extensions = map[string]any{"arrived": v.Arrived}
		return p
	}
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := s.deps.Starter.Resync(sctx, principalOf(c).tenant, id); err != nil {
		if !temporalUnavailable(err) {
			return fmt.Errorf("resync sequencer of %s: %w", id, err)
		}
		return problem(http.StatusServiceUnavailable, "temporal-unavailable", "Service Unavailable",
			"the sequences are voided, and the correlation's sequencer could not be told: send the same request again")
	}
	// What the void did: the sequences it voided now, those voided before
	// (a repeat changes nothing of them), and who voided them.
	resp := wire.CorrelationVoided{CorrelationID: id, Voided: nonNil(v.Voided), AlreadyVoided: nonNil(v.Already), VoidedBy: by}
	return c.JSON(http.StatusOK, resp)
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return slices.Clip(s)
}
