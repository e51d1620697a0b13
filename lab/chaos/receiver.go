package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	hfclient "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/services/refreceiver"
)

// receiverAddr is where one receiver's current incarnation listens
// (host:port), or "" while none does. A receiver binds port 0 at every
// start and says where in its log (listeningAddr), so no two receivers,
// nor a receiver and another process, can ever be handed one port, and a
// restarted receiver never needs its old one back.
type receiverAddr struct {
	mu   sync.Mutex
	addr string
}

func (a *receiverAddr) get() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

func (a *receiverAddr) set(addr string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.addr = addr
}

// listeningAddr reads the address from the reference receiver's log line
// that it writes once its listener is bound.
func listeningAddr(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(`"reference receiver listening"`)) {
		return "", false
	}
	var l struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal(line, &l) != nil || l.Msg != "reference receiver listening" || l.Addr == "" {
		return "", false
	}
	return l.Addr, true
}

// errNotListening is a call to a receiver that has no incarnation
// listening.
var errNotListening = errors.New("receiver not listening")

// receiverClient reads the reference receiver's ledger over HTTP, the way
// its operator would (hookflow's own API is read with kit/client),
// wherever its current incarnation listens.
type receiverClient struct {
	addr *receiverAddr
	http *http.Client
}

// get reads GET path; out is decoded from a 200. It returns the status.
func (c receiverClient) get(ctx context.Context, path string, out any) (int, error) {
	addr := c.addr.get()
	if addr == "" {
		return 0, errNotListening
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || out == nil {
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("decode GET %s: %w", path, err)
	}
	return resp.StatusCode, nil
}

// correlation reads the receiver's ledger of one correlation at one
// endpoint (the receiver serves several tenants' endpoints); the code is
// 404 when none of its events arrived there.
func (c receiverClient) correlation(ctx context.Context, id, endpointID string) (refreceiver.Correlation, int, error) {
	var rc refreceiver.Correlation
	code, err := c.get(ctx, "/correlations/"+url.PathEscape(id)+"?endpoint_id="+url.QueryEscape(endpointID), &rc)
	if err != nil {
		return rc, code, fmt.Errorf("receiver correlation %s: %w", id, err)
	}
	if code != http.StatusOK && code != http.StatusNotFound {
		return rc, code, fmt.Errorf("receiver correlation %s: answered %d", id, code)
	}
	return rc, code, nil
}

func (c receiverClient) healthz(ctx context.Context) error {
	code, err := c.get(ctx, "/healthz", nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("answered %d", code)
	}
	return err
}

// waitHealthy polls check until it succeeds, the process exits or timeout
// passes.
func waitHealthy(ctx context.Context, what string, check func(context.Context) error, timeout time.Duration, alive func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if !alive() {
			return fmt.Errorf("exited before %s answered", what)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s (last: %v)", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// answered splits how an API call ended: the status the API answered (ok
// when the call succeeded), or the error when no answer came.
func answered(err error, ok int) (int, error) {
	var e *hfclient.Error
	switch {
	case err == nil:
		return ok, nil
	case errors.As(err, &e):
		return e.Status, nil
	default:
		return 0, err
	}
}
