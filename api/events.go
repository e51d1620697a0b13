package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// startTimeout bounds the workflow start inside a POST /v1/events.
const startTimeout = 3 * time.Second

type eventResponse struct {
	ID            string          `json:"id"`
	CorrelationID string          `json:"correlation_id"`
	Sequence      int64           `json:"sequence"`
	EndpointID    string          `json:"endpoint_id"`
	Type          string          `json:"type"`
	State         contract.State  `json:"state"`
	AcceptedAt    time.Time       `json:"accepted_at"`
	DeliveredAt   *time.Time      `json:"delivered_at,omitempty"`
	Attempts      []store.Attempt `json:"attempts"`
	// Restarts says how often a sweep or a replay had to start the event's
	// workflow again (an operator terminated it in the Web UI, say), when
	// last and why.
	Restarts *restarts `json:"restarts,omitempty"`
}

type restarts struct {
	Count  int32     `json:"count"`
	LastAt time.Time `json:"last_at"`
	Reason string    `json:"reason"`
}

// eventCreate accepts an event. The ledger row is written first; then its
// workflow is started. If Temporal cannot be reached the event stays queued
// (202, state "queued") and the starter's sweep starts it later.
func (s *Server) eventCreate(c echo.Context) error {
	var req intake.Request
	if err := s.decode(c, &req); err != nil {
		return err
	}
	ev, fe := intake.Validate(req)
	if fe != nil {
		return fieldProblem(fe.Field, fe.Detail)
	}
	traceEvent(c, ev)
	ctx := c.Request().Context()
	ep, err := s.deps.Store.EndpointGet(ctx, ev.EndpointID)
	if errors.Is(err, store.ErrNotFound) {
		p := problem(http.StatusNotFound, "unknown-endpoint", "Unknown endpoint", "no endpoint "+ev.EndpointID)
		p.Field = "endpoint_id"
		return p
	} else if err != nil {
		return err
	}
	if ep.Disabled {
		return s.eventForDisabled(c, ev)
	}

	stored, inserted, err := s.deps.Store.EventInsert(ctx, ev)
	if err != nil {
		return err
	}
	if !inserted {
		return s.eventConflict(c, ev)
	}
	// A slow or absent Temporal must not hold the producer: past a few
	// seconds the event stays queued and the sweep starts it later.
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	s.deps.Metrics.EventAccepted(stored.EndpointID)
	if err := s.deps.Starter.Start(sctx, stored); err != nil {
		s.deps.Logger.Warn("event stored, workflow start deferred to the sweep", "event_id", stored.ID, "error", err)
		return c.JSON(http.StatusAccepted, map[string]any{"id": stored.ID, "state": contract.StateQueued})
	}
	return c.JSON(http.StatusAccepted, map[string]any{"id": stored.ID, "state": contract.StateWaiting})
}

// eventForDisabled answers a post naming a disabled endpoint. A new event
// would dead-letter at once, so it is refused (409) and nothing is stored;
// the same event again, accepted before the endpoint was disabled, is
// answered as any repost is.
func (s *Server) eventForDisabled(c echo.Context, ev intake.Event) error {
	_, err := s.deps.Store.EventGet(c.Request().Context(), ev.ID)
	if err == nil {
		return s.eventConflict(c, ev)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	p := problem(http.StatusConflict, "endpoint-disabled", "Endpoint disabled",
		"endpoint "+ev.EndpointID+" is disabled: nothing is accepted for it until it is enabled again (PATCH it with disabled false)")
	p.Field = "endpoint_id"
	return p
}

// eventConflict answers a post whose id or sequence is taken: the same
// event again → 200 with its state; the id with other content → 422; the
// sequence under another id → 409.
func (s *Server) eventConflict(c echo.Context, ev intake.Event) error {
	ctx := c.Request().Context()
	existing, err := s.deps.Store.EventGet(ctx, ev.ID)
	if err == nil {
		if !bytes.Equal(existing.PayloadHash, ev.PayloadHash) {
			p := problem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused",
				"event "+ev.ID+" was accepted with different content; a key names one event forever")
			p.Field = "id"
			return p
		}
		if existing.State == contract.StateQueued {
			// The first start may have failed; trying again is harmless.
			sctx, cancel := context.WithTimeout(ctx, startTimeout)
			defer cancel()
			if err := s.deps.Starter.Start(sctx, existing); err == nil {
				existing.State = contract.StateWaiting
			}
		}
		return s.writeEvent(c, http.StatusOK, existing)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	hw, err := s.deps.Store.CorrelationHighWater(ctx, ev.CorrelationID)
	if err != nil {
		return err
	}
	next, err := s.deps.Store.CorrelationNext(ctx, ev.CorrelationID)
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("sequence %d of correlation %s is already taken by another event", ev.Sequence, ev.CorrelationID)
	if ev.Sequence < next {
		detail = fmt.Sprintf("sequence %d of correlation %s is already delivered", ev.Sequence, ev.CorrelationID)
	}
	p := problem(http.StatusConflict, "sequence-taken", "Sequence already taken", detail)
	p.Field = "sequence"
	p.Extensions = map[string]any{"correlation_id": ev.CorrelationID, "high_water_mark": hw, "next_sequence": next}
	return p
}

func (s *Server) writeEvent(c echo.Context, status int, ev store.Event) error {
	attempts, err := s.deps.Store.AttemptsList(c.Request().Context(), ev.ID)
	if err != nil {
		return err
	}
	if attempts == nil {
		attempts = []store.Attempt{}
	}
	resp := eventResponse{
		ID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ev.EndpointID, Type: ev.Type,
		State: ev.State, AcceptedAt: ev.AcceptedAt, DeliveredAt: ev.DeliveredAt, Attempts: attempts,
	}
	if ev.Restarts > 0 && ev.RestartedAt != nil && ev.RestartReason != nil {
		resp.Restarts = &restarts{Count: ev.Restarts, LastAt: *ev.RestartedAt, Reason: *ev.RestartReason}
	}
	return c.JSON(status, resp)
}

func (s *Server) eventGet(c echo.Context) error {
	id := c.Param("id")
	if p := validKey("id", id); p != nil {
		return p
	}
	ev, err := s.deps.Store.EventGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no event "+id)
	} else if err != nil {
		return err
	}
	return s.writeEvent(c, http.StatusOK, ev)
}

type blocker struct {
	Sequence int64          `json:"sequence"`
	EventID  string         `json:"event_id,omitempty"`
	State    contract.State `json:"state"`
}

type correlationResponse struct {
	CorrelationID string            `json:"correlation_id"`
	NextSequence  int64             `json:"next_sequence"`
	Released      *contract.Arrival `json:"released,omitempty"`
	Parked        []int64           `json:"parked"`
	Skipped       []int64           `json:"skipped"`
	BlockedBy     *blocker          `json:"blocked_by,omitempty"`
	// Source says where the order came from: "sequencer" (its state query),
	// or "ledger" when no sequencer answered (none runs, or Temporal is
	// unavailable), from the cursor its last run left.
	Source string `json:"source"`
}

// sequencerQueryTimeout bounds the sequencer's state query; past it the
// ledger answers.
const sequencerQueryTimeout = 2 * time.Second

// correlationGet reports where a correlation stands, as its sequencer sees
// it: the sequence it releases next, the event it released, what is parked
// behind it, and what holds it (the next event's state, or "missing" when
// that sequence has not arrived).
func (s *Server) correlationGet(c echo.Context) error {
	id := c.Param("id")
	if p := validKey("id", id); p != nil {
		return p
	}
	ctx := c.Request().Context()
	pending, err := s.deps.Store.CorrelationPending(ctx, id, 1000)
	if err != nil {
		return err
	}
	resp := correlationResponse{CorrelationID: id, Parked: []int64{}, Skipped: []int64{}}
	if st, ok := s.sequencerState(ctx, id); ok {
		resp.Source, resp.NextSequence, resp.Released = "sequencer", st.Next, st.Released
		for _, p := range st.Parked {
			resp.Parked = append(resp.Parked, p.Sequence)
		}
		resp.Skipped = append(resp.Skipped, st.Skipped...)
	} else {
		if resp.NextSequence, err = s.deps.Store.CorrelationNext(ctx, id); err != nil {
			return err
		}
		skipped, err := s.deps.Store.CorrelationSkippedTail(ctx, id)
		if err != nil {
			return err
		}
		resp.Source, resp.Skipped = "ledger", append(resp.Skipped, skipped...)
		for _, p := range pending {
			if p.Sequence > resp.NextSequence {
				resp.Parked = append(resp.Parked, p.Sequence)
			}
		}
	}
	for _, p := range pending {
		if p.Sequence == resp.NextSequence {
			resp.BlockedBy = &blocker{Sequence: p.Sequence, EventID: p.ID, State: p.State}
		}
	}
	if resp.BlockedBy == nil && len(resp.Parked) > 0 {
		resp.BlockedBy = &blocker{Sequence: resp.NextSequence, State: "missing"}
	}
	if resp.BlockedBy == nil && len(pending) == 0 {
		hw, err := s.deps.Store.CorrelationHighWater(ctx, id)
		if err != nil {
			return err
		}
		if hw == 0 {
			return problem(http.StatusNotFound, "not-found", "Not Found", "no events for correlation "+id)
		}
	}
	return c.JSON(http.StatusOK, resp)
}

// sequencerState asks the correlation's sequencer for its state; ok is
// false when none answers in time.
func (s *Server) sequencerState(ctx context.Context, correlationID string) (contract.SequencerState, bool) {
	qctx, cancel := context.WithTimeout(ctx, sequencerQueryTimeout)
	defer cancel()
	var st contract.SequencerState
	v, err := s.deps.Temporal.QueryWorkflow(qctx, contract.SequencerID(correlationID), "", contract.QueryState)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err == nil
}
