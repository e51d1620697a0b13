package main

import (
	"context"
	"errors"
)

// runRelay is hookflow relay (being built).
func runRelay(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("hookflow relay is not built yet")
}
