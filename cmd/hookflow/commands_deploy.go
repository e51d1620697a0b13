//go:build deploy

package main

import (
	"context"

	"github.com/hookflow/hookflow/internal/config"
)

// The deploy build: what the Dockerfile builds with -tags deploy. It leaves
// out the commands that carry the embedded Temporal server and Web UI, which a
// deployed api or worker never runs, and the harnesses that drive them:
// dev.go, temporal.go, chaos.go and bench.go are //go:build !deploy. Stripped
// (-trimpath -ldflags="-s -w"), the binary goes from about 157 MB to 33 MB.
// deploy_test.go checks what links.

// notInThisBuild is the summary and the answer of a left-out command.
const notInThisBuild = "not in this build (built with -tags deploy); use the full build: go build ./cmd/hookflow"

// devCommands names the commands this build leaves out, so that asking for
// one says why (one line, exit 2) instead of "unknown command".
func devCommands() map[string]command {
	cmds := map[string]command{}
	for _, name := range []string{"dev", "temporal", "chaos", "bench"} {
		cmds[name] = command{notInThisBuild, func(context.Context, *cliEnv, []string) error {
			return &config.UsageError{Msg: notInThisBuild}
		}}
	}
	return cmds
}
