package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// headerReceiver answers 200 and keeps the X-Api-Key of each request, by
// the event it carries.
type headerReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	keys map[string]string
}

func newHeaderReceiver(t *testing.T) *headerReceiver {
	r := &headerReceiver{keys: map[string]string{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.keys[req.Header.Get("webhook-id")] = req.Header.Get("X-Api-Key")
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// got reports whether the receiver was sent the event, and the X-Api-Key
// it came with.
func (r *headerReceiver) got(eventID string) (key string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key, ok = r.keys[eventID]
	return key, ok
}

// TestHeadersFollowTheirURL reproduces a hidden header re-pointed to a
// stranger: an endpoint is
// created with a custom header whose value is a credential of its
// receiver; a key with only endpoints:write, shown "********", re-points
// the URL at another port of 127.0.0.1. The header's value must not go
// there: the PATCH is refused (422, naming headers), and the next event
// goes to the old receiver, with its header. Re-pointed with headers sent
// again (null: none), the next event reaches the new receiver without the
// old value. A change of path on the same origin keeps the headers. Every
// change of URL is recorded with the key that made it, and only an admin
// key reads the record.
func TestHeadersFollowTheirURL(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	legit, stranger := newHeaderReceiver(t), newHeaderReceiver(t)
	secret := "rcv_live_" + randHex(16)
	ep := b.createEndpointWith(map[string]any{"url": legit.URL + "/hook?token=q" + randHex(8), "headers": map[string]any{"X-Api-Key": secret}})
	writer := b.createKey("url-writer", "endpoints:write")
	corr := b.id("follow")
	deliver := func(seq int64) string {
		t.Helper()
		id := b.id("follow-" + string(rune('0'+seq)))
		code, _ := b.postEvent(id, corr, seq, ep.ID, map[string]any{"n": seq})
		require.Equal(t, http.StatusAccepted, code)
		b.waitState(id, contract.StateDelivered, time.Minute)
		return id
	}

	var view struct {
		Headers map[string]string `json:"headers"`
	}
	// What the writer is shown of the header (a PATCH that changes nothing
	// answers the endpoint; the key cannot GET it).
	require.Equal(t, http.StatusOK, b.callAs(writer, http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"event_types": nil}, &view))
	require.Equal(t, map[string]string{"X-Api-Key": "********"}, view.Headers)

	var p struct {
		Status int    `json:"status"`
		Field  string `json:"field"`
	}
	code := b.callAs(writer, http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"url": stranger.URL + "/steal"}, &p)
	first := deliver(1)
	key, ok := stranger.got(first)
	require.False(t, ok && key == secret, "the header's value reached the new URL")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Equal(t, "headers", p.Field)
	key, ok = legit.got(first)
	require.True(t, ok, "the event went to the endpoint's receiver")
	require.Equal(t, secret, key)

	// Another path on the same origin: the headers are for it still.
	require.Equal(t, http.StatusOK, b.callAs(writer, http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"url": legit.URL + "/v2/hook"}, nil))
	second := deliver(2)
	key, _ = legit.got(second)
	require.Equal(t, secret, key)

	// Re-pointed with headers sent again: none.
	require.Equal(t, http.StatusOK, b.callAs(writer, http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"url": stranger.URL + "/steal", "headers": nil}, nil))
	third := deliver(3)
	key, ok = stranger.got(third)
	require.True(t, ok, "the event went to the new receiver")
	require.Empty(t, key)

	// The record: newest first, by the writer, the URLs redacted (no query,
	// no path: it is not said to be public).
	path := "/v1/endpoints/" + ep.ID + "/url-changes"
	for _, scope := range []string{"endpoints:write", "events:read", "dead-letters:write"} {
		require.Equal(t, http.StatusForbidden, b.callAs(b.createKey("not-admin-"+strings.ReplaceAll(scope, ":", "-"), scope), http.MethodGet, path, nil, nil), scope)
	}
	admin := b.createKey("auditor", "admin")
	r, err := b.newClient(admin).EndpointURLChangesWithResponse(context.Background(), ep.ID, nil)
	require.NoError(t, err)
	changes := r.JSON200.Items
	require.Len(t, changes, 2, "the refused change is not one")
	last, before := changes[0], changes[1]
	require.Equal(t, legit.URL+"/[redacted]", last.OldURL)
	require.Equal(t, stranger.URL+"/[redacted]", last.NewURL)
	require.True(t, last.HeadersReplaced)
	require.Equal(t, legit.URL+"/[redacted]", before.OldURL)
	require.Equal(t, legit.URL+"/[redacted]", before.NewURL)
	require.False(t, before.HeadersReplaced)
	for _, c := range changes {
		require.Equal(t, "url-writer", c.ChangedBy)
		require.True(t, strings.HasPrefix(c.ChangedByKeyID, "key_"), c.ChangedByKeyID)
		require.WithinDuration(t, time.Now(), c.ChangedAt, time.Minute)
	}
}
