package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
