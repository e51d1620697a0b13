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
	c, rest, err := Load("x", "", names, nil, env(nil), nil, io.Discard)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.Equal(t, 5*time.Minute, c.RecoveryWindow)
	require.Equal(t, "127.0.0.1:8080", c.APIAddr)
	require.False(t, c.AllowPrivate)
	require.Equal(t, 1, c.DevWorkers)
}

func TestFlagsOverrideEnvOverrideDefaults(t *testing.T) {
	names := []string{"HOOKFLOW_RECOVERY_WINDOW", "HOOKFLOW_ALLOW_PRIVATE_TARGETS", "HOOKFLOW_TASK_QUEUE"}
	c, rest, err := Load("x", "", names, []string{"pos1", "--recovery-window", "30s", "pos2"},
		env(map[string]string{"HOOKFLOW_RECOVERY_WINDOW": "1m", "HOOKFLOW_TASK_QUEUE": "q"}),
		map[string]string{"HOOKFLOW_ALLOW_PRIVATE_TARGETS": "true"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, c.RecoveryWindow)
	require.Equal(t, "q", c.TaskQueue)
	require.True(t, c.AllowPrivate, "the override changes the default")
	require.Equal(t, []string{"pos1", "pos2"}, rest)
}

func TestInvalidValueNamesTheVariable(t *testing.T) {
	_, _, err := Load("x", "", []string{"HOOKFLOW_RECOVERY_WINDOW"}, nil, env(map[string]string{"HOOKFLOW_RECOVERY_WINDOW": "soon"}), nil, io.Discard)
	var ue *UsageError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, ue.Msg, "HOOKFLOW_RECOVERY_WINDOW")
}

// The README's configuration table lists every variable hookflow reads.
func TestReadmeListsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	for _, s := range Settings() {
		require.True(t, strings.Contains(string(b), "`"+s.Env+"`"), "README lacks %s", s.Env)
	}
}
