package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.temporal.io/api/serviceerror"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/signalerr"
	"github.com/hookflow/hookflow/internal/store"
	wire "github.com/hookflow/hookflow/kit/client"
)

// A page of dead letters has a response budget: each row's envelope may be
// as large as the API's body limit (1 MiB by default), so a page carries
// envelopes and attempts only when include asks for them, and is then
// smaller. The single-item view (GET /v1/dead-letters/{id}) has everything.
const (
	deadLetterPageDefault = 50
	deadLetterPageMax     = 500
	// deadLetterPageMaxIncluded bounds a page with include: 20 envelopes
	// of at most 1 MiB.
	deadLetterPageMaxIncluded = 20
)

// deadLetterFilter is a listing's filter from its parameters, which the
// document has checked (operations.go): identifiers, status, since and
// until, limit's bounds. What stays here is what it cannot say: include's
// list, limit's lower bound when include asks for envelopes or attempts,
// and a cursor this API returned.
func deadLetterFilter(q wire.DeadLetterListParams) (store.DeadLetterFilter, *Problem) {
	f := store.DeadLetterFilter{
		CorrelationID: deref(q.CorrelationID),
		EndpointID:    deref(q.EndpointID),
		EventID:       deref(q.EventID),
		Since:         q.Since,
		Until:         q.Until,
	}
	if v := deref(q.Include); v != "" {
		for _, part := range strings.Split(v, ",") {
			switch strings.TrimSpace(part) {
			case "envelope":
				f.WithEnvelope = true
			case "attempts":
				f.WithAttempts = true
			default:
				return f, fieldProblem("include", "include lists envelope and/or attempts, comma separated")
			}
		}
	}
	switch status := deref(q.Status); status {
	case "":
		f.Status = store.DeadLetterOpen
	case wire.DeadLetterListParamsStatusAll:
		f.Status = ""
	default:
		f.Status = string(status)
	}
	maxLimit := deadLetterPageMax
	if f.WithEnvelope || f.WithAttempts {
		maxLimit = deadLetterPageMaxIncluded
	}
	var p *Problem
	if f.Limit, p = queryLimit(q.Limit, min(deadLetterPageDefault, maxLimit), maxLimit); p != nil {
		p.Detail += " when include asks for envelopes or attempts"
		return f, p
	}
	if v := deref(q.Cursor); v != "" {
		t, id, ep, ok := decodeCursor(v)
		if !ok {
			return f, fieldProblem("cursor", "cursor is not one this API returned")
		}
		f.AfterTime, f.AfterID, f.AfterEndpointID = &t, id, ep
	}
	return f, nil
}

// queryLimit is a list's limit: def when there is none. Its bounds in the
// document are checked already; max is a lower one that depends on the
// other parameters.
func queryLimit(limit *int64, def, max int) (int, *Problem) {
	if limit == nil {
		return def, nil
	}
	if *limit > int64(max) {
		return 0, fieldProblem("limit", fmt.Sprintf("limit must be a whole number from 1 to %d", max))
	}
	return int(*limit), nil
}

// deref is a parameter's value, or its zero value when it was not sent.
func deref[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

func encodeCursor(d store.DeadLetter) string {
	return base64.RawURLEncoding.EncodeToString([]byte(d.DeadLetteredAt.UTC().Format(time.RFC3339Nano) + "|" + d.EventID + "|" + d.EndpointID))
}

func decodeCursor(v string) (time.Time, string, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return time.Time{}, "", "", false
	}
	parts := strings.Split(string(b), "|")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return time.Time{}, "", "", false
	}
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	return t, parts[1], parts[2], err == nil
}

// DeadLetterList answers a page of dead letters.
func (s *Server) DeadLetterList(c echo.Context, q wire.DeadLetterListParams) error {
	f, p := deadLetterFilter(q)
	if p != nil {
		return p
	}
	items, err := s.ledger(c).DeadLetterList(c.Request().Context(), f)
	if err != nil {
		return err
	}
	page := wire.DeadLetterPage{Items: make([]wire.DeadLetter, 0, len(items))}
	for _, d := range items {
		page.Items = append(page.Items, deadLetterView(d))
	}
	if len(items) == f.Limit {
		page.NextCursor = encodeCursor(items[len(items)-1])
	}
	return c.JSON(http.StatusOK, page)
}

// deadLetter finds the dead letter of event {id}'s delivery to endpointID;
// with none named, the event's one dead letter, or its one open dead letter
// for an operator's action (open). An event with several, none named, is a
// 422 that names them.
func (s *Server) deadLetter(c echo.Context, id, endpointID string, open bool) (store.DeadLetter, error) {
	ctx := c.Request().Context()
	if endpointID != "" {
		d, err := s.ledger(c).DeadLetterGet(ctx, id, endpointID)
		if errors.Is(err, store.ErrNotFound) {
			return d, problem(http.StatusNotFound, "not-found", "Not Found", "event "+id+" has no dead letter for endpoint "+endpointID)
		}
		return d, err
	}
	all, err := s.ledger(c).DeadLettersOfEvent(ctx, id)
	if err != nil {
		return store.DeadLetter{}, err
	}
	var candidates []store.DeadLetter
	for _, d := range all {
		if !open || d.Status == store.DeadLetterOpen {
			candidates = append(candidates, d)
		}
	}
	switch {
	case len(all) == 0:
		return store.DeadLetter{}, problem(http.StatusNotFound, "not-found", "Not Found", "event "+id+" has no dead letter")
	case len(candidates) == 1:
		return candidates[0], nil
	case len(candidates) == 0 && len(all) == 1:
		return all[0], nil // not open: the caller says so
	case len(candidates) == 0:
		candidates = all
	}
	var eps []string
	for _, d := range candidates {
		eps = append(eps, d.EndpointID)
	}
	what := "dead letters"
	if open {
		what = "open dead letters"
	}
	p := problem(http.StatusUnprocessableEntity, "endpoint-id-required", "Name the delivery",
		fmt.Sprintf("event %s has %d %s (endpoints %s): name one with endpoint_id", id, len(candidates), what, strings.Join(eps, ", ")))
	p.Field = "endpoint_id"
	p.Extensions = map[string]any{"endpoint_ids": eps}
	return store.DeadLetter{}, p
}

// DeadLetterGet answers a dead letter, envelope and attempts included.
func (s *Server) DeadLetterGet(c echo.Context, id wire.Key, q wire.DeadLetterGetParams) error {
	d, err := s.deadLetter(c, id, deref(q.EndpointID), false)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, deadLetterView(d))
}

func notOpen(d store.DeadLetter) *Problem {
	return problem(http.StatusConflict, "not-dead-lettered", "Not dead-lettered",
		fmt.Sprintf("event %s's delivery to %s is not waiting in the dead-letter queue (status %s)", d.EventID, d.EndpointID, d.Status))
}

// claimed is the 409 of a replay or skip that someone else made first.
func claimed(d store.DeadLetter) *Problem {
	return problem(http.StatusConflict, "not-dead-lettered", "Not dead-lettered",
		fmt.Sprintf("dead letter %d of event %s's delivery to %s was replayed or skipped already", d.Generation, d.EventID, d.EndpointID))
}

// operatorAction answers a replay or a skip. Its SignalUnconfirmed says
// the signal to the event's workflow failed in a way that leaves open
// whether it arrived (a timeout, Temporal unavailable): the claim stands,
// and the repair sweep sends it again if the workflow did not take it.
// Detail says what failed.
type operatorAction = wire.OperatorAction

// operate claims an operator's action on the dead letter d in the ledger
// (claim: a compare-and-swap on its generation, so of two concurrent
// replays, or a replay and a skip, one wins and the other gets 409), then
// signals the event's workflow, naming the generation so that the workflow
// ignores a signal meant for an earlier dead letter. A workflow that has
// ended is started again by the starter, waiting on the dead letter; one
// whose event is finished answers 409. The claim is undone only when the
// signal surely did not reach Temporal (signalerr.NotSent): then the
// answer is an error (503 for an outage). A signal that may have arrived
// (a timeout after the server took it, say) leaves the claim standing, as
// undoing it would leave the row open for a delivery its workflow carries
// out; the action is answered accepted with SignalUnconfirmed, and the
// repair sweep sends the claimed action again if the workflow still waits
// on the dead letter (starter.resendLostClaim).
func (s *Server) operate(c echo.Context, d store.DeadLetter, claim func() (bool, error), signal string, arg any, status wire.OperatorActionStatus) (operatorAction, error) {
	ctx := c.Request().Context()
	act := operatorAction{EventID: d.EventID, EndpointID: d.EndpointID, Status: status}
	if d.Status != store.DeadLetterOpen {
		return act, notOpen(d)
	}
	ok, err := claim()
	if err != nil {
		return act, err
	}
	if !ok {
		return act, claimed(d)
	}
	ended, err := s.deps.Starter.SignalDeadLetter(ctx, d, signal, arg)
	if ended {
		return act, problem(http.StatusConflict, "event-finished", "Event finished",
			fmt.Sprintf("event %s's delivery to %s is delivered or skipped already; its dead letter is closed", d.EventID, d.EndpointID))
	}
	if err == nil {
		return act, nil
	}
	if !signalerr.NotSent(err) {
		s.deps.Logger.Warn("signal of a claimed dead letter unconfirmed; the claim stands for the repair sweep", "event_id", d.EventID, "endpoint_id", d.EndpointID, "generation", d.Generation, "error", err)
		act.SignalUnconfirmed = true
		act.Detail = "the signal to the event's workflow may not have arrived (" + err.Error() + "); the action stands, and the repair sweep sends it again if the workflow did not take it"
		return act, nil
	}
	if rerr := s.ledger(c).DeadLetterReopen(context.WithoutCancel(ctx), d.EventID, d.EndpointID, d.Generation); rerr != nil {
		// The sweep sends the claimed action again once it sees the
		// workflow still waiting: the claim is carried out, not lost.
		s.deps.Logger.Warn("undo dead letter claim", "event_id", d.EventID, "error", rerr)
	}
	if !temporalUnavailable(err) {
		return act, fmt.Errorf("signal %s: %w", d.EventID, err)
	}
	return act, problem(http.StatusServiceUnavailable, "temporal-unavailable", "Service Unavailable", "could not signal the event's workflow: "+err.Error())
}

// temporalUnavailable tells an outage (retry later: 503) from any other
// failure to signal.
func temporalUnavailable(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	var exhausted *serviceerror.ResourceExhausted
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func (s *Server) replay(c echo.Context, d store.DeadLetter, by string) (operatorAction, error) {
	return s.operate(c, d, func() (bool, error) {
		return s.ledger(c).DeadLetterMarkReplayed(c.Request().Context(), d.EventID, d.EndpointID, d.Generation, by)
	}, contract.SignalReplay, contract.Replay{EndpointID: d.EndpointID, Generation: d.Generation, By: by}, wire.OperatorActionStatusReplaying)
}

// DeadLetterReplay replays a dead letter. The body is judged before the dead letter is looked up: bad input is a
// 400 whatever the id names.
func (s *Server) DeadLetterReplay(c echo.Context, id wire.Key, _ wire.DeadLetterReplayParams) error {
	var req wire.Operator
	if err := s.decodeOptional(c, &req); err != nil {
		return err
	}
	d, err := s.deadLetter(c, id, req.EndpointID, true)
	if err != nil {
		return err
	}
	act, err := s.replay(c, d, principalOf(c).name)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, act)
}

// DeadLetterSkip gives a dead letter's event up.
func (s *Server) DeadLetterSkip(c echo.Context, id wire.Key, _ wire.DeadLetterSkipParams) error {
	var req wire.Operator
	if err := s.decodeOptional(c, &req); err != nil {
		return err
	}
	d, err := s.deadLetter(c, id, req.EndpointID, true)
	if err != nil {
		return err
	}
	by := principalOf(c).name
	act, err := s.operate(c, d, func() (bool, error) {
		return s.ledger(c).DeadLetterMarkSkipped(c.Request().Context(), d.EventID, d.EndpointID, d.Generation, by, req.Note)
	}, contract.SignalSkip, contract.Skip{EndpointID: d.EndpointID, Generation: d.Generation, By: by, Note: req.Note}, wire.OperatorActionStatusSkipping)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, act)
}

// batchReplayListed bounds the event IDs a batch replay's answer lists;
// the count is always whole.
const batchReplayListed = 1000

// DeadLetterReplayBatch replays every open dead letter matching the filters,
// each lane (correlation, endpoint) in sequence order, a page
// (RouterConfig.ReplayPageSize) at a time (replayEach).
func (s *Server) DeadLetterReplayBatch(c echo.Context, q wire.DeadLetterReplayBatchParams) error {
	f, p := deadLetterFilter(wire.DeadLetterListParams{CorrelationID: q.CorrelationID, EndpointID: q.EndpointID, Since: q.Since, Until: q.Until})
	if p != nil {
		return p
	}
	f.Limit = s.cfg.ReplayPageSize
	ids := []string{}
	replayed, err := s.replayEach(c, f, principalOf(c).name, func(d store.DeadLetter) bool {
		if len(ids) < batchReplayListed {
			ids = append(ids, d.EventID)
		}
		return true
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, wire.BatchReplay{Replayed: int64(replayed), EventIDs: ids, EventIDsTruncated: replayed > len(ids)})
}

// replayEach replays, as by, the open dead letters matching f that take
// says to take (it is called before each replay, and may note the row), in
// the order DeadLetterReplayPage reads them: each lane in sequence order. It
// reads one page (f.Limit) at a time and replays it before it reads the
// next, so it never holds every open dead letter at once; a dead letter
// that lands further on in that order meanwhile is replayed too. One
// replayed or skipped by someone else meanwhile (409) is passed over. A
// replay whose signal is unconfirmed stands, and stops the rest (503). It
// returns how many it replayed.
func (s *Server) replayEach(c echo.Context, f store.DeadLetterFilter, by string, take func(store.DeadLetter) bool) (int, error) {
	n := 0
	var after *store.ReplayCursor
	for {
		page, err := s.ledger(c).DeadLetterReplayPage(c.Request().Context(), f, after)
		if err != nil {
			return n, batchStopped(c, n, err)
		}
		for _, d := range page {
			if !take(d) {
				continue
			}
			act, err := s.replay(c, d, by)
			if err != nil {
				var pr *Problem
				if errors.As(err, &pr) && pr.Status == http.StatusConflict {
					continue // replayed or skipped by someone else meanwhile
				}
				return n, batchStopped(c, n, err)
			}
			n++
			if act.SignalUnconfirmed {
				// Temporal is most likely in trouble: claiming the rest,
				// each waiting out its own timeout, would only hand them
				// all to the sweep.
				p := problem(http.StatusServiceUnavailable, "temporal-unavailable", "Service Unavailable",
					fmt.Sprintf("replayed %d dead letter(s), then stopped: %s; try again later for the rest", n, act.Detail))
				p.Extensions = map[string]any{"replayed": n}
				return n, p
			}
		}
		if len(page) < f.Limit {
			return n, nil
		}
		last := page[len(page)-1]
		after = &store.ReplayCursor{CorrelationID: last.CorrelationID, EndpointID: last.EndpointID, Sequence: last.Sequence, EventID: last.EventID}
	}
}

// batchStopped is the answer of a batch that stopped at err after n
// replays. A statement that ran past the statement timeout is answered
// 503 query-timeout as any request's, but the replays before it stand:
// the answer says how many, as a stop for Temporal's sake does.
func batchStopped(c echo.Context, n int, err error) error {
	if n == 0 || !statementTimedOut(err) {
		return err
	}
	p := queryTimeout(c)
	p.Detail = fmt.Sprintf("replayed %d dead letter(s), then stopped: a statement ran past the server's statement timeout and was cancelled; try again later for the rest", n)
	p.Extensions = map[string]any{"replayed": n}
	return p
}

// deadLetterView is a dead letter as the API shows it: its envelope and
// attempts when they were read (a page leaves them out unless include asks).
func deadLetterView(d store.DeadLetter) wire.DeadLetter {
	v := wire.DeadLetter{EventID: d.EventID, CorrelationID: d.CorrelationID, Sequence: d.Sequence, EndpointID: d.EndpointID,
		Envelope: d.Envelope, AttemptCount: int64(d.AttemptCount), Reason: d.Reason, FirstFailureAt: deref(d.FirstFailureAt),
		DeadLetteredAt: d.DeadLetteredAt, Generation: int64(d.Generation), Status: wire.DeadLetterStatus(d.Status),
		ReplayedAt: deref(d.ReplayedAt), ReplayedBy: deref(d.ReplayedBy), ReplayCount: int64(d.ReplayCount),
		SkippedBy: deref(d.SkippedBy), SkippedAt: deref(d.SkippedAt), SkipNote: deref(d.SkipNote)}
	if d.Attempts != nil {
		v.Attempts = attemptsView(d.Attempts)
	}
	return v
}
