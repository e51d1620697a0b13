package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Every method below is one operation of api/openapi.json; its doc comment
// names the route and the scope the token needs. Errors: *Error for an
// answer outside 2xx, the transport's error wrapped when none came.

// idPath is prefix + the escaped id + suffix; an empty id is refused here
// rather than sent as another route.
func idPath(what, prefix, id, suffix string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%s is required", what)
	}
	return prefix + url.PathEscape(id) + suffix, nil
}

// get is the common shape of a GET of one resource.
func get[T any](ctx context.Context, c *Client, path string, query url.Values) (T, error) {
	var out T
	_, err := c.do(ctx, request{method: http.MethodGet, path: path, query: query}, &out)
	return out, err
}

// Healthz is GET /healthz: liveness. No scope.
func (c *Client) Healthz(ctx context.Context) (Health, error) {
	return get[Health](ctx, c, "/healthz", nil)
}

// Readyz is GET /readyz: readiness. It answers 200 when Postgres answers
// (Status "ready", or "degraded" when only Temporal is down); when Postgres
// is down the API answers 503, returned as *Error together with the
// Readiness that says so. No scope.
func (c *Client) Readyz(ctx context.Context) (Readiness, error) {
	r, err := get[Readiness](ctx, c, "/readyz", nil)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusServiceUnavailable {
		_ = json.Unmarshal(e.body, &r)
	}
	return r, err
}

// OpenAPI is GET /openapi.json: the API's OpenAPI 3.1 document. No scope.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	return get[json.RawMessage](ctx, c, "/openapi.json", nil)
}

// EndpointCreate is POST /v1/endpoints: registers a receiver URL and
// answers it with its signing secret, shown this once. Scope
// endpoints:write.
func (c *Client) EndpointCreate(ctx context.Context, req EndpointCreateRequest) (EndpointWithSecret, error) {
	var ep EndpointWithSecret
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/endpoints", body: req}, &ep)
	return ep, err
}

// EndpointList is GET /v1/endpoints: one page of the endpoints, without
// their secrets, in id order. Scope events:read (which sees each URL
// without its query string; endpoints:write sees it whole).
func (c *Client) EndpointList(ctx context.Context, o EndpointListOptions) (EndpointPage, error) {
	q := url.Values{}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return get[EndpointPage](ctx, c, "/v1/endpoints", q)
}

// EndpointListAll is EndpointList page after page, from o.Cursor on: every
// endpoint.
func (c *Client) EndpointListAll(ctx context.Context, o EndpointListOptions) ([]Endpoint, error) {
	return listAll(o.Cursor, func(cursor string) ([]Endpoint, string, error) {
		o.Cursor = cursor
		page, err := c.EndpointList(ctx, o)
		return page.Items, page.NextCursor, err
	})
}

// listAll asks list for page after page, from cursor on, until one has no
// next cursor, and returns their items; on an error, those it had.
func listAll[T any](cursor string, list func(cursor string) (items []T, next string, err error)) ([]T, error) {
	var all []T
	for {
		items, next, err := list(cursor)
		all = append(all, items...)
		if err != nil || next == "" {
			return all, err
		}
		cursor = next
	}
}

// EndpointGet is GET /v1/endpoints/{id}, without its secret. Scope
// events:read.
func (c *Client) EndpointGet(ctx context.Context, id string) (Endpoint, error) {
	p, err := idPath("endpoint id", "/v1/endpoints/", id, "")
	if err != nil {
		return Endpoint{}, err
	}
	return get[Endpoint](ctx, c, p, nil)
}

// EndpointStats is GET /v1/endpoints/{id}/stats: the endpoint's health,
// its attempts' success rate and latency over the last hour, what waits for
// it and its open dead letters. Scope events:read.
func (c *Client) EndpointStats(ctx context.Context, id string) (EndpointHealth, error) {
	p, err := idPath("endpoint id", "/v1/endpoints/", id, "/stats")
	if err != nil {
		return EndpointHealth{}, err
	}
	return get[EndpointHealth](ctx, c, p, nil)
}

// EndpointURLChanges is GET /v1/endpoints/{id}/url-changes: up to limit
// (0: 50, at most 500) of the endpoint's URL changes, newest first. Scope
// admin.
func (c *Client) EndpointURLChanges(ctx context.Context, id string, limit int) ([]URLChange, error) {
	p, err := idPath("endpoint id", "/v1/endpoints/", id, "/url-changes")
	if err != nil {
		return nil, err
	}
	var q url.Values
	if limit != 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	page, err := get[struct {
		Items []URLChange `json:"items"`
	}](ctx, c, p, q)
	return page.Items, err
}

// EndpointUpdate is PATCH /v1/endpoints/{id}: a new URL or event types,
// or disabling or enabling it. Scope endpoints:write.
func (c *Client) EndpointUpdate(ctx context.Context, id string, req EndpointUpdateRequest) (Endpoint, error) {
	var ep Endpoint
	p, err := idPath("endpoint id", "/v1/endpoints/", id, "")
	if err != nil {
		return ep, err
	}
	_, err = c.do(ctx, request{method: http.MethodPatch, path: p, body: req}, &ep)
	return ep, err
}

// EndpointRotateSecret is POST /v1/endpoints/{id}/rotate-secret: a new
// signing secret, shown this once; the one it replaces keeps signing
// beside it for the grace period (24 h). Scope endpoints:write.
func (c *Client) EndpointRotateSecret(ctx context.Context, id string) (EndpointWithSecret, error) {
	var ep EndpointWithSecret
	p, err := idPath("endpoint id", "/v1/endpoints/", id, "/rotate-secret")
	if err != nil {
		return ep, err
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: p}, &ep)
	return ep, err
}

// EndpointDelete is DELETE /v1/endpoints/{id}: deletes the endpoint for
// good. Routing to it stops, it answers 404 from then on, and its open
// deliveries end skipped, recorded as the key's. Scope endpoints:write.
func (c *Client) EndpointDelete(ctx context.Context, id string) (EndpointDeleted, error) {
	var out EndpointDeleted
	p, err := idPath("endpoint id", "/v1/endpoints/", id, "")
	if err != nil {
		return out, err
	}
	_, err = c.do(ctx, request{method: http.MethodDelete, path: p}, &out)
	return out, err
}

// EventCreate is POST /v1/events: accepts an event for delivery. A new
// event is answered 202 (state waiting, or queued when Temporal is
// unavailable: a sweep starts it later); the same event again (same id,
// same content) 200 with its current state in Accepted.Existing. The API
// answers 409 when the sequence is taken by another event (Extensions
// carry high_water_mark and next_sequence), 422 when the id was accepted
// with other content, and 429 with RetryAfter past the key's rate limit
// (nothing stored). Scope events:write.
func (c *Client) EventCreate(ctx context.Context, req EventCreateRequest) (Accepted, error) {
	var raw json.RawMessage
	status, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/events", body: req}, &raw)
	if err != nil {
		return Accepted{}, err
	}
	if status != http.StatusOK {
		var acc Accepted
		if err := json.Unmarshal(raw, &acc); err != nil {
			return Accepted{}, fmt.Errorf("POST /v1/events: decode %d answer: %w", status, err)
		}
		return acc, nil
	}
	var ev Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return Accepted{}, fmt.Errorf("POST /v1/events: decode %d answer: %w", status, err)
	}
	return Accepted{ID: ev.ID, State: ev.State, Unrouted: ev.Unrouted, Existing: &ev}, nil
}

// EventGet is GET /v1/events/{id}: the event's state and attempts. Scope
// events:read.
func (c *Client) EventGet(ctx context.Context, id string) (Event, error) {
	p, err := idPath("event id", "/v1/events/", id, "")
	if err != nil {
		return Event{}, err
	}
	return get[Event](ctx, c, p, nil)
}

// EventAttempts is GET /v1/events/{id}/deliveries/{endpoint_id}/attempts:
// one page of the event's attempts to one endpoint, oldest first (EventGet
// lists only each delivery's last 20, with AttemptCount). 404 when the
// event has no delivery to the endpoint. Scope events:read.
func (c *Client) EventAttempts(ctx context.Context, eventID, endpointID string, o AttemptListOptions) (AttemptPage, error) {
	if endpointID == "" {
		return AttemptPage{}, fmt.Errorf("endpoint id is required")
	}
	p, err := idPath("event id", "/v1/events/", eventID, "/deliveries/"+url.PathEscape(endpointID)+"/attempts")
	if err != nil {
		return AttemptPage{}, err
	}
	q := url.Values{}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return get[AttemptPage](ctx, c, p, q)
}

// EventAttemptsAll is EventAttempts page after page, from o.Cursor on:
// every attempt of the delivery.
func (c *Client) EventAttemptsAll(ctx context.Context, eventID, endpointID string, o AttemptListOptions) ([]Attempt, error) {
	return listAll(o.Cursor, func(cursor string) ([]Attempt, string, error) {
		o.Cursor = cursor
		page, err := c.EventAttempts(ctx, eventID, endpointID, o)
		return page.Items, page.NextCursor, err
	})
}

// CorrelationGet is GET /v1/correlations/{id}: what the correlation's
// sequencer releases next, what is parked and what holds it. 404 when no
// event of it was accepted. Scope events:read.
func (c *Client) CorrelationGet(ctx context.Context, id string) (Correlation, error) {
	p, err := idPath("correlation id", "/v1/correlations/", id, "")
	if err != nil {
		return Correlation{}, err
	}
	return get[Correlation](ctx, c, p, nil)
}

// CorrelationSkip is POST /v1/correlations/{id}/skip: voids sequences the
// producer lost, so that every lane moves past them (receivers see them in
// skipped_sequences) and a later post of one is refused (409). A sequence
// that has arrived refuses the whole request (422). Scope dead-letters:write.
func (c *Client) CorrelationSkip(ctx context.Context, id string, req CorrelationSkipRequest) (CorrelationVoided, error) {
	var out CorrelationVoided
	p, err := idPath("correlation id", "/v1/correlations/", id, "/skip")
	if err != nil {
		return out, err
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: p, body: req}, &out)
	return out, err
}

// DeadLetterList is GET /v1/dead-letters: one page of the dead letters f
// selects, without envelopes and attempts unless f.Include asks (then at
// most 20 a page). Scope events:read.
func (c *Client) DeadLetterList(ctx context.Context, f DeadLetterFilter) (DeadLetterPage, error) {
	q := f.match()
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Cursor != "" {
		q.Set("cursor", f.Cursor)
	}
	if len(f.Include) > 0 {
		q.Set("include", strings.Join(f.Include, ","))
	}
	return get[DeadLetterPage](ctx, c, "/v1/dead-letters", q)
}

// DeadLetterListAll is DeadLetterList page after page, from f.Cursor on:
// every dead letter f selects.
func (c *Client) DeadLetterListAll(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	return listAll(f.Cursor, func(cursor string) ([]DeadLetter, string, error) {
		f.Cursor = cursor
		page, err := c.DeadLetterList(ctx, f)
		return page.Items, page.NextCursor, err
	})
}

// DeadLetterReplayBatch is POST /v1/dead-letters/replay: replays every open
// dead letter matching f's CorrelationID, EndpointID, Since and Until (its
// Status, Limit and Cursor are not sent), in sequence order per
// correlation. Scope dead-letters:write.
func (c *Client) DeadLetterReplayBatch(ctx context.Context, f DeadLetterFilter) (BatchReplay, error) {
	var out BatchReplay
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/dead-letters/replay", query: f.match()}, &out)
	return out, err
}

// DeadLetterGet is GET /v1/dead-letters/{id}?endpoint_id=: the dead letter
// of event id's delivery to endpointID ("" when the event has one), with
// its envelope and attempts; 404 when it has none, 422 naming them when it
// has several and endpointID is "". Scope events:read.
func (c *Client) DeadLetterGet(ctx context.Context, eventID, endpointID string) (DeadLetter, error) {
	p, err := idPath("event id", "/v1/dead-letters/", eventID, "")
	if err != nil {
		return DeadLetter{}, err
	}
	var q url.Values
	if endpointID != "" {
		q = url.Values{"endpoint_id": {endpointID}}
	}
	return get[DeadLetter](ctx, c, p, q)
}

// DeadLetterReplay is POST /v1/dead-letters/{id}/replay: delivers the event
// again with a fresh recovery window. 409 when its dead letter is not open
// (replayed or skipped already: a second click). Scope dead-letters:write.
func (c *Client) DeadLetterReplay(ctx context.Context, eventID string, req OperatorRequest) (OperatorAction, error) {
	return c.operate(ctx, eventID, "/replay", req)
}

// DeadLetterSkip is POST /v1/dead-letters/{id}/skip: gives the event up so
// that its successors go on (the next delivery names it in
// skipped_sequences). 409 when its dead letter is not open. Scope
// dead-letters:write.
func (c *Client) DeadLetterSkip(ctx context.Context, eventID string, req OperatorRequest) (OperatorAction, error) {
	return c.operate(ctx, eventID, "/skip", req)
}

func (c *Client) operate(ctx context.Context, eventID, button string, req OperatorRequest) (OperatorAction, error) {
	var out OperatorAction
	p, err := idPath("event id", "/v1/dead-letters/", eventID, button)
	if err != nil {
		return out, err
	}
	_, err = c.do(ctx, request{method: http.MethodPost, path: p, body: req}, &out)
	return out, err
}

// Stats is GET /v1/stats: queue depth, in flight, recent deliveries, open
// dead letters, lag and the longest-blocked correlations. Scope
// events:read.
func (c *Client) Stats(ctx context.Context, p StatsParams) (Stats, error) {
	q := url.Values{}
	if p.Top != nil {
		q.Set("top", strconv.Itoa(*p.Top))
	}
	return get[Stats](ctx, c, "/v1/stats", q)
}

// StatsEndpoints is GET /v1/stats/endpoints: a page of the endpoints'
// health, as EndpointStats has it, in id order (one query on the server
// a page). Scope events:read.
func (c *Client) StatsEndpoints(ctx context.Context, o StatsEndpointsOptions) (EndpointsHealth, error) {
	q := url.Values{}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return get[EndpointsHealth](ctx, c, "/v1/stats/endpoints", q)
}

// StatsEndpointsAll is StatsEndpoints page after page, from o.Cursor on:
// every endpoint's health.
func (c *Client) StatsEndpointsAll(ctx context.Context, o StatsEndpointsOptions) ([]EndpointHealth, error) {
	return listAll(o.Cursor, func(cursor string) ([]EndpointHealth, string, error) {
		o.Cursor = cursor
		page, err := c.StatsEndpoints(ctx, o)
		return page.Endpoints, page.NextCursor, err
	})
}

// APIKeyCreate is POST /v1/api-keys: makes an API key, answered with the
// key this once. Scope admin.
func (c *Client) APIKeyCreate(ctx context.Context, req APIKeyCreateRequest) (APIKeyCreated, error) {
	var k APIKeyCreated
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/api-keys", body: req}, &k)
	return k, err
}

// APIKeyList is GET /v1/api-keys: every key, revoked ones included, never
// the keys themselves. Scope admin.
func (c *Client) APIKeyList(ctx context.Context) ([]APIKey, error) {
	page, err := get[struct {
		Items []APIKey `json:"items"`
	}](ctx, c, "/v1/api-keys", nil)
	return page.Items, err
}

// APIKeyRevoke is DELETE /v1/api-keys/{id}: every API process refuses the
// key from its next request on. Scope admin.
func (c *Client) APIKeyRevoke(ctx context.Context, id string) (APIKey, error) {
	var k APIKey
	p, err := idPath("API key id", "/v1/api-keys/", id, "")
	if err != nil {
		return k, err
	}
	_, err = c.do(ctx, request{method: http.MethodDelete, path: p}, &k)
	return k, err
}

// match is the query of the filters both the list and the batch replay
// take.
func (f DeadLetterFilter) match() url.Values {
	q := url.Values{}
	if f.CorrelationID != "" {
		q.Set("correlation_id", f.CorrelationID)
	}
	if f.EndpointID != "" {
		q.Set("endpoint_id", f.EndpointID)
	}
	if f.EventID != "" {
		q.Set("event_id", f.EventID)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		q.Set("until", f.Until.Format(time.RFC3339Nano))
	}
	return q
}
