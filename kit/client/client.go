// Package client is the Go client of hookflow's REST API, written by hand
// over net/http and encoding/json so that importing it brings in nothing
// else.
//
// It has one method per operation of the API's OpenAPI document
// (api/openapi.json, also served at GET /openapi.json), named after its
// operationId with the first letter upper-cased and Go's initialisms kept:
// eventCreate is EventCreate, apiKeyCreate is APIKeyCreate, openapi is
// OpenAPI. The method's name equals the operationId but for letter case; a
// test holds the client to that, so the client and the document cannot
// drift apart. The request and response types carry the JSON of the
// document's schemas.
//
// Every method takes a context and authenticates with "Authorization:
// Bearer <token>" (an API key, hfk_…, or the bootstrap token). An answer
// outside 2xx is returned as *Error, the API's RFC 9457 problem details;
// a request that got no answer returns the transport's error, wrapped. The
// token never appears in an error.
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("HOOKFLOW_API_KEY"))
//	…
//	acc, err := c.EventCreate(ctx, client.EventCreateRequest{
//		ID: "evt-1", CorrelationID: "order-42", Sequence: 1,
//		EndpointID: "ep_…", Type: "order.updated", Data: map[string]any{"amount": 10},
//	})
//	var apiErr *client.Error
//	if errors.As(err, &apiErr) && apiErr.Status == http.StatusTooManyRequests {
//		time.Sleep(apiErr.RetryAfter)
//	}
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// defaultTimeout bounds one call when the caller brings no http.Client of
// its own; the context can always end it sooner.
const defaultTimeout = time.Minute

// defaultUserAgent names this client to the API's logs.
const defaultUserAgent = "hookflow-go-client"

// maxErrorBody bounds how much of an error answer is read: problem details
// are small, and a proxy's error page need not be read whole.
const maxErrorBody = 64 << 10

// Client calls one hookflow API. It is safe for concurrent use.
type Client struct {
	base      string
	authz     string
	http      *http.Client
	userAgent string
}

// Option changes how New builds the Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (its Timeout, Transport, …)
// instead of a client with a one-minute timeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a Client of the API at baseURL (scheme and host, and a path
// prefix when the API is served under one, e.g. "https://hooks.example.com")
// that authenticates with token. It fails when baseURL is not an absolute
// http or https URL, or when token is empty.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base URL %q must be an absolute http or https URL", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("base URL %q must have no query or fragment", baseURL)
	}
	if token == "" {
		return nil, errors.New("a bearer token is required: an API key or the bootstrap token")
	}
	c := &Client{
		base:      strings.TrimRight(u.String(), "/"),
		authz:     "Bearer " + token,
		http:      &http.Client{Timeout: defaultTimeout},
		userAgent: defaultUserAgent,
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// BaseURL is the API's base URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Error is an answer outside 2xx: the API's RFC 9457 problem details
// (application/problem+json). When the answer is not problem details (a
// proxy's error page, say), Status is the HTTP status and Title its text.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Type is a URI naming the kind of problem, e.g.
	// https://hookflow.dev/problems/invalid-field.
	Type   string
	Title  string
	Detail string
	// Instance is the request path the problem is about.
	Instance string
	// Field names the request field at fault, when there is one.
	Field string
	// Setting names the server setting whose cap refused the request
	// (422 endpoint-limit: HOOKFLOW_MAX_ENDPOINTS; 422
	// too-many-subscribers: HOOKFLOW_MAX_SUBSCRIBERS), and Limit is its
	// value; empty and zero otherwise.
	Setting string
	Limit   int
	// RetryAfter is how long the API asks to wait before trying again
	// (the Retry-After header of a 429 or 503); zero when it did not say.
	RetryAfter time.Duration
	// Extensions are the problem's other members, e.g. high_water_mark and
	// next_sequence of a 409 sequence-taken, scope of a 403.
	Extensions map[string]json.RawMessage

	// body is the answer as read (up to maxErrorBody), for the operations
	// whose error answers are not problem details (readyz's 503).
	body []byte
}

// Error reads "409 Sequence already taken: sequence 2 of correlation …".
func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%d %s", e.Status, e.Title)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Title, e.Detail)
}

// request is one call of the API.
type request struct {
	method string
	path   string // escaped, from the base URL on: "/v1/events/evt-1"
	query  url.Values
	body   any // sent as JSON when not nil
}

// do sends req and decodes a 2xx answer's JSON into out (when not nil). It
// returns the status of a 2xx answer; anything else is *Error, or the
// transport's error wrapped.
func (c *Client) do(ctx context.Context, req request, out any) (int, error) {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encode request: %w", req.method, req.path, err)
		}
		body = bytes.NewReader(b)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", req.method, req.path, err)
	}
	hreq.Header.Set("Authorization", c.authz)
	hreq.Header.Set("Accept", "application/json, application/problem+json")
	if c.userAgent != "" {
		hreq.Header.Set("User-Agent", c.userAgent)
	}
	if req.body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(hreq)
	if err != nil {
		// *url.Error: the method and URL (never a header, so never the
		// token) and what went wrong.
		return 0, fmt.Errorf("hookflow api: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, readError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body) // lets the connection be reused
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return 0, fmt.Errorf("%s %s: decode %d answer: %w", req.method, req.path, resp.StatusCode, err)
	}
	return resp.StatusCode, nil
}

// problemFields are the members of problem details that Error has a field
// for; the others go to Extensions.
var problemFields = map[string]bool{"type": true, "title": true, "status": true, "detail": true, "instance": true, "field": true, "setting": true, "limit": true}

// readError turns an answer outside 2xx into *Error.
func readError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	e.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var p struct {
		Type     string `json:"type"`
		Title    string `json:"title"`
		Detail   string `json:"detail"`
		Instance string `json:"instance"`
		Field    string `json:"field"`
		Setting  string `json:"setting"`
		Limit    int    `json:"limit"`
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(e.body, &p) == nil && json.Unmarshal(e.body, &members) == nil {
		e.Type, e.Title, e.Detail, e.Instance, e.Field, e.Setting, e.Limit = p.Type, p.Title, p.Detail, p.Instance, p.Field, p.Setting, p.Limit
		for k, v := range members {
			if !problemFields[k] {
				if e.Extensions == nil {
					e.Extensions = map[string]json.RawMessage{}
				}
				e.Extensions[k] = v
			}
		}
	}
	if e.Title == "" {
		e.Title = http.StatusText(resp.StatusCode)
	}
	return e
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date
// (RFC 9110 §10.2.3). Anything else, or a date past, is zero.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		return time.Duration(max(secs, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
