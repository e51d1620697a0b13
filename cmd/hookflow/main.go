// Command hookflow is the whole product in one binary: dev (everything on one
// machine), api, worker, migrate, receiver, conformance, dlq. main only
// parses the command line, runs it, and exits once.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/printable"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what a subcommand reads and writes besides its arguments.
type cliEnv struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func loadConfig(env *cliEnv, name, summary string, args []string, settings []string, overrides map[string]string) (config.Config, []string, error) {
	return config.Load(name, summary, settings, args, env.getenv, overrides, env.stdout)
}

// commands are every subcommand of this build: the dev-only ones come from
// devCommands (commands_dev.go, or commands_deploy.go under -tags deploy).
func commands() map[string]command {
	cmds := map[string]command{
		"api":         {"serve the REST API", runAPICommand},
		"worker":      {"run a worker: executes event and sequencer workflows and deliveries", runWorkerCommand},
		"migrate":     {"apply pending database migrations", runMigrate},
		"dlq":         {"list, show, replay and skip dead letters through the API", runDLQ},
		"demo":        {"guided first run against hookflow dev: ordering, a dead letter, skip, with Temporal UI links", runDemo},
		"status":      {"print queue depth, in-flight, dead letters, lag and blocked correlations (GET /v1/stats)", runStatus},
		"receiver":    {"run the reference receiver (a ledger built on the receiver kit)", runReceiverCommand},
		"conformance": {"check any receiver URL against the wire contract's hard cases", runConformance},
		"relay":       {"move transactional-outbox rows into hookflow (start their workflows)", runRelay},
		"keys":        {"create, list and revoke API keys through the API", runKeys},
	}
	maps.Copy(cmds, devCommands())
	return cmds
}

func main() {
	os.Exit(run(os.Args[1:], &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

func run(args []string, env *cliEnv) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(env.stderr, "hookflow: internal error: %v\n", r)
			code = 1
		}
	}()
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.stdout, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	cmd, ok := cmds[name]
	if !ok {
		fmt.Fprintf(env.stderr, "hookflow: unknown command %q (run hookflow --help)\n", name)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, env, args[1:])
	var ue *config.UsageError
	switch {
	case err == nil, errors.Is(err, config.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(env.stderr, "hookflow %s: %s\n", name, oneLine(ue.Msg))
		return 2
	default:
		fmt.Fprintf(env.stderr, "hookflow %s: %s\n", name, oneLine(err.Error()))
		return 1
	}
}

func usage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "usage: hookflow <command> [flags]   (hookflow <command> --help for its flags)")
	fmt.Fprintln(w)
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
}

// oneLine is an error's text on one line, control characters escaped: it
// may quote an API's answer.
func oneLine(s string) string {
	return printable.String(strings.Join(strings.Fields(s), " "))
}
