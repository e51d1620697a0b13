package main

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/lab/testenv"
	"github.com/hookflow/hookflow/services/refreceiver"
)

func runWith(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &cliEnv{stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

// Bad configuration gives exit code 2 and one line naming the variable.
func TestBadConfigOneLine(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"malformed duration", map[string]string{"HOOKFLOW_RECOVERY_WINDOW": "five minutes"}, []string{"worker"}, "HOOKFLOW_RECOVERY_WINDOW"},
		{"negative duration", map[string]string{"HOOKFLOW_RECOVERY_WINDOW": "-1s"}, []string{"api"}, "HOOKFLOW_RECOVERY_WINDOW"},
		{"bad allowlist", map[string]string{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST": "receiver"}, []string{"api"}, "HOOKFLOW_PRIVATE_TARGET_ALLOWLIST"},
		{"api without token", nil, []string{"api"}, "HOOKFLOW_API_TOKEN is required"},
		{"api with a short token", map[string]string{"HOOKFLOW_API_TOKEN": "a-token-of-31-characters-------"}, []string{"api"}, "at least 32 characters"},
		{"bad rate limit", map[string]string{"HOOKFLOW_EVENTS_RATE_LIMIT": "0", "HOOKFLOW_API_TOKEN": "t"}, []string{"api"}, "HOOKFLOW_EVENTS_RATE_LIMIT"},
		{"bad address", map[string]string{"HOOKFLOW_API_ADDR": "8080"}, []string{"api"}, "HOOKFLOW_API_ADDR"},
		{"bad port", map[string]string{"HOOKFLOW_DEV_UI_PORT": "99999"}, []string{"dev"}, "HOOKFLOW_DEV_UI_PORT"},
		{"bad workers", map[string]string{"HOOKFLOW_DEV_WORKERS": "-2"}, []string{"dev"}, "HOOKFLOW_DEV_WORKERS"},
		{"bad flag value", nil, []string{"worker", "--recovery-window", "soon"}, "recovery-window"},
		// The worker reads it: its starter starts event workflows too.
		{"bad event max history on a worker", map[string]string{"HOOKFLOW_EVENT_MAX_HISTORY": "-1"}, []string{"worker"}, "HOOKFLOW_EVENT_MAX_HISTORY"},
		{"unknown flag", nil, []string{"migrate", "--nope"}, "nope"},
		{"bad dsn", map[string]string{"HOOKFLOW_DATABASE_URL": "postgres://%zz"}, []string{"migrate"}, "HOOKFLOW_DATABASE_URL"},
		{"a destination and a URL", nil, []string{"conformance", "--destination", "ep_x", "http://127.0.0.1:1/"}, "takes no URL and no --secret"},
		{"a destination and a secret", nil, []string{"conformance", "--destination", "ep_x", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "takes no URL and no --secret"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runWith(tc.env, tc.args...)
			require.Equal(t, 2, code, stderr)
			require.Contains(t, stderr, tc.want)
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		})
	}
}

// TestWorkerAndRelayNeedNoAPIToken: the bootstrap admin token is the API's
// alone. The worker, the process that talks to untrusted hosts, and the
// relay never use it, so they neither read nor require it.
func TestWorkerAndRelayNeedNoAPIToken(t *testing.T) {
	for _, name := range []string{"worker", "relay"} {
		code, out, _ := runWith(nil, name, "--help")
		require.Equal(t, 0, code, name)
		require.NotContains(t, out, "api-token", name)
		require.NotContains(t, out, "HOOKFLOW_API_TOKEN", name)
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := runWith(nil, "frobnicate")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `unknown command "frobnicate"`)
}

func TestHelpOnEveryCommand(t *testing.T) {
	for name := range commands() {
		code, out, _ := runWith(nil, name, "--help")
		require.Equal(t, 0, code, name)
		require.Contains(t, out, "usage: hookflow "+name, name)
	}
}

// An unreachable database is one readable line and exit 1, no stack trace.
func TestUnreachableDatabase(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	code, _, stderr := runWith(map[string]string{"HOOKFLOW_DATABASE_URL": "postgres://u:secretpw@" + addr + "/x?connect_timeout=2"}, "migrate")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "cannot reach Postgres")
	require.NotContains(t, stderr, "secretpw", "the password must not be printed")
	require.NotContains(t, stderr, "goroutine")
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
}

// A taken port for dev is refused with one line before anything starts.
func TestDevPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	code, _, stderr := runWith(map[string]string{
		"HOOKFLOW_DATA_DIR": dir, "HOOKFLOW_DEV_POSTGRES_PORT": itoa(port),
	}, "dev")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "in use")
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestMain(m *testing.M) {
	if os.Getenv(runAsHookflow) == "1" {
		main() // TestReadmeTour's `hookflow dev`: exits when it stops
	}
	os.Exit(testenv.Main(m))
}

// TestConformanceCommandAgainstReferenceReceiver runs `hookflow conformance`
// against `hookflow receiver`'s handler on a real socket and real Postgres;
// a wrong secret makes the same command fail.
func TestConformanceCommandAgainstReferenceReceiver(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testenv.NewDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, refreceiver.Migrate(ctx, pool))
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	srv, err := refreceiver.New(refreceiver.Config{Secrets: []string{secret}}, refreceiver.Deps{Pool: pool, Logger: testenv.Logger(t)})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	code, out, stderr := runWith(nil, "conformance", hs.URL+"/webhook", "--secret", secret)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr: %s", out, stderr)
	require.Contains(t, out, "15/15 cases passed")

	other, err := webhook.NewSecret()
	require.NoError(t, err)
	code, out, stderr = runWith(nil, "conformance", hs.URL+"/webhook", "--secret", other)
	require.Equal(t, 1, code)
	require.Contains(t, out, "FAIL")
	require.Contains(t, stderr, "breaks the contract")
}
