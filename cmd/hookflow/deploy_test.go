package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The deploy build (-tags deploy, what the Dockerfile builds) leaves out the
// commands that carry the embedded Temporal server and Web UI.

func goTool(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the deploy tests run the go command")
	return gobin
}

func TestDeployBuildLinksNoTemporalServer(t *testing.T) {
	t.Parallel()
	// The server and UI (most of the full build's 157 MB, stripped) and the
	// lab's harnesses that run them (chaos, bench).
	notInDeploy := []string{
		"go.temporal.io/server",
		"github.com/temporalio/ui-server",
		"github.com/hookflow/hookflow/internal/temporaldev",
		"github.com/hookflow/hookflow/lab",
	}
	out, err := exec.Command(goTool(t), "list", "-deps", "-tags", "deploy", ".").Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("go list -tags deploy: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range notInDeploy {
			if pkg == banned || strings.HasPrefix(pkg, banned+"/") {
				t.Errorf("the deploy build links %s", pkg)
			}
		}
	}
}

// A left-out command answers with one line saying so and exit 2, not
// "unknown command"; the rest of the CLI is there.
func TestDeployBuildNamesLeftOutCommands(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "hookflow")
	build := exec.Command(goTool(t), "build", "-tags", "deploy", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build -tags deploy:\n%s", out)

	for _, name := range []string{"dev", "temporal", "chaos", "bench"} {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, name)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, name)
		require.Equal(t, 2, ee.ExitCode(), "%s: %s", name, stderr.String())
		require.Equal(t, "hookflow "+name+": not in this build (built with -tags deploy); use the full build: go build ./cmd/hookflow\n", stderr.String())
		require.Empty(t, stdout.String(), name)
	}

	help, err := exec.Command(bin, "--help").Output()
	require.NoError(t, err)
	for _, name := range []string{"api", "worker", "migrate", "receiver", "relay"} {
		require.Contains(t, string(help), "\n  "+name+" ", "deploy build's --help")
	}
	out, err = exec.Command(bin, "migrate", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "usage: hookflow migrate")
}
