// Package layoutcheck keeps the house readable: imports point down the
// layers (the command → the lab → the wiring → api, worker and the
// services → workflows → activities → internal plumbing → schema, the
// API's generated contract and the kit), the product never imports the
// lab, the kit stays a light import, and the README names every top-level
// folder.
package layoutcheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	root   = "../.."
	module = "github.com/hookflow/hookflow"
	// maxKitModules bounds `go list -m all` of a module that imports the
	// whole kit: a receiver team should not inherit hookflow's server. The
	// generated API client (kit/client) and the receiver's OpenTelemetry
	// tracer (kit/receiver/otelreceiver) are modules of their own and not
	// counted here: the client's runtime (oapi-codegen's runtime and
	// nullable, google/uuid, go-jsonmerge) and OpenTelemetry stay out of
	// the kit's graph.
	maxKitModules = 18
	// maxReceiverGraph bounds `go list -m all` of a module that imports
	// kit/receiver alone, its own line included. What remains is pgx's and
	// testify's (the kit's tests) and the requirements their go.mod files
	// list, test-only ones among them, which module pruning keeps in the
	// graph. The receiver's tracing is a hook of its own (receiver.Tracer),
	// so OpenTelemetry is only in the graph of a receiver that imports
	// otelreceiver.
	maxReceiverGraph = 18
	// maxReceiverModules bounds the modules whose code a receiver's module
	// builds (the receiver kit, the signing and the intake): pgx and its
	// own, never the API client's or OpenTelemetry's.
	maxReceiverModules = 8
)

// layers rank the main module's folders, top down. A package may import a
// package of a lower layer (a higher rank), and one of its own layer only
// where peers says so, or when it lies beneath the importer's folder (its
// own parts, such as sqlc's code of its queries). The first row whose
// folder holds a package ranks it.
//
// The command is the top. Beneath it the lab: the team's rigs (the chaos
// run, the bench, the test harnesses, the tools), which may use anything of
// the product; every product package ranks below it, so none can import it.
// The command's dev build carries the lab's chaos and bench as subcommands
// (files built !deploy); what ships links none of the lab
// (TestWhatShipsLinksNoLab). Beneath the lab the wiring, which the command,
// the lab and the end-to-end tests build the processes with; then the
// faces and services the wiring starts, the workflows, the activities, the
// plumbing, and at the bottom the schema, the API's generated contract and
// the kit. A folder no row holds (e2e) is tests only: it may import
// anything and nothing imports it. The rule is for what a package builds:
// its own tests may reach any layer, as e2e does (the activities' tests
// start the API, the workflows' register them on a worker), and a rig
// only tests use (apicheck, which holds answers to the API's document)
// lives in the lab.
var layers = []struct {
	folder string
	rank   int
	peers  bool
}{
	{"cmd/hookflow/app", 2, false},
	{"cmd", 0, false},
	{"lab", 1, true},
	{"api/apigen", 7, true}, // generated, like schema/dbsqlc
	{"api", 3, false},
	{"worker", 3, false},
	{"services", 3, false},
	{"workflows", 4, false},
	{"activities", 5, false},
	{"internal", 6, true},
	{"schema", 7, true},
	{"kit", 7, true},
}

// layer ranks a package of the main module; ok is false for a test-only
// folder.
func layer(pkg string) (rank int, peers, ok bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	for _, l := range layers {
		if rel == l.folder || strings.HasPrefix(rel, l.folder+"/") {
			return l.rank, l.peers, true
		}
	}
	return 0, false, false
}

// importAllowed says whether package from may import package to, both of
// the main module, and if not, why.
func importAllowed(from, to string) (bool, string) {
	fromRank, peers, ok := layer(from)
	if !ok {
		return true, ""
	}
	toRank, _, ok := layer(to)
	switch {
	case !ok:
		return false, "which is tests only"
	case toRank < fromRank:
		return false, fmt.Sprintf("a layer above (%d above %d): arrows point down only", toRank, fromRank)
	case toRank == fromRank && !peers && !strings.HasPrefix(to, from+"/"):
		return false, fmt.Sprintf("a package of its own layer (%d), whose packages do not import each other", fromRank)
	}
	return true, ""
}

// TestLayersRefuse: the rule refuses what the layout forbids, so that a
// table edited to let everything through fails here.
func TestLayersRefuse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"internal/store", "lab/testenv", false},
		{"cmd/hookflow/app", "lab/bench", false},
		{"services/starter", "lab/chaos", false},
		{"activities", "workflows", false},
		{"internal/store", "services/starter", false},
		{"services/starter", "cmd/hookflow/app", false},
		{"api", "worker", false},
		{"services/relay", "services/starter", false},
		{"services/refreceiver", "services/refreceiver/internal/dbsqlc", true},
		{"internal/store", "e2e", false},
		{"lab/bench", "cmd/hookflow/app", true},
		{"lab/chaos", "services/refreceiver", true},
		{"lab/testenv/temporaltest", "lab/testenv", true},
		{"cmd/hookflow", "lab/chaos", true},
		{"cmd/hookflow", "cmd/hookflow/app", true},
		{"cmd/hookflow/app", "services/starter", true},
		{"services/starter", "workflows", true},
		{"internal/accept", "internal/store", true},
		{"api", "api/apigen", true},
		{"e2e", "lab/testenv", true},
	} {
		if ok, why := importAllowed(module+"/"+c.from, module+"/"+c.to); ok != c.ok {
			t.Errorf("%s imports %s: allowed %v, want %v (%s)", c.from, c.to, ok, c.ok, why)
		}
	}
}

type pkgInfo struct {
	Name       string
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T, dir string, args ...string) []pkgInfo {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkgInfo
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestImportsPointDown: no package imports one above its layer.
func TestImportsPointDown(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t, root, "./...") {
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if ok, why := importAllowed(p.ImportPath, imp); !ok {
				t.Errorf("%s imports %s, %s", p.ImportPath, imp, why)
			}
		}
	}
}

// TestWhatShipsLinksNoLab: the deploy build of the command (what the
// Dockerfile builds) links nothing of the lab, the dev build's chaos and
// bench included.
func TestWhatShipsLinksNoLab(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t, root, "-tags", "deploy", "./cmd/hookflow")
	if len(pkgs) != 1 {
		t.Fatalf("go list ./cmd/hookflow: %d packages", len(pkgs))
	}
	for _, dep := range pkgs[0].Deps {
		if strings.HasPrefix(dep, module+"/lab/") {
			t.Errorf("the deploy build of cmd/hookflow links %s", dep)
		}
	}
}

// TestWorkflowsAreDeterministicCode: the workflows see the contract and the
// SDK, never the database or the activities' dependencies.
func TestWorkflowsAreDeterministicCode(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t, root, "-deps", "./workflows") {
		for _, bad := range []string{"github.com/jackc/pgx", module + "/activities", module + "/internal/store"} {
			if strings.HasPrefix(p.ImportPath, bad) {
				t.Errorf("workflows depends on %s", p.ImportPath)
			}
		}
	}
}

// TestDeliveryNamesNoTransport: the delivery activity keeps what every
// destination shares and reaches each through package transport's
// interface: it speaks no HTTP itself (the Temporal SDK under it does, for
// its own connections) and depends on no transport's package, so that a
// destination of another kind is a package beside the webhook, not a
// change to the delivery.
func TestDeliveryNamesNoTransport(t *testing.T) {
	t.Parallel()
	for _, p := range listPackages(t, root, "./activities") {
		for _, imp := range p.Imports {
			if imp == "net/http" || imp == module+"/internal/egress" {
				t.Errorf("%s imports %s", p.ImportPath, imp)
			}
		}
		for _, dep := range p.Deps {
			if strings.HasPrefix(dep, module+"/internal/transport/") {
				t.Errorf("%s depends on the transport %s", p.ImportPath, dep)
			}
		}
	}
}

// TestKitIsLight builds a scratch module that imports every package of the
// kit, and one that imports what a receiver does, and counts the modules
// each inherits.
func TestKitIsLight(t *testing.T) {
	t.Parallel()
	kit, err := filepath.Abs(filepath.Join(root, "kit"))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, p := range listPackages(t, kit, "./...") {
		// An internal package (sqlc's code of a package's queries) comes
		// with the package that imports it; a program (an example
		// receiver) is not imported.
		if !strings.Contains(p.ImportPath, "/internal/") && p.Name != "main" {
			all = append(all, p.ImportPath)
		}
	}
	receiver := []string{module + "/kit/receiver", module + "/kit/webhook", module + "/kit/intake"}
	for _, c := range []struct {
		name    string
		imports []string
		list    []string
		max     int
	}{
		{"the kit", all, []string{"mod", "graph"}, maxKitModules},
		{"kit/receiver's graph", []string{module + "/kit/receiver"}, []string{"mod", "graph"}, maxReceiverGraph},
		{"a receiver", receiver, []string{"list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", "./..."}, maxReceiverModules},
	} {
		modules := consumerModules(t, kit, c.imports, c.list)
		slices.Sort(modules)
		modules = slices.Compact(modules)
		t.Logf("a consumer of %s (%d packages) has %d modules:\n%s", c.name, len(c.imports), len(modules), strings.Join(modules, "\n"))
		if len(modules) > c.max {
			t.Errorf("a consumer of %s has %d modules, more than %d", c.name, len(modules), c.max)
		}
		for _, m := range modules {
			if strings.HasPrefix(m, "go.temporal.io/") || m == module || strings.HasPrefix(m, module+" ") {
				t.Errorf("a consumer of %s inherits %s", c.name, m)
			}
		}
	}
}

// consumerModules builds a scratch module that imports packages of the kit
// at kit, and returns what `go <list>` prints there, a line each.
func consumerModules(t *testing.T, kit string, packages, list []string) []string {
	t.Helper()
	var imports []string
	for _, p := range packages {
		imports = append(imports, "\t_ \""+p+"\"")
	}
	dir := t.TempDir()
	goMod := "module example.com/consumer\n\ngo 1.26\n\nrequire " + module + "/kit v0.0.0\n\nreplace " + module + "/kit => " + kit + "\n"
	main := "package main\n\nimport (\n" + strings.Join(imports, "\n") + "\n)\n\nfunc main() {}\n"
	// The kit's go.sum vouches for the modules the consumer builds. Tidy
	// also reads go.mod files that `go mod download` in kit does not fetch
	// (the test-only requirements of the kit's dependencies): `make test`
	// fetches them first (`go list -m all` in kit), so the test runs with
	// no proxy and reaches nothing off this machine; a module missing from
	// the cache fails it rather than skips it.
	goSum, err := os.ReadFile(filepath.Join(kit, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"go.mod": goMod, "main.go": main, "go.sum": string(goSum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) []byte {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		return out
	}
	run("mod", "tidy")
	run("build", "./...")
	var modules []string
	sc := bufio.NewScanner(bytes.NewReader(run(list...)))
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		if list[0] != "mod" {
			modules = append(modules, sc.Text())
			continue
		}
		// `go mod graph` names the same modules as `go list -m all`, but
		// reads only go.mod files, which the cache holds for every module
		// of the graph (list also wants each selected version's date). Its
		// lines are edges "a@v b@w"; "go" and "toolchain" are not modules.
		for _, node := range strings.Fields(sc.Text()) {
			path, _, _ := strings.Cut(node, "@")
			if path != "go" && path != "toolchain" {
				modules = append(modules, path)
			}
		}
	}
	return modules
}

// TestReadmeNamesEveryFolder: the README's layout table has a row for each
// top-level folder in git, and no row for one that is gone.
func TestReadmeNamesEveryFolder(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	folders := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if i := strings.IndexByte(f, '/'); i > 0 && !strings.HasPrefix(f, ".") {
			folders[f[:i]] = true
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n## ")
	rows := map[string]bool{}
	for _, line := range strings.Split(layout, "\n") {
		if strings.HasPrefix(line, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "/")
			rows[name] = true
		}
	}
	for f := range folders {
		if !rows[f] {
			t.Errorf("README's layout table has no row for %s/", f)
		}
	}
	for r := range rows {
		if !folders[r] {
			t.Errorf("README's layout table names %s/, which is not in the repository", r)
		}
	}
	t.Logf("%d top-level folders", len(folders))
}
