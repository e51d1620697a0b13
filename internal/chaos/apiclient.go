package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// apiClient talks to hookflow's REST API and the reference receiver, as a
// producer and an operator would.
type apiClient struct {
	base, token string
	http        *http.Client
}

func newAPIClient(base, token string) *apiClient {
	return &apiClient{base: base, token: token, http: &http.Client{
		Timeout:   15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 32},
	}}
}

// do sends a JSON request and decodes a JSON answer into out when given.
func (c *apiClient) do(ctx context.Context, method, path string, in, out any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, b, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, b, nil
}

type endpointCreated struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

func (c *apiClient) createEndpoint(ctx context.Context, target string) (endpointCreated, error) {
	var ep endpointCreated
	code, body, err := c.do(ctx, http.MethodPost, "/v1/endpoints", map[string]string{"url": target}, &ep)
	if err != nil {
		return ep, fmt.Errorf("create endpoint: %w", err)
	}
	if code != http.StatusCreated {
		return ep, fmt.Errorf("create endpoint: %d %s", code, bytes.TrimSpace(body))
	}
	return ep, nil
}

type eventPost struct {
	ID            string         `json:"id"`
	CorrelationID string         `json:"correlation_id"`
	Sequence      int64          `json:"sequence"`
	EndpointID    string         `json:"endpoint_id"`
	Type          string         `json:"type"`
	Data          map[string]any `json:"data"`
}

func (c *apiClient) postEvent(ctx context.Context, ev eventPost) (int, []byte, error) {
	return c.do(ctx, http.MethodPost, "/v1/events", ev, nil)
}

type deadLetterItem struct {
	EventID       string `json:"event_id"`
	CorrelationID string `json:"correlation_id"`
	Sequence      int64  `json:"sequence"`
	EndpointID    string `json:"endpoint_id"`
	Status        string `json:"status"`
	Generation    int32  `json:"generation"`
}

// deadLetter reads the dead letter of one event; the code is 404 when it
// has none.
func (c *apiClient) deadLetter(ctx context.Context, eventID string) (deadLetterItem, int, error) {
	var d deadLetterItem
	code, body, err := c.do(ctx, http.MethodGet, "/v1/dead-letters/"+url.PathEscape(eventID), nil, &d)
	if err != nil {
		return d, code, err
	}
	if code != http.StatusOK && code != http.StatusNotFound {
		return d, code, fmt.Errorf("get dead letter %s: %d %s", eventID, code, bytes.TrimSpace(body))
	}
	return d, code, nil
}

// press presses an operator's button (replay or skip) on one event's dead
// letter, and returns the API's answer: 202 when it took it, 409 when the
// dead letter was replayed or skipped already.
func (c *apiClient) press(ctx context.Context, eventID, button string) (int, []byte, error) {
	return c.do(ctx, http.MethodPost, "/v1/dead-letters/"+url.PathEscape(eventID)+"/"+button,
		map[string]string{"note": "chaos: " + button + " pressed twice at once"}, nil)
}

// deadLetters lists the dead letters of an endpoint (every status).
func (c *apiClient) deadLetters(ctx context.Context, endpointID string) ([]deadLetterItem, error) {
	var all []deadLetterItem
	q := url.Values{"endpoint_id": {endpointID}, "status": {"all"}, "limit": {"1000"}}
	for {
		var page struct {
			Items      []deadLetterItem `json:"items"`
			NextCursor string           `json:"next_cursor"`
		}
		code, body, err := c.do(ctx, http.MethodGet, "/v1/dead-letters?"+q.Encode(), nil, &page)
		if err != nil {
			return nil, err
		}
		if code != http.StatusOK {
			return nil, fmt.Errorf("list dead letters: %d %s", code, bytes.TrimSpace(body))
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all, nil
		}
		q.Set("cursor", page.NextCursor)
	}
}

// replay replays every open dead letter of an endpoint, the way an operator
// would after fixing it, and returns the replayed event ids.
func (c *apiClient) replay(ctx context.Context, endpointID string) ([]string, error) {
	var out struct {
		EventIDs []string `json:"event_ids"`
	}
	code, body, err := c.do(ctx, http.MethodPost, "/v1/dead-letters/replay?endpoint_id="+url.QueryEscape(endpointID), nil, &out)
	if err != nil {
		return nil, err
	}
	if code != http.StatusAccepted {
		return nil, fmt.Errorf("replay dead letters of %s: %d %s", endpointID, code, bytes.TrimSpace(body))
	}
	return out.EventIDs, nil
}

// receiverCorrelation is the reference receiver's GET /correlations/{id}.
type receiverCorrelation struct {
	CorrelationID string      `json:"correlation_id"`
	LastSequence  int64       `json:"last_sequence"`
	Applied       []string    `json:"applied"`
	Balance       json.Number `json:"balance"`
	Parked        []int64     `json:"parked"`
}

func (c *apiClient) receiverCorrelation(ctx context.Context, id string) (receiverCorrelation, int, error) {
	var rc receiverCorrelation
	code, body, err := c.do(ctx, http.MethodGet, "/correlations/"+url.PathEscape(id), nil, &rc)
	if err != nil {
		return rc, code, err
	}
	if code != http.StatusOK && code != http.StatusNotFound {
		return rc, code, fmt.Errorf("receiver correlation %s: %d %s", id, code, bytes.TrimSpace(body))
	}
	return rc, code, nil
}

// healthy polls GET path until it answers 200.
func (c *apiClient) waitHealthy(ctx context.Context, path string, timeout time.Duration, alive func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		code, _, err := c.do(ctx, http.MethodGet, path, nil, nil)
		if err == nil && code == http.StatusOK {
			return nil
		}
		if !alive() {
			return fmt.Errorf("exited before %s answered", c.base+path)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s (last: %d %v)", c.base+path, timeout, code, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
