package api_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/kit/webhook"
)

// forbiddenTargets are endpoint URLs a public deployment must refuse.
var forbiddenTargets = []string{
	"https://127.0.0.1/hook",
	"https://127.1.2.3/hook",
	"https://[::1]/hook",
	"https://[::ffff:127.0.0.1]/hook",
	"https://10.0.0.1/hook",
	"https://172.16.0.1/hook",
	"https://172.31.255.255/hook",
	"https://192.168.1.1/hook",
	"https://169.254.169.254/latest/meta-data",
	"https://0.0.0.0/hook",
	"https://2130706433/hook",
	"https://0x7f000001/hook",
	"https://0177.0.0.1/hook",
	"https://localhost/hook",
	"https://localhost./hook",
	"https://127.0.0.1./hook",
	"http://example.com/hook",
	// Site-local, discard-only and the documentation networks.
	"https://[fec0::1]/hook",
	"https://[100::1]/hook",
	"https://192.0.2.1/hook",
	"https://198.51.100.7/hook",
	"https://203.0.113.9/hook",
}

func TestEndpointURLRefusedWhenPrivateTargetsAreNotAllowed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.endpointRows(t)
	for _, u := range forbiddenTargets {
		t.Run(u, func(t *testing.T) {
			body := fmt.Sprintf(`{"url":%q}`, u)
			resp, raw := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", body, b.bearer())
			requireProblem(t, resp, raw, http.StatusBadRequest, "url")
			resp, raw = b.do(t, http.MethodPatch, "/v1/endpoints/"+b.endpointID, "application/json", body, b.bearer())
			requireProblem(t, resp, raw, http.StatusBadRequest, "url")
			require.Equal(t, before, b.endpointRows(t))
		})
	}
	for _, u := range []string{"https://example.com/hook", "https://93.184.216.34/hook"} {
		resp, raw := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", fmt.Sprintf(`{"url":%q}`, u), b.bearer())
		require.Equal(t, http.StatusCreated, resp.StatusCode, raw)
	}
}

func TestEndpointURLPrivateAllowedWhenConfigured(t *testing.T) {
	t.Parallel()
	b := setupTargets(t, egress.Policy{AllowPrivate: true}, nil)
	resp, raw := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"http://127.0.0.1:8080/hook"}`, b.bearer())
	require.Equal(t, http.StatusCreated, resp.StatusCode, raw)
	// Still only http(s), and never with credentials.
	resp, raw = b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"ftp://127.0.0.1/hook"}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusBadRequest, "url")
	resp, raw = b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"http://u:p@127.0.0.1/hook"}`, b.bearer())
	requireProblem(t, resp, raw, http.StatusBadRequest, "url")
}

// TestAuthComparesInConstantTime reads the middleware's source: the token
// must be compared with crypto/subtle, never with == or bytes.Equal, which
// return early and leak how much of a guess was right.
func TestAuthComparesInConstantTime(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "auth.go", nil, 0)
	require.NoError(t, err)
	var auth *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "auth" && fd.Recv != nil {
			auth = fd
		}
	}
	require.NotNil(t, auth, "auth.go has the auth middleware")
	var constantTime bool
	ast.Inspect(auth, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok {
				if id.Name == "subtle" && n.Sel.Name == "ConstantTimeCompare" {
					constantTime = true
				}
				require.False(t, (id.Name == "bytes" || id.Name == "strings") && (n.Sel.Name == "Equal" || n.Sel.Name == "EqualFold"),
					"auth compares with %s.%s", id.Name, n.Sel.Name)
			}
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				for _, side := range []ast.Expr{n.X, n.Y} {
					if id, ok := side.(*ast.Ident); ok && (id.Name == "got" || id.Name == "want") {
						t.Errorf("auth compares the token with %s", n.Op)
					}
				}
			}
		}
		return true
	})
	require.True(t, constantTime, "auth uses subtle.ConstantTimeCompare")
}

func TestAuthAcceptsOnlyTheExactToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/v1/endpoints/" + b.endpointID
	get := func(authorization string) (*http.Response, string) {
		h := http.Header{}
		if authorization != "" {
			h.Set("Authorization", authorization)
		}
		return b.do(t, http.MethodGet, path, "", "", h)
	}
	resp, raw := get("Bearer " + b.token)
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	// The scheme is case-insensitive (RFC 9110); the token is not.
	resp, raw = get("bearer " + b.token)
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)

	tok := b.token
	for _, a := range []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer " + tok[:len(tok)-1],
		"Bearer " + tok[1:],
		"Bearer " + tok + "x",
		"Bearer x" + tok,
		"Bearer " + tok + tok,
		"Bearer " + strings.ToUpper(tok),
		"Bearer  " + tok,
		"Bearer " + tok + " " + tok,
		"Basic " + tok,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+tok)),
		"Token " + tok,
		tok,
	} {
		resp, raw := get(a)
		requireProblem(t, resp, raw, http.StatusUnauthorized, "")
		require.Equal(t, `Bearer realm="hookflow"`, resp.Header.Get("WWW-Authenticate"), "for %q", a)
	}
	// Health probes stay open.
	resp, raw = b.do(t, http.MethodGet, "/healthz", "", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
}

// TestInternalErrorsAreNotLeaked breaks the database under the API: the
// client gets a bare 500 problem, the operator's log gets the cause.
func TestInternalErrorsAreNotLeaked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Exec(context.Background(), `DROP VIEW events_routed; ALTER TABLE events RENAME TO events_gone`)
	require.NoError(t, err)

	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/events/evt_1", ""},
		{http.MethodPost, "/v1/events", eventBody(b.endpointID, nil)},
	} {
		resp, raw := b.do(t, r.method, r.path, "application/json", r.body, b.bearer())
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode, raw)
		require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
		var p map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &p))
		require.Equal(t, "Internal Server Error", p["title"])
		require.EqualValues(t, 500, p["status"])
		require.NotEmpty(t, p["type"])
		for _, leak := range []string{"events_gone", "relation", "exist", "SQLSTATE", "42P01", "pgx", "select", "insert"} {
			require.NotContains(t, strings.ToLower(raw), strings.ToLower(leak), "500 body leaks internals: %s", raw)
		}
	}
	require.Contains(t, b.logs.String(), "does not exist", "the cause is logged for the operator")
}

// TestSecretsAndTokenNeverLogged walks the API's secret-bearing flows,
// including the error paths that log, and checks no secret reaches the log.
func TestSecretsAndTokenNeverLogged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var secrets []string
	create := func() string {
		resp, raw := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/x"}`, b.bearer())
		require.Equal(t, http.StatusCreated, resp.StatusCode, raw)
		var ep struct{ ID, Secret string }
		require.NoError(t, json.Unmarshal([]byte(raw), &ep))
		require.True(t, strings.HasPrefix(ep.Secret, webhook.SecretPrefix))
		secrets = append(secrets, ep.Secret)
		return ep.ID
	}
	id := create()
	resp, raw := b.do(t, http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	var rotated struct{ Secret string }
	require.NoError(t, json.Unmarshal([]byte(raw), &rotated))
	require.NotEqual(t, secrets[0], rotated.Secret)
	secrets = append(secrets, rotated.Secret)

	// Custom header values are secrets too: set by a PATCH, refused in
	// one (a newline) and in a POST (an owned name), never answered.
	hdr := "hdr-s3cret-" + rand.Text()
	resp, raw = b.do(t, http.MethodPatch, "/v1/endpoints/"+id, "application/json", `{"headers":{"X-Api-Key":"`+hdr+`"}}`, b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	require.NotContains(t, raw, hdr)
	resp, raw = b.do(t, http.MethodPatch, "/v1/endpoints/"+id, "application/json", `{"headers":{"X-Api-Key":"`+hdr+`\nx: y"}}`, b.bearer())
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, raw)
	require.NotContains(t, raw, hdr)
	resp, raw = b.do(t, http.MethodPost, "/v1/endpoints", "application/json", `{"url":"https://example.com/y","headers":{"webhook-signature":"`+hdr+`"}}`, b.bearer())
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, raw)
	require.NotContains(t, raw, hdr)

	resp, raw = b.do(t, http.MethodGet, "/v1/endpoints/"+id, "", "", b.bearer())
	require.Equal(t, http.StatusOK, resp.StatusCode, raw)
	for _, s := range append(secrets, hdr) {
		require.NotContains(t, raw, s, "GET never returns the secret")
	}

	// An accepted event, one whose start fails (logged), a wrong token, and
	// a 500 (logged with its cause).
	resp, raw = b.do(t, http.MethodPost, "/v1/events", "application/json", eventBody(id, nil), b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	b.starter.fail.Store(true)
	resp, raw = b.do(t, http.MethodPost, "/v1/events", "application/json",
		eventBody(id, map[string]string{"id": `"evt_2"`, "sequence": `2`}), b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
	resp, _ = b.do(t, http.MethodGet, "/v1/endpoints/"+id, "", "", http.Header{"Authorization": {"Bearer " + secrets[0]}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	_, err := b.pool.Exec(context.Background(), `ALTER TABLE endpoints RENAME TO endpoints_gone`)
	require.NoError(t, err)
	resp, _ = b.do(t, http.MethodPost, "/v1/endpoints/"+id+"/rotate-secret", "", "", b.bearer())
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)

	logs := b.logs.String()
	require.NotEmpty(t, logs, "the flows above log something, so the check below means something")
	requireNoSecrets(t, logs, b.token, secrets)
	require.NotContains(t, logs, hdr, "nor a custom header's value")
}

func requireNoSecrets(t *testing.T, logs, apiToken string, secrets []string) {
	t.Helper()
	require.NotContains(t, logs, apiToken)
	for _, s := range secrets {
		require.NotContains(t, logs, s)
		key := strings.TrimPrefix(s, webhook.SecretPrefix)
		require.NotContains(t, logs, key)
		raw, err := base64.StdEncoding.DecodeString(key)
		require.NoError(t, err)
		// The key bytes in the other encodings a logger might choose.
		require.NotContains(t, logs, base64.RawStdEncoding.EncodeToString(raw))
		require.NotContains(t, logs, base64.URLEncoding.EncodeToString(raw))
		require.NotContains(t, logs, fmt.Sprintf("%x", raw))
	}
}
