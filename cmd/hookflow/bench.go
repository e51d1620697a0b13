package main

import (
	"context"
	"errors"
)

// runBench is hookflow bench (being built).
func runBench(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("hookflow bench is not built yet")
}
