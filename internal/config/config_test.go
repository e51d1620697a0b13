package config

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsWork(t *testing.T) {
	var names []string
	for _, s := range Settings() {
		names = append(names, s.Env)
	}
	c, rest, err := Load("x", "", names, nil, env(map[string]string{"HOOKFLOW_API_TOKEN": "t"}), nil, io.Discard)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Equal(t, 5*time.Minute, c.RecoveryWindow)
	require.Equal(t, "127.0.0.1:8080", c.APIAddr)
	require.False(t, c.AllowPrivate, "no variable allows every private target")
	require.Empty(t, c.PrivateAllowlist)
	require.Equal(t, 1000.0, c.EventsRateLimit)
	require.Equal(t, 100.0, c.ReadsRateLimit)
	require.Equal(t, 1, c.DevWorkers)
}

// The bootstrap token has no default: a command that needs it refuses to
// start without it, naming the variable; hookflow dev's override supplies it.
func TestAPITokenIsRequired(t *testing.T) {
	_, _, err := Load("api", "", []string{"HOOKFLOW_API_TOKEN"}, nil, env(nil), nil, io.Discard)
	var ue *UsageError
	require.ErrorAs(t, err, &ue)
	require.True(t, strings.HasPrefix(ue.Msg, "HOOKFLOW_API_TOKEN is required"), ue.Msg)
	c, _, err := Load("dev", "", []string{"HOOKFLOW_API_TOKEN"}, nil, env(nil), map[string]string{"HOOKFLOW_API_TOKEN": "dev-token"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "dev-token", c.APIToken)
}

func TestPrivateTargetAllowlist(t *testing.T) {
	c, _, err := Load("api", "", []string{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST"}, nil,
		env(map[string]string{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST": "receiver:8090, 10.0.0.5:443"}), nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []string{"receiver:8090", "10.0.0.5:443"}, c.PrivateAllowlist)
	for _, bad := range []string{"receiver", "receiver:http", ":8090", "receiver:0"} {
		_, _, err := Load("api", "", []string{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST"}, nil,
			env(map[string]string{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST": bad}), nil, io.Discard)
		var ue *UsageError
		require.ErrorAs(t, err, &ue, bad)
		require.Contains(t, ue.Msg, "HOOKFLOW_PRIVATE_TARGET_ALLOWLIST")
	}
}

func TestFlagsOverrideEnvOverrideDefaults(t *testing.T) {
	names := []string{"HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_API_TOKEN", "HOOKFLOW_TASK_QUEUE"}
	c, rest, err := Load("x", "", names, []string{"pos1", "--recovery-window", "30s", "pos2"},
		env(map[string]string{"HOOKFLOW_RECOVERY_WINDOW": "1m", "HOOKFLOW_TASK_QUEUE": "q"}),
		map[string]string{"HOOKFLOW_API_TOKEN": "dev-token"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, c.RecoveryWindow)
	require.Equal(t, "q", c.TaskQueue)
	require.Equal(t, "dev-token", c.APIToken, "the override changes the default")
	require.Equal(t, []string{"pos1", "pos2"}, rest)
}

func TestInvalidValueNamesTheVariable(t *testing.T) {
	_, _, err := Load("x", "", []string{"HOOKFLOW_RECOVERY_WINDOW"}, nil, env(map[string]string{"HOOKFLOW_RECOVERY_WINDOW": "soon"}), nil, io.Discard)
	var ue *UsageError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.Msg, "HOOKFLOW_RECOVERY_WINDOW")
}

// TestStatementTimeoutIsWholeMilliseconds: Postgres takes statement_timeout
// in milliseconds, 0 for none, so a timeout under one would turn it off:
// it is refused, naming the variable.
func TestStatementTimeoutIsWholeMilliseconds(t *testing.T) {
	load := func(v string) (Config, error) {
		c, _, err := Load("x", "", []string{"HOOKFLOW_STATEMENT_TIMEOUT"}, nil, env(map[string]string{"HOOKFLOW_STATEMENT_TIMEOUT": v}), nil, io.Discard)
		return c, err
	}
	_, err := load("500us")
	var ue *UsageError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.Msg, "HOOKFLOW_STATEMENT_TIMEOUT")
	require.Contains(t, ue.Msg, "at least 1ms")
	c, err := load("1ms")
	require.NoError(t, err)
	require.Equal(t, time.Millisecond, c.StatementTimeout)
}

// The configuration table of docs/operability.md lists every variable
// hookflow reads.
func TestOperatingDocListsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../../docs/operability.md")
	require.NoError(t, err)
	for _, s := range Settings() {
		require.True(t, strings.Contains(string(b), "`"+s.Env+"`"), "docs/operability.md lacks %s", s.Env)
	}
}
