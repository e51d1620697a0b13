package chaos

import (
	"context"
	"strings"
	"testing"
)

// TestOperatorModelShort builds hookflow and runs `hookflow chaos
// --operator-model --short`: the model-based operator test's fixed seeds
// (ModelShort) on the whole stack as real processes, and asserts that no
// scenario broke a check. A failure's seed, violations and actions are in
// the log; `hookflow chaos --operator-model --seed N --sequences 1` runs
// that scenario again.
func TestOperatorModelShort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testBudget(t))
	defer cancel()
	stdout, wall, err := runChaosCommand(ctx, t, "--operator-model", "--short")
	var summary string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(line, "operator_model ") {
			summary = line
		} else {
			t.Log(line)
		}
	}
	t.Logf("summary (%s): %s", wall, summary)
	switch {
	case summary == "":
		t.Fatalf("no summary line (%v, ctx: %v)", err, ctx.Err())
	case !strings.Contains(summary, " failed=0 "):
		t.Fatalf("the operator model found violations (see the scenarios above): %s", summary)
	case !strings.Contains(summary, " unverified=0 "):
		t.Fatalf("a receiver refused to verify deliveries (see the progress above): %s", summary)
	case err != nil:
		t.Fatalf("hookflow chaos --operator-model --short: %v (ctx: %v)", err, ctx.Err())
	}
}
