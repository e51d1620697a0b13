package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookflow/hookflow/internal/accept"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/intake"
)

// startTimeout bounds the workflow start inside a POST /v1/events: a slow
// or absent Temporal must not hold the producer, so past it the event
// stays queued and the sweep starts it later.
const startTimeout = 3 * time.Second

// An event's answer (wire.Event) has its State, how its deliveries stand
// together (contract.Aggregate); Unrouted when no endpoint took it
// (routedNowhere); each delivery's last eventAttemptsListed attempts,
// oldest first, with AttemptCount counting them all (GET
// /v1/events/{id}/deliveries/{endpoint_id}/attempts pages through them);
// and Restarts: how often a sweep or a replay had to start its workflow
// again (an operator terminated it in the Web UI, say), when last and why.

// routedNowhere reports an event that no endpoint took: it names none, and
// none subscribed to its type when it was accepted. Its state says
// delivered (nothing to deliver, its place in its correlation taken), so
// this is what tells it from one its receivers applied. It is derived from
// the deliveries, which are written with the event and deleted only with
// it (EventsPruneKeys), so none means none were routed; the ledger reads
// "routed" the same way (EventMarkStarted).
func routedNowhere(deliveries int) bool { return deliveries == 0 }

// EventCreate accepts an event and routes it: to the endpoint it names, or
// else to every endpoint subscribed to its type (event_types) now, disabled
// ones included (paused: the event waits in their lanes);
// the routing is stored with the event, so a later change of subscription
// affects later events only. The ledger row is written first; then its
// workflow is started. If Temporal cannot be reached the event stays queued
// (202, state "queued") and the starter's sweep starts it later. An event
// nobody subscribes to is accepted all the same (deliveries: [], unrouted:
// true): it still takes its place in its correlation's order. The decisions
// are package accept's, which the outbox relay shares; this answers them.
func (s *Server) EventCreate(c echo.Context) error {
	var req intake.Request
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if err := s.actOn(c, deref(req.TenantID)); err != nil {
		return err
	}
	if err := s.limitTenantPosts(c); err != nil {
		return err
	}
	o, err := s.accept.Accept(c.Request().Context(), s.ledger(c), accept.Request{Event: req})
	if o.Kind != accept.Invalid {
		traceEvent(c, o.Event)
	}
	if err != nil {
		return err
	}
	ev := o.Event
	switch o.Kind {
	case accept.Accepted:
		return s.answerAccepted(c, o)
	case accept.Repost:
		return s.writeEvent(c, http.StatusOK, o.Stored)
	case accept.Invalid:
		if o.Invalid.Reserved {
			// Well formed, but hookflow's own: its operational events.
			p := problem(http.StatusUnprocessableEntity, "reserved-field", "Reserved by hookflow", o.Invalid.Detail)
			p.Field = o.Invalid.Field
			return p
		}
		return fieldProblem(o.Invalid.Field, o.Invalid.Detail)
	case accept.UnknownEndpoint:
		p := problem(http.StatusNotFound, "unknown-endpoint", "Unknown endpoint", "no endpoint "+ev.EndpointID)
		p.Field = "endpoint_id"
		return p
	case accept.TooManySubscribers:
		return tooManySubscribers(ev.Type, s.cfg.MaxSubscribers)
	case accept.EndpointDisabled:
		p := problem(http.StatusConflict, "endpoint-disabled", "Endpoint disabled",
			"endpoint "+ev.EndpointID+" is disabled: nothing is accepted for it until it is enabled again (PATCH it with disabled false)")
		p.Field = "endpoint_id"
		return p
	case accept.KeyReused:
		p := problem(http.StatusUnprocessableEntity, "idempotency-key-reused", "Idempotency key reused", o.Detail())
		p.Field = "id"
		return p
	case accept.SchemaInvalid:
		return schemaViolation(o.Violation)
	case accept.SequenceTaken:
		p := problem(http.StatusConflict, "sequence-taken", "Sequence already taken", o.Detail())
		p.Field = "sequence"
		p.Extensions = map[string]any{"correlation_id": ev.CorrelationID, "high_water_mark": o.Taken.HighWater, "next_sequence": o.Taken.Next}
		return p
	}
	return fmt.Errorf("answer event %s: unknown outcome %d", ev.ID, o.Kind)
}

// startAccepted starts a newly stored event's workflow as every publish
// does (EndpointTest's event, stored its own way) and answers it.
func (s *Server) startAccepted(c echo.Context, stored store.Event) error {
	return s.answerAccepted(c, s.accept.Start(c.Request().Context(), s.ledger(c), stored))
}

// answerAccepted answers a newly stored event 202 with its state and where
// it was routed: waiting once its workflow is started, or queued when
// Temporal did not answer in time (the sweep starts it later).
func (s *Server) answerAccepted(c echo.Context, o accept.Outcome) error {
	stored := o.Stored
	for _, ep := range stored.Endpoints {
		s.deps.Metrics.EventAccepted(ep)
	}
	state := contract.StateWaiting
	if !o.Started {
		s.deps.Logger.Warn("event stored, workflow start deferred to the sweep", "event_id", stored.ID, "error", o.StartErr)
		state = contract.StateQueued
	}
	resp := wire.Accepted{ID: stored.ID, State: wire.AcceptedState(state), Unrouted: routedNowhere(len(stored.Endpoints)), Deliveries: []wire.AcceptedDelivery{},
		FilteredOut: stored.FilteredOut}
	for _, ep := range stored.Endpoints {
		resp.Deliveries = append(resp.Deliveries, wire.AcceptedDelivery{EndpointID: ep, State: string(state)})
	}
	if len(stored.Endpoints) == 0 && state == contract.StateWaiting {
		resp.State = wire.AcceptedState(contract.StateDelivered) // nothing to deliver, and its place taken
	}
	return c.JSON(http.StatusAccepted, resp)
}

// tooManySubscribers refuses an event more than max endpoints subscribe to
// (HOOKFLOW_MAX_SUBSCRIBERS): refused at accept, before anything is stored,
// rather than accepted with more lanes than its workflow is sized for.
func tooManySubscribers(eventType string, max int) *Problem {
	p := problem(http.StatusUnprocessableEntity, "too-many-subscribers", "Too many subscribers",
		fmt.Sprintf("more than %d endpoints are subscribed to type %s, the cap on the endpoints one event goes to (HOOKFLOW_MAX_SUBSCRIBERS): narrow their event_types, address one endpoint with endpoint_id, or raise the setting", max, eventType))
	p.Field = "type"
	p.Extensions = map[string]any{"setting": "HOOKFLOW_MAX_SUBSCRIBERS", "limit": max}
	return p
}

// deliveryView is the state a delivery of ev is shown in: a queued
// event's (its workflow not started) are all queued.
func deliveryView(ev store.Event, d store.Delivery) wire.State {
	if ev.State == contract.StateQueued {
		return wire.State(contract.StateQueued)
	}
	return wire.State(d.State)
}

func (s *Server) writeEvent(c echo.Context, status int, ev store.Event) error {
	resp := wire.Event{
		ID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, Type: ev.Type,
		State: wire.State(ev.State), AcceptedAt: ev.AcceptedAt, Unrouted: routedNowhere(len(ev.Deliveries)), Deliveries: []wire.Delivery{},
		FilteredOut: ev.FilteredOut, Metadata: ev.Metadata,
	}
	// One query for every delivery's last attempts, however many endpoints
	// the event went to and however often each was tried.
	last, err := s.ledger(c).AttemptsLastByEvent(c.Request().Context(), ev.ID, eventAttemptsListed)
	if err != nil {
		return err
	}
	for _, d := range ev.Deliveries {
		dr := wire.Delivery{EndpointID: d.EndpointID, State: deliveryView(ev, d), ReleasedAt: deref(d.ReleasedAt), DeliveredAt: deref(d.DeliveredAt),
			Attempts: attemptsView(last[d.EndpointID]), AttemptCount: int64(d.Attempts)}
		if d.DeadLetterGeneration > 0 {
			dr.DeadLetter = &wire.DeadLetterRef{Generation: int64(d.DeadLetterGeneration), Status: wire.DeadLetterStatus(d.DeadLetterStatus)}
		}
		resp.Deliveries = append(resp.Deliveries, dr)
	}
	if ev.Restarts > 0 && ev.RestartedAt != nil && ev.RestartReason != nil {
		resp.Restarts = &wire.Restarts{Count: int64(ev.Restarts), LastAt: *ev.RestartedAt, Reason: *ev.RestartReason}
	}
	return c.JSON(status, resp)
}

// EventGet answers an event: its state, and each delivery's.
func (s *Server) EventGet(c echo.Context, id wire.Key, _ wire.EventGetParams) error {
	ev, err := s.ledger(c).EventGet(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no event "+id)
	} else if err != nil {
		return err
	}
	return s.writeEvent(c, http.StatusOK, ev)
}

// eventAttemptsListed bounds the attempts GET /v1/events/{id} lists per
// delivery: the last ones, which say how it stands; a delivery retried
// through many windows and replays has its whole record paged by
// eventAttempts.
const eventAttemptsListed = 20

// Pages of GET /v1/events/{id}/deliveries/{endpoint_id}/attempts.
const (
	attemptPageDefault = 100
	attemptPageMax     = 500
)

// EventAttempts answers GET /v1/events/{id}/deliveries/{endpoint_id}/attempts:
// a page of the delivery's attempts, oldest first, limit and cursor as the
// other lists take them; 404 when the event has no delivery to the
// endpoint. Its cursor is opaque (the last attempt's row ID).
func (s *Server) EventAttempts(c echo.Context, id, endpointID wire.Key, q wire.EventAttemptsParams) error {
	limit, p := queryLimit(q.Limit, attemptPageDefault, attemptPageMax)
	if p != nil {
		return p
	}
	var after int64
	if v := deref(q.Cursor); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		n, perr := strconv.ParseInt(string(b), 10, 64)
		if err != nil || perr != nil || n < 1 {
			return fieldProblem("cursor", "cursor is not one this API returned")
		}
		after = n
	}
	// One more than the page, to tell whether a next one is due. An
	// endpoint a limited session does not reach has no delivery for it.
	ledger := s.ledger(c)
	attempts, ids, err := ledger.AttemptsPage(c.Request().Context(), id, endpointID, after, limit+1)
	if errors.Is(err, store.ErrNotFound) || !ledger.Reaches(endpointID) {
		return problem(http.StatusNotFound, "not-found", "Not Found", "event "+id+" has no delivery to endpoint "+endpointID)
	} else if err != nil {
		return err
	}
	var page wire.AttemptPage
	if len(attempts) > limit {
		attempts = attempts[:limit]
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ids[limit-1], 10)))
	}
	page.Items = attemptsView(attempts)
	return c.JSON(http.StatusOK, page)
}

// A correlation's answer (wire.Correlation) has its cursor (NextSequence:
// every sequence below it is finished in every lane); Missing, the first
// sequence from the cursor on that has not arrived when a later one has (it
// holds every lane); the sequences an operator voided (POST
// /v1/correlations/{id}/skip), which every lane moves past; and Source,
// where the order came from: "sequencer" (its state query), or "ledger"
// when no sequencer answered (none runs, or Temporal is unavailable). Each
// lane is one endpoint's: the sequence it delivers next, the one released
// (in flight or dead-lettered), those parked behind it (parked_more when
// more wait than maxLaneParked), the sequence last delivered (the next
// envelope's previous_sequence) and the skips since, and what holds it. A
// sequence is 1 or more: 0 is none.

// sequencerQueryTimeout bounds the sequencer's state query; past it the
// ledger answers.
const sequencerQueryTimeout = 2 * time.Second

// maxLaneParked bounds the parked sequences GET /v1/correlations lists per
// lane; parked_more says when more wait.
const maxLaneParked = 100

// CorrelationGet reports where a correlation stands, lane by lane, as its
// sequencer sees it (or the ledger, when none answers): for each endpoint
// the sequence it delivers next, the one released, what is parked behind
// it (the ledger's open deliveries), and what holds it (the released
// delivery's state, or "missing" when an earlier sequence has not
// arrived). A portal session limited to some endpoints sees their lanes
// only, and a correlation with none of them as one that does not exist.
func (s *Server) CorrelationGet(c echo.Context, id wire.Key, _ wire.CorrelationGetParams) error {
	ctx := c.Request().Context()
	ledger := s.ledger(c)
	if reaches, err := ledger.CorrelationReaches(ctx, id); err != nil {
		return err
	} else if !reaches {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no events for correlation "+id)
	}
	load, err := ledger.CorrelationLoadOf(ctx, id, maxLaneParked)
	if err != nil {
		return err
	}
	st, ok := s.sequencerState(ctx, principalOf(c).tenant, id)
	resp := wire.Correlation{CorrelationID: id, Source: wire.CorrelationSourceSequencer, Lanes: []wire.Lane{}}
	if !ok {
		resp.Source, st = wire.CorrelationSourceLedger, ledgerState(load)
	}
	if len(st.Lanes) == 0 && len(load.Lanes) == 0 {
		hw, err := ledger.CorrelationHighWater(ctx, id)
		if err != nil {
			return err
		}
		if hw == 0 {
			return problem(http.StatusNotFound, "not-found", "Not Found", "no events for correlation "+id)
		}
	}
	resp.NextSequence = st.Next
	resp.Voided = nonNil(load.Voided)
	if len(st.Arrived) > 0 {
		resp.Missing = st.Frontier
	}
	loads := map[string]store.LaneLoad{}
	for _, ln := range load.Lanes {
		loads[ln.EndpointID] = ln
	}
	for _, l := range st.Lanes {
		if !ledger.Reaches(l.Endpoint) {
			continue
		}
		lr := wire.Lane{EndpointID: l.Endpoint, Parked: []int64{}, PreviousSequence: l.Previous, Skipped: append([]int64{}, l.Skipped...)}
		ln := loads[l.Endpoint]
		lr.ParkedMore = ln.More
		lr.Released = l.InFlight
		for _, q := range ln.Open {
			if q.Sequence == l.InFlight {
				continue
			}
			if lr.Next == 0 && lr.Released == 0 {
				lr.Next = q.Sequence
			}
			lr.Parked = append(lr.Parked, q.Sequence)
		}
		switch {
		case lr.Released != 0:
			lr.BlockedBy = &wire.BlockedBy{Sequence: l.InFlight, EventID: l.InFlightEvent, State: string(s.deliveryState(ctx, ledger, ln, l))}
		case resp.Missing != 0 && len(lr.Parked) > 0 && lr.Parked[0] > resp.Missing:
			lr.BlockedBy = &wire.BlockedBy{Sequence: resp.Missing, State: "missing"}
		}
		resp.Lanes = append(resp.Lanes, lr)
	}
	if p := principalOf(c).portal; p != nil && p.EndpointsLimited && len(resp.Lanes) == 0 {
		return problem(http.StatusNotFound, "not-found", "Not Found", "no events for correlation "+id)
	}
	return c.JSON(http.StatusOK, resp)
}

// deliveryState is the ledger's state of the lane's delivery in flight:
// from the lane's load when it lists it, else from its event (the ledger
// has it finished, and the sequencer has not heard yet).
func (s *Server) deliveryState(ctx context.Context, st *store.Store, ln store.LaneLoad, l contract.LaneState) contract.State {
	for _, q := range ln.Open {
		if q.Sequence == l.InFlight {
			return q.State
		}
	}
	if e, err := st.EventGet(ctx, l.InFlightEvent); err == nil {
		for _, d := range e.Deliveries {
			if d.EndpointID == l.Endpoint {
				return d.State
			}
		}
	}
	return ""
}

// ledgerState is a correlation's state as the ledger has it, shaped as a
// sequencer's: a lane's first open delivery, when it is delivering or
// dead-lettered, is its released one.
func ledgerState(l store.CorrelationLoad) contract.SequencerState {
	st := contract.SequencerState{Next: l.Next, Frontier: l.Frontier, Arrived: l.Arrived, Voided: l.Voided}
	for _, ln := range l.Lanes {
		ls := contract.LaneState{Endpoint: ln.EndpointID, Previous: ln.Previous, Skipped: ln.Skipped, LastFinished: ln.LastFinished}
		if len(ln.Open) > 0 && (ln.Open[0].State == contract.StateDelivering || ln.Open[0].State == contract.StateDeadLettered) {
			ls.InFlight, ls.InFlightEvent = ln.Open[0].Sequence, ln.Open[0].EventID
		}
		st.Lanes = append(st.Lanes, ls)
	}
	return st
}

// sequencerState asks the correlation's sequencer for its state; ok is
// false when none answers in time.
func (s *Server) sequencerState(ctx context.Context, tenant, correlationID string) (contract.SequencerState, bool) {
	qctx, cancel := context.WithTimeout(ctx, sequencerQueryTimeout)
	defer cancel()
	var st contract.SequencerState
	v, err := s.deps.Temporal.QueryWorkflow(qctx, contract.SequencerID(tenant, correlationID), "", contract.QueryState)
	if err == nil {
		err = v.Get(&st)
	}
	return st, err == nil
}

// attemptsView is attempts as the API shows them, [] for none.
func attemptsView(attempts []store.Attempt) []wire.Attempt {
	out := make([]wire.Attempt, 0, len(attempts))
	for _, a := range attempts {
		out = append(out, wire.Attempt{Attempt: int64(a.Attempt), StartedAt: a.StartedAt, LatencyMS: int64(a.LatencyMS),
			StatusCode: int64(deref(a.StatusCode)), Error: deref(a.Error), Outcome: wire.AttemptOutcome(a.Outcome)})
	}
	return out
}
