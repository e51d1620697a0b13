package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
)

// TestEndpointURLHiddenFromReadOnlyKeys: an endpoint's URL may carry a
// token in its query (for receivers that cannot check signatures) or its
// path (Slack, Discord). Only its management (endpoints:write, admin) sees
// it whole; a read-only key sees scheme://host/[redacted], and
// scheme://host/path once the endpoint says its path is public.
func TestEndpointURLHiddenFromReadOnlyKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const full = "https://example.com/hook?token=s3cret-query-token#s3cret-fragment"
	resp, body := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"`+full+`"}`, b.bearer())
	require.Equal(t, http.StatusCreated, resp.StatusCode, body)
	var ep struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ep))
	require.Equal(t, full, ep.URL, "its management sees what it registered")

	_, reader := b.createKey(t, "dashboard", api.ScopeEventsRead)
	_, manager := b.createKey(t, "platform", api.ScopeEndpointsWrite, api.ScopeEventsRead)
	for key, want := range map[string]string{reader: "https://example.com/[redacted]", manager: full, b.token: full} {
		resp, body := b.do(t, http.MethodGet, "/v1/endpoints/"+ep.ID, "", "", bearer(key))
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.NoError(t, json.Unmarshal([]byte(body), &ep))
		require.Equal(t, want, ep.URL)
		if want != full {
			require.NotContains(t, body, "s3cret")
			require.NotContains(t, body, "/hook")
		}
	}
	resp, body = b.do(t, http.MethodPatch, "/v1/endpoints/"+ep.ID, "application/json", `{"url_path_public":true}`, bearer(manager))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = b.do(t, http.MethodGet, "/v1/endpoints/"+ep.ID, "", "", bearer(reader))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &ep))
	require.Equal(t, "https://example.com/hook", ep.URL)
	require.NotContains(t, body, "s3cret")
	// A new URL's path is not public unless the same PATCH says so.
	resp, body = b.do(t, http.MethodPatch, "/v1/endpoints/"+ep.ID, "application/json", `{"url":"https://example.com/T01/s3cret-path"}`, bearer(manager))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = b.do(t, http.MethodGet, "/v1/endpoints/"+ep.ID, "", "", bearer(reader))
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NotContains(t, body, "s3cret")
	require.Contains(t, body, `"url_path_public":false`)
}

// bigDeadLetters stores n dead letters of correlation corr, each with an
// envelope of size bytes and two attempts.
func (b *bundle) bigDeadLetters(t *testing.T, corr string, n, size int) {
	t.Helper()
	ctx := context.Background()
	envelope, err := json.Marshal(map[string]string{"data": strings.Repeat("x", size)})
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("evt_%s_%d", corr, i)
		_, ok, err := b.store.EventInsertRouted(ctx, intake.Event{ID: id, CorrelationID: corr, Sequence: int64(i), EndpointID: b.endpointID, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{b.endpointID}, nil)
		require.NoError(t, err)
		require.True(t, ok)
		code := int32(400)
		_, err = b.store.DeadLetterUpsert(ctx, store.DeadLetter{EventID: id, CorrelationID: corr, Sequence: int64(i), EndpointID: b.endpointID,
			Envelope: envelope, Reason: "receiver answered 400", DeadLetteredAt: time.Now(),
			Attempts: []store.Attempt{{Attempt: 1, StartedAt: time.Now(), Outcome: "retry"}, {Attempt: 2, StartedAt: time.Now(), StatusCode: &code, Outcome: "permanent"}}}, "run/1")
		require.NoError(t, err)
	}
}

// TestDeadLetterListHasAResponseBudget: a page of dead letters carries no
// envelopes (up to 1 MiB each) or attempts unless asked for with include,
// which lowers the largest page; the default page is 50. The single-item
// view keeps everything.
func TestDeadLetterListHasAResponseBudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.bigDeadLetters(t, "big", 51, 64<<10)

	var page struct {
		Items      []map[string]json.RawMessage `json:"items"`
		NextCursor string                       `json:"next_cursor"`
	}
	resp, body := b.do(t, http.MethodGet, "/v1/dead-letters", "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Equal(t, 50, len(page.Items), "the default page")
	require.NotEmpty(t, page.NextCursor)
	require.Less(t, len(body), 64<<10, "no envelope in a page")
	for _, it := range page.Items {
		require.NotContains(t, it, "envelope")
		require.NotContains(t, it, "attempts")
		require.JSONEq(t, "2", string(it["attempt_count"]))
	}

	resp, body = b.do(t, http.MethodGet, "/v1/dead-letters?include=envelope,attempts&limit=20", "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Equal(t, 20, len(page.Items))
	require.Contains(t, page.Items[0], "envelope")
	require.Contains(t, page.Items[0], "attempts")

	for _, q := range []string{"limit=1000", "include=envelope&limit=21", "include=attempts&limit=21", "include=payload"} {
		field := "limit"
		if q == "include=payload" {
			field = "include"
		}
		resp, body := b.do(t, http.MethodGet, "/v1/dead-letters?"+q, "", "", b.bearer())
		requireProblem(t, resp, body, http.StatusBadRequest, field)
	}

	resp, body = b.do(t, http.MethodGet, "/v1/dead-letters/evt_big_1", "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var one map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(body), &one))
	require.Contains(t, one, "envelope")
	require.Contains(t, one, "attempts")
}

// TestBatchReplayPagesThroughItsWork: the batch replay reads one page of
// open dead letters at a time, in (correlation, sequence) order, and
// replays it before it reads the next, so it never holds every open dead
// letter at once. A dead letter written while an earlier page is being
// replayed, further on in that order, is replayed by the same batch.
func TestBatchReplayPagesThroughItsWork(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.ReplayPageSize = 2 })
	b.bigDeadLetters(t, "b-corr", 2, 10)
	b.bigDeadLetters(t, "a-corr", 3, 10)
	var once bool
	b.starter.onSignal = func() {
		if !once {
			once = true
			b.bigDeadLetters(t, "z-corr", 1, 10)
		}
	}
	resp, body := b.do(t, http.MethodPost, "/v1/dead-letters/replay", "", "", b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	require.Equal(t, []string{
		"evt_a-corr_1/replay", "evt_a-corr_2/replay", "evt_a-corr_3/replay",
		"evt_b-corr_1/replay", "evt_b-corr_2/replay", "evt_z-corr_1/replay",
	}, b.starter.signalled())
}

// TestEventForDisabledEndpointIsRefused: an event naming a disabled
// endpoint would dead-letter at once; it is refused with 409 and nothing is
// stored. An event accepted before the endpoint was disabled is still
// answered as the same event again.
func TestEventForDisabledEndpointIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp, body := b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, map[string]string{"id": `"evt_before"`}), b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	resp, body = b.do(t, http.MethodPatch, "/v1/endpoints/"+b.endpointID, "application/json", `{"disabled":true}`, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	events, starts := b.count(t, "events"), b.starter.calls.Load()

	resp, body = b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, map[string]string{"id": `"evt_after"`, "sequence": "2"}), b.bearer())
	p := requireProblem(t, resp, body, http.StatusConflict, "endpoint_id")
	require.Equal(t, "https://hookflow.dev/problems/endpoint-disabled", p["type"])
	require.Equal(t, events, b.count(t, "events"), "nothing stored")
	require.Equal(t, starts, b.starter.calls.Load(), "no workflow started")

	resp, body = b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(b.endpointID, map[string]string{"id": `"evt_before"`}), b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestFailedAuthIsThrottledPerAddressAndCredential: failed authentications
// spend a bucket of the client's network and one of the credential
// presented; once either is empty, what the client controls is answered
// 429 with Retry-After (the same bad key, another bad key or a malformed
// token from that network), but a valid credential from the same network
// is let through: no one is locked out by someone else's failures.
func TestFailedAuthIsThrottledPerAddressAndCredential(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.RouterConfig) { c.FailedAuthPerSecond, c.FailedAuthBurst = 0.001, 3 })
	unknown := api.KeyPrefix + strings.Repeat("A", 43)
	for range 3 {
		resp, body := b.do(t, http.MethodGet, "/v1/stats", "", "", bearer(unknown))
		requireProblem(t, resp, body, http.StatusUnauthorized, "")
	}
	for _, key := range []string{unknown, api.KeyPrefix + strings.Repeat("B", 43), "not-a-key"} {
		resp, body := b.do(t, http.MethodGet, "/v1/stats", "", "", bearer(key))
		requireProblem(t, resp, body, http.StatusTooManyRequests, "")
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	resp, body := b.do(t, http.MethodGet, "/v1/stats", "", "", bearer(b.token))
	require.Equal(t, http.StatusOK, resp.StatusCode, body, "a valid token from the throttled address")

	ln, err := net.Listen("tcp6", "[::1]:0")
	require.NoError(t, err, "this test needs IPv6 loopback")
	other := httptest.NewUnstartedServer(b.server.Handler())
	other.Listener = ln
	other.Start()
	t.Cleanup(other.Close)
	req, err := http.NewRequest(http.MethodGet, other.URL+"/v1/stats", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+api.KeyPrefix+strings.Repeat("C", 43))
	resp, body = send(t, req)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, body, "another address has its own bucket")
}

// TestMalformedKeyIsRefusedWithoutAQuery: a bearer token that cannot be a
// key (wrong length or alphabet) is refused in memory. The API here runs
// on a database nothing listens on: a lookup would be a 500.
func TestMalformedKeyIsRefusedWithoutAQuery(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	srv, err := api.New(api.RouterConfig{Token: testToken()}, api.RouterDeps{
		Store: st, Pool: pool, Starter: &recordingStarter{}, Temporal: fakeTemporal{}, Logger: slog.New(slog.DiscardHandler),
		Transports: transportsFor(t, egress.Policy{}),
	})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	get := func(token string) *http.Response {
		req, err := http.NewRequest(http.MethodGet, hs.URL+"/v1/stats", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, _ := send(t, req)
		return resp
	}
	for _, token := range []string{
		api.KeyPrefix + "short",
		api.KeyPrefix + strings.Repeat("A", 42),
		api.KeyPrefix + strings.Repeat("A", 44),
		api.KeyPrefix + strings.Repeat("A", 42) + "!",
		api.KeyPrefix + strings.Repeat("A", 42) + "=",
	} {
		require.Equal(t, http.StatusUnauthorized, get(token).StatusCode, token)
	}
	require.Equal(t, http.StatusInternalServerError, get(api.KeyPrefix+strings.Repeat("A", 43)).StatusCode,
		"a well-formed key is looked up")
}

// TestNewRefusesShortBootstrapToken: outside hookflow dev the bootstrap
// token is at least 32 characters.
func TestNewRefusesShortBootstrapToken(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	st, err := store.New(pool)
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	deps := api.RouterDeps{Store: st, Pool: pool, Starter: &recordingStarter{}, Temporal: fakeTemporal{}, Logger: slog.New(slog.DiscardHandler),
		Transports: transportsFor(t, egress.Policy{})}
	_, err = api.New(api.RouterConfig{Token: strings.Repeat("t", 31)}, deps)
	require.ErrorIs(t, err, api.ErrWeakToken)
	_, err = api.New(api.RouterConfig{Token: strings.Repeat("t", 32)}, deps)
	require.NoError(t, err)
	_, err = api.New(api.RouterConfig{Token: "dev-token", AllowWeakToken: true}, deps)
	require.NoError(t, err, "hookflow dev keeps its dev-token")
}

// TestReservedKeyNames: a key's name is the by of its replays and skips;
// "bootstrap" is the bootstrap token's, and names starting with hookflow
// are hookflow's own (its auto-replay), so no key may take them. A name
// with control characters would write into whoever reads the audit trail.
func TestReservedKeyNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.count(t, "api_keys")
	for _, name := range []string{"bootstrap", "Bootstrap", " BOOTSTRAP ", "hookflow", "hookflow (auto-replay)", "HookFlow-ops"} {
		body, err := json.Marshal(map[string]any{"name": name, "scopes": []string{"dead-letters:write"}})
		require.NoError(t, err)
		resp, raw := b.do(t, http.MethodPost, "/v1/api-keys", "application/json", string(body), b.bearer())
		requireProblem(t, resp, raw, http.StatusUnprocessableEntity, "name")
	}
	for _, name := range []string{"csi\u009b2J", "rlo\u202eevil", "nul\x00"} {
		body, err := json.Marshal(map[string]any{"name": name, "scopes": []string{"dead-letters:write"}})
		require.NoError(t, err)
		resp, raw := b.do(t, http.MethodPost, "/v1/api-keys", "application/json", string(body), b.bearer())
		requireProblem(t, resp, raw, http.StatusBadRequest, "name")
	}
	require.Equal(t, before, b.count(t, "api_keys"))
	b.createKey(t, "ops-hookflow", api.ScopeDeadLettersWrite) // hookflow only as a prefix is reserved
}
