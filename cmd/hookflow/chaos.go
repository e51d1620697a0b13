package main

import (
	"context"
	"errors"
)

// runChaos is hookflow chaos (being built).
func runChaos(ctx context.Context, env *cliEnv, args []string) error {
	return errors.New("hookflow chaos is not built yet")
}
