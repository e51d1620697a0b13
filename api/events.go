package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/intake"
	"github.com/hookflow/hookflow/store"
)

// startTimeout bounds the workflow start inside a POST /v1/events.
const startTimeout = 3 * time.Second

type eventResponse struct {
	ID            string          `json:"id"`
	CorrelationID string          `json:"correlation_id"`
	Sequence      int64           `json:"sequence"`
	EndpointID    string          `json:"endpoint_id"`
	Type          string          `json:"type"`
	State         string          `json:"state"`
	AcceptedAt    time.Time       `json:"accepted_at"`
	DeliveredAt   *time.Time      `json:"delivered_at,omitempty"`
	Attempts      []store.Attempt `json:"attempts"`
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
	if _, err := s.deps.Store.EndpointGet(ctx, ev.EndpointID); errors.Is(err, store.ErrNotFound) {
		p := problem(http.StatusNotFound, "unknown-endpoint", "Unknown endpoint", "no endpoint "+ev.EndpointID)
		p.Field = "endpoint_id"
		return p
	} else if err != nil {
		return err
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
		return c.JSON(http.StatusAccepted, map[string]string{"id": stored.ID, "state": store.StateQueued})
	}
	return c.JSON(http.StatusAccepted, map[string]string{"id": stored.ID, "state": store.StateWaiting})
}

// eventConflict answers a post whose id or sequence is taken: the same
// event again → 200 with its state; the id with other content → 422; the
// sequence under another id → 409.
func (s *Server) eventConflict(c echo.Context, ev store.Event) error {
	ctx := c.Request().Context()
	existing, err := s.deps.Store.EventGet(ctx, ev.ID)
	if err == nil {
		if !bytes.Equal(existing.PayloadHash, ev.PayloadHash) {
			p := problem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused",
				"event "+ev.ID+" was accepted with different content; a key names one event forever")
			p.Field = "id"
			return p
		}
		if existing.State == store.StateQueued {
			// The first start may have failed; trying again is harmless.
			sctx, cancel := context.WithTimeout(ctx, startTimeout)
			defer cancel()
			if err := s.deps.Starter.Start(sctx, existing); err == nil {
				existing.State = store.StateWaiting
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
	return c.JSON(status, eventResponse{
		ID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ev.EndpointID, Type: ev.Type,
		State: ev.State, AcceptedAt: ev.AcceptedAt, DeliveredAt: ev.DeliveredAt, Attempts: attempts,
	})
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
	Sequence int64  `json:"sequence"`
	EventID  string `json:"event_id,omitempty"`
	State    string `json:"state"`
}

type correlationResponse struct {
	CorrelationID string   `json:"correlation_id"`
	NextSequence  int64    `json:"next_sequence"`
	Parked        []int64  `json:"parked"`
	BlockedBy     *blocker `json:"blocked_by,omitempty"`
}

// correlationGet reports where a correlation stands: the sequence it needs
// next, what is parked behind it, and what holds it (the next event's state,
// or "missing" when that sequence has not arrived).
func (s *Server) correlationGet(c echo.Context) error {
	id := c.Param("id")
	if p := validKey("id", id); p != nil {
		return p
	}
	ctx := c.Request().Context()
	next, err := s.deps.Store.CorrelationNext(ctx, id)
	if err != nil {
		return err
	}
	pending, err := s.deps.Store.CorrelationPending(ctx, id, 1000)
	if err != nil {
		return err
	}
	resp := correlationResponse{CorrelationID: id, NextSequence: next, Parked: []int64{}}
	for _, p := range pending {
		switch {
		case p.Sequence == next:
			resp.BlockedBy = &blocker{Sequence: p.Sequence, EventID: p.ID, State: p.State}
		case p.Sequence > next:
			resp.Parked = append(resp.Parked, p.Sequence)
		}
	}
	if resp.BlockedBy == nil && len(resp.Parked) > 0 {
		resp.BlockedBy = &blocker{Sequence: next, State: "missing"}
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
