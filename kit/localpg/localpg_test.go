package localpg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is a uid that owns none of the test's folders, as the postgres
// user owns none of root's.
const nobody = 65534

// openTemp is a t.TempDir that every user can traverse (t.TempDir's own
// parent is 0700).
func openTemp(t *testing.T) string {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDataDirForKeepsAReachableFolder(t *testing.T) {
	parent := openTemp(t)
	want := filepath.Join(parent, "postgres")
	got, moved, err := dataDirFor(want, nobody, filepath.Join(openTemp(t), "home"))
	if err != nil || moved || got != want {
		t.Fatalf("dataDirFor = %q, %v, %v; want %q, false, nil", got, moved, err, want)
	}
}

// A folder under a 0700 parent (a clone in /root) gets a cluster folder of
// its own under home, the same one every time, and the parent's mode is
// left as it was.
func TestDataDirForMovesOutOfAClosedFolder(t *testing.T) {
	closed := filepath.Join(openTemp(t), "root")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(openTemp(t), "home")
	dir := filepath.Join(closed, "clone", ".hookflow", "postgres")
	got, moved, err := dataDirFor(dir, nobody, home)
	if err != nil || !moved {
		t.Fatalf("dataDirFor = %q, %v, %v; want a folder under %s", got, moved, err, home)
	}
	if filepath.Dir(got) != home || !strings.HasPrefix(filepath.Base(got), "postgres-") {
		t.Fatalf("dataDirFor = %q; want %s/postgres-<hash>", got, home)
	}
	again, _, err := dataDirFor(dir, nobody, home)
	if err != nil || again != got {
		t.Fatalf("second call = %q, %v; want %q", again, err, got)
	}
	other, _, _ := dataDirFor(filepath.Join(closed, "other", "postgres"), nobody, home)
	if other == got {
		t.Fatalf("two folders share the cluster folder %s", got)
	}
	st, err := os.Stat(home)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("home: %v, %v; want mode 0755", st, err)
	}
	if reachable(home, nobody) != nil {
		t.Fatalf("home %s is not reachable", home)
	}
	st, err = os.Stat(closed)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the closed folder's mode changed: %v, %v", st, err)
	}
}
