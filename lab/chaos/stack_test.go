package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookflow/hookflow/workflows"
)

// The API's bootstrap token goes to a file only its user can read, never
// to the progress: the progress names the file.
func TestWriteTokenIsPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, err := writeToken(dir, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "api-token") {
		t.Errorf("token written to %s, want %s", path, filepath.Join(dir, "api-token"))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("token file mode %o, want 600", mode)
	}
	if b, err := os.ReadFile(path); err != nil || strings.TrimSpace(string(b)) != "s3cret" {
		t.Errorf("token file holds %q (%v)", b, err)
	}
}

// A closing that begins soon after a Temporal outage or a worker kill
// waits until a try lost in it has timed out and been tried again, not
// just its settle: the replay an operator pressed just before the outage
// reaches the ledger and the workflow's state only then.
func TestClosingWaitsOutATryLostInADisruption(t *testing.T) {
	t.Parallel()
	began := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	x := &modelExec{st: &stack{}, cfg: ModelConfig{Settle: 20 * time.Second}}
	if got := x.settleUntil(began).Sub(began); got != 20*time.Second {
		t.Errorf("no disruption: waits %s, want the settle", got)
	}
	x.st.disrupted = began.Add(-time.Minute)
	if got := x.settleUntil(began).Sub(began); got != 20*time.Second {
		t.Errorf("a disruption long past: waits %s, want the settle", got)
	}
	x.st.disrupted = began.Add(-2 * time.Second)
	if got := x.settleUntil(began).Sub(x.st.disrupted); got <= workflows.LedgerTimeout {
		t.Errorf("a closing right after a disruption ends %s after it, within a lost ledger try's timeout (%s)", got, workflows.LedgerTimeout)
	}
}
