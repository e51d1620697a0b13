package composecheck

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"gopkg.in/yaml.v3"

	"github.com/hookflow/hookflow/internal/config"
)

const root = "../.."

// initScript is the Postgres init script docker-compose.yml mounts; the
// mistakes below edit a copy of it.
const initScript = "deploy/postgres/hookflow-db.sh"

// requiredServices are the services DESIGN.md and docs/operability.md promise.
var requiredServices = []string{"postgresql", "temporal", "temporal-ui", "migrate", "api", "worker", "receiver"}

// subcommands a compose service may run. Each one used must also be a quoted
// command name in cmd/hookflow/main.go, so this list cannot drift from the CLI.
// dev is not one: the image is the deploy build, which leaves it out.
var subcommands = map[string]bool{"api": true, "worker": true, "migrate": true, "receiver": true, "relay": true}

// mustRunAfterMigrate are the services that use hookflow's schema.
var mustRunAfterMigrate = []string{"api", "worker"}

// mustSet are the settings each service needs set away from their defaults:
// the defaults point at 127.0.0.1, which inside a container is the container
// itself (an address to dial) or unreachable from outside (one to listen on),
// or, for the API's metrics listener, are off.
var mustSet = map[string][]string{
	"migrate":  {"HOOKFLOW_DATABASE_URL"},
	"api":      {"HOOKFLOW_DATABASE_URL", "HOOKFLOW_TEMPORAL_ADDRESS", "HOOKFLOW_API_ADDR", "HOOKFLOW_METRICS_ADDR"},
	"worker":   {"HOOKFLOW_DATABASE_URL", "HOOKFLOW_TEMPORAL_ADDRESS"},
	"receiver": {"HOOKFLOW_RECEIVER_DATABASE_URL", "HOOKFLOW_RECEIVER_ADDR"},
}

func TestComposeMatchesCode(t *testing.T) {
	compose, dockerfile, mainGo := readInputs(t)
	for _, err := range check(compose, dockerfile, mainGo, os.DirFS(root)) {
		t.Error(err)
	}
}

// TestCheckCatchesMistakes feeds check copies of the real files with one
// mistake each, so a check that cannot fail is noticed.
func TestCheckCatchesMistakes(t *testing.T) {
	compose, dockerfile, mainGo := readInputs(t)
	repo := os.DirFS(root)
	script, err := fs.ReadFile(repo, initScript)
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := fs.ReadFile(repo, "go.mod")
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]bool{}
	for _, err := range check(compose, dockerfile, mainGo, repo) {
		before[err.Error()] = true
	}
	envFile, err := fs.ReadFile(repo, envExample)
	if err != nil {
		t.Fatal(err)
	}
	type files struct{ compose, dockerfile, mainGo, script, goMod, envExample string }
	const token = `"${HOOKFLOW_API_TOKEN:?set HOOKFLOW_API_TOKEN (the bootstrap admin token, at least 32 characters; see docs/security.md)}"`
	const superuserPassword = `"${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (the Postgres superuser's password, which Temporal and the database setup use)}"`
	cases := []struct {
		name   string
		mutate func(f *files) bool // reports whether the mistake was made
		want   string              // substring of one of the errors
	}{
		{"typo'd variable", func(f *files) bool {
			return replace(&f.compose, "HOOKFLOW_TASK_QUEUE:", "HOOKFLOW_TASKQUEUE:")
		}, "HOOKFLOW_TASKQUEUE"},
		{"variable only in the anchor", func(f *files) bool {
			return replace(&f.compose, `HOOKFLOW_TEMPORAL_ADDRESS: "temporal:7233"`, `HOOKFLOW_TEMPORAL_ADDR: "temporal:7233"`)
		}, "HOOKFLOW_TEMPORAL_ADDR"},
		{"dev-only variable", func(f *files) bool {
			return replace(&f.compose, `HOOKFLOW_TASK_QUEUE: "hookflow"`, `HOOKFLOW_TASK_QUEUE: "hookflow"`+"\n  HOOKFLOW_DEV_WORKERS: \"0\"")
		}, "HOOKFLOW_DEV_WORKERS"},
		{"unparsable value", func(f *files) bool {
			return replace(&f.compose, `${HOOKFLOW_RECOVERY_WINDOW:-5m}`, `${HOOKFLOW_RECOVERY_WINDOW:-5 minutes}`)
		}, "HOOKFLOW_RECOVERY_WINDOW"},
		{"unknown subcommand", func(f *files) bool {
			return replace(&f.compose, `command: ["worker"]`, `command: ["work"]`)
		}, `"work"`},
		{"subcommand missing from main.go", func(f *files) bool {
			return replace(&f.mainGo, `"worker":`, `"wrkr":`)
		}, "main.go"},
		{"api listens on loopback", func(f *files) bool {
			return replace(&f.compose, `HOOKFLOW_API_ADDR: "0.0.0.0:8080"`, `HOOKFLOW_API_ADDR: "127.0.0.1:8080"`)
		}, "HOOKFLOW_API_ADDR"},
		{"worker without the shared environment", func(f *files) bool {
			i := strings.Index(f.compose, "\n  worker:\n")
			if i < 0 {
				return false
			}
			head, tail := f.compose[:i], f.compose[i:]
			if !replace(&tail, "      <<: *hookflow-env\n", "") {
				return false
			}
			f.compose = head + tail
			return true
		}, "HOOKFLOW_TEMPORAL_ADDRESS is not set"},
		{"two workers", func(f *files) bool {
			return replace(&f.compose, "replicas: 3", "replicas: 2")
		}, "replicas"},
		{"api not after migrate", func(f *files) bool {
			i := strings.Index(f.compose, "\n  api:\n")
			if i < 0 {
				return false
			}
			head, tail := f.compose[:i], f.compose[i:]
			if !replace(&tail, "condition: service_completed_successfully", "condition: service_started") {
				return false
			}
			f.compose = head + tail
			return true
		}, "api"},
		{"missing service", func(f *files) bool {
			return replace(&f.compose, "\n  temporal-ui:\n", "\n  temporal-web:\n")
		}, "temporal-ui"},
		{"builds another package", func(f *files) bool {
			return replace(&f.dockerfile, "./cmd/hookflow", "./cmd/other")
		}, "./cmd/hookflow"},
		{"runs as root", func(f *files) bool {
			return replace(&f.dockerfile, "USER 10001:10001", "USER root")
		}, "root"},

		// Safe beyond a laptop.
		{"api token with a default", func(f *files) bool {
			return replaceInService(&f.compose, "api", token, `"${HOOKFLOW_API_TOKEN:-change-me}"`)
		}, "HOOKFLOW_API_TOKEN"},
		{"api token that may be empty", func(f *files) bool {
			return replaceInService(&f.compose, "api", token, `"${HOOKFLOW_API_TOKEN?set it}"`)
		}, "HOOKFLOW_API_TOKEN=\"${HOOKFLOW_API_TOKEN?set it}\""},
		{"api token required without a message", func(f *files) bool {
			return replaceInService(&f.compose, "api", token, `"${HOOKFLOW_API_TOKEN:?}"`)
		}, "HOOKFLOW_API_TOKEN"},
		{"worker with the token", func(f *files) bool {
			return replaceInService(&f.compose, "worker", "      <<: *hookflow-env\n", "      <<: *hookflow-env\n      HOOKFLOW_API_TOKEN: "+token+"\n")
		}, "service worker: HOOKFLOW_API_TOKEN is set"},
		{"relay with the token", func(f *files) bool {
			return replace(&f.compose, "\n  receiver:\n", "\n  relay:\n    <<: *hookflow\n    command: [\"relay\"]\n    environment:\n      <<: *hookflow-env\n      HOOKFLOW_API_TOKEN: "+token+"\n\n  receiver:\n")
		}, "service relay: HOOKFLOW_API_TOKEN is set"},
		{"superuser password with a default", func(f *files) bool {
			return replaceInService(&f.compose, "postgresql", superuserPassword, `"${POSTGRES_PASSWORD:-postgres}"`)
		}, "service postgresql: POSTGRES_PASSWORD"},
		{"Temporal's database password as a literal", func(f *files) bool {
			return replaceInService(&f.compose, "temporal", superuserPassword, `"postgres"`)
		}, "service temporal: POSTGRES_PWD"},
		{"api published on every interface", func(f *files) bool {
			return replaceInService(&f.compose, "api", `"${HOOKFLOW_API_BIND:-127.0.0.1}:8080:8080"`, `"8080:8080"`)
		}, "service api: ports"},
		{"api published beyond loopback by default", func(f *files) bool {
			return replaceInService(&f.compose, "api", `"${HOOKFLOW_API_BIND:-127.0.0.1}:8080:8080"`, `"${HOOKFLOW_API_BIND:-0.0.0.0}:8080:8080"`)
		}, "service api: ports"},
		{"receiver published on every interface", func(f *files) bool {
			return replaceInService(&f.compose, "receiver", `"${HOOKFLOW_RECEIVER_BIND:-127.0.0.1}:8090:8090"`, `"8090:8090"`)
		}, "service receiver: ports"},
		{".env.example without a required variable", func(f *files) bool {
			return replace(&f.envExample, "\nPOSTGRES_PASSWORD=\n", "\n")
		}, ".env.example: docker-compose.yml demands POSTGRES_PASSWORD"},
		{".env.example without an optional variable", func(f *files) bool {
			return replace(&f.envExample, "\n#HOOKFLOW_API_BIND=", "\n#")
		}, "does not mention it (#HOOKFLOW_API_BIND"},
		{"Temporal frontend on every interface", func(f *files) bool {
			return replace(&f.compose, `"127.0.0.1:7233:7233"`, `"7233:7233"`)
		}, "service temporal"},
		{"Temporal frontend on a public address", func(f *files) bool {
			return replace(&f.compose, `"127.0.0.1:7233:7233"`, `"0.0.0.0:7233:7233"`)
		}, "service temporal"},
		{"Temporal's HTTP API published too", func(f *files) bool {
			return replace(&f.compose, `- "127.0.0.1:7233:7233"`, `- "127.0.0.1:7233:7233"`+"\n      - 7243:7243")
		}, "7243"},
		{"Temporal on the host network", func(f *files) bool {
			return replaceInService(&f.compose, "temporal", "    ports:\n", "    network_mode: host\n    ports:\n")
		}, "network_mode"},
		{"Temporal frontend from another service", func(f *files) bool {
			return replaceInService(&f.compose, "temporal-setup", "    restart:", "    ports:\n      - \"7233:7233\"\n    restart:")
		}, "service temporal-setup"},
		{"Web UI on every interface (long syntax)", func(f *files) bool {
			return replace(&f.compose, `- "127.0.0.1:8233:8080"`, "- target: 8080\n        published: 8233")
		}, "service temporal-ui"},
		{"DSN as the superuser", func(f *files) bool {
			return replace(&f.compose, "postgres://hookflow:", "postgres://postgres:")
		}, "superuser"},
		{"DSN as the superuser in keyword form", func(f *files) bool {
			return replaceInService(&f.compose, "receiver", `HOOKFLOW_RECEIVER_ADDR: "0.0.0.0:8090"`,
				`HOOKFLOW_RECEIVER_ADDR: "0.0.0.0:8090"`+"\n      HOOKFLOW_OUTBOX_DATABASE_URL: \"host=postgresql user=postgres dbname=hookflow\"")
		}, "superuser"},
		{"DSN role no init script creates", func(f *files) bool {
			return replace(&f.compose, "postgres://hookflow:", "postgres://hookflow_app:")
		}, "hookflow_app"},
		{"database the role does not own", func(f *files) bool {
			return replace(&f.script, "CREATE DATABASE hookflow_receiver OWNER hookflow", "CREATE DATABASE hookflow_receiver")
		}, "hookflow_receiver"},
		{"init script not mounted", func(f *files) bool {
			return replace(&f.compose, ":/docker-entrypoint-initdb.d/10-hookflow-db.sh:ro", ":/hookflow-db.sh:ro")
		}, "docker-entrypoint-initdb.d"},
		{"mounted file missing", func(f *files) bool {
			return replace(&f.compose, "./deploy/postgres/hookflow-db.sh:/docker-entrypoint-initdb.d/", "./deploy/postgres/hookflow.sh:/docker-entrypoint-initdb.d/")
		}, "deploy/postgres/hookflow.sh"},
		{"old private-targets switch", func(f *files) bool {
			return replaceInService(&f.compose, "worker", "<<: *hookflow-env\n", "<<: *hookflow-env\n      HOOKFLOW_ALLOW_PRIVATE_TARGETS: \"true\"\n")
		}, "service worker: HOOKFLOW_ALLOW_PRIVATE_TARGETS is set"},
		{"old private-targets switch in the shared environment", func(f *files) bool {
			return replace(&f.compose, `HOOKFLOW_TASK_QUEUE: "hookflow"`, `HOOKFLOW_TASK_QUEUE: "hookflow"`+"\n  HOOKFLOW_ALLOW_PRIVATE_TARGETS: \"false\"")
		}, "x-hookflow-env: HOOKFLOW_ALLOW_PRIVATE_TARGETS is set"},
		{"worker allowlist without the receiver", func(f *files) bool {
			return replaceInService(&f.compose, "worker", `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:8090"`, `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:9000"`)
		}, "receiver:8090"},
		{"api without the allowlist", func(f *files) bool {
			return replaceInService(&f.compose, "api", `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:8090"`, `OTHER: "x"`)
		}, "service api: HOOKFLOW_PRIVATE_TARGET_ALLOWLIST"},
		{"allowlist entry without a port", func(f *files) bool {
			return replaceInService(&f.compose, "api", `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:8090"`, `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:8090, receiver"`)
		}, `entry "receiver" is not an exact host:port`},
		{"allowlist wildcard", func(f *files) bool {
			return replaceInService(&f.compose, "worker", `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:8090"`, `HOOKFLOW_PRIVATE_TARGET_ALLOWLIST: "receiver:8090,*:80"`)
		}, `"*:80"`},
		{"api metrics off", func(f *files) bool {
			return replaceInService(&f.compose, "api", `HOOKFLOW_METRICS_ADDR: "0.0.0.0:9090"`, `OTHER: "x"`)
		}, "HOOKFLOW_METRICS_ADDR is not set"},
		{"api metrics on the API port", func(f *files) bool {
			return replaceInService(&f.compose, "api", `HOOKFLOW_METRICS_ADDR: "0.0.0.0:9090"`, `HOOKFLOW_METRICS_ADDR: ":8080"`)
		}, "API's port"},
		{"api metrics published on every interface", func(f *files) bool {
			return replaceInService(&f.compose, "api", `- "${HOOKFLOW_API_BIND:-127.0.0.1}:8080:8080"`, `- "${HOOKFLOW_API_BIND:-127.0.0.1}:8080:8080"`+"\n      - \"9090:9090\"")
		}, "9090"},

		// Comes up the first time.
		{"Postgres at its default max_connections", func(f *files) bool {
			return replace(&f.compose, `    command: ["postgres", "-c", "max_connections=300"]`+"\n", "")
		}, "max_connections=100"},
		{"max_connections below the pools", func(f *files) bool {
			return replace(&f.compose, "max_connections=300", "max_connections=200")
		}, "max_connections=200"},
		{"Temporal's pools grown", func(f *files) bool {
			return replace(&f.compose, `SQL_MAX_CONNS: "20"`, `SQL_MAX_CONNS: "40"`)
		}, "temporal 1x4x(40+10)"},
		{"the API's pools at their floors", func(f *files) bool {
			// pool_max_conns=4 leaves the API 12 (app.APIConns's floors),
			// not 4: 281 - 32 + 4 fits, 281 - 32 + 12 does not.
			return replaceInService(&f.compose, "api", "&pool_max_conns=32", "&pool_max_conns=4") &&
				replace(&f.compose, "max_connections=300", "max_connections=253")
		}, "api 1x12"},
		{"a pool without pool_max_conns", func(f *files) bool {
			return replaceInService(&f.compose, "worker", "&pool_max_conns=32", "")
		}, "service worker: HOOKFLOW_DATABASE_URL has no pool_max_conns"},
		{"healthcheck over the socket", func(f *files) bool {
			return replace(&f.compose, "pg_isready -h 127.0.0.1 -U postgres", "pg_isready -U postgres")
		}, "pg_isready over TCP"},
		{"one-shot that does not retry", func(f *files) bool {
			return replaceInService(&f.compose, "migrate", "restart: on-failure:10", `restart: "no"`)
		}, "service migrate: a one-shot"},
		{"one-shot restarted forever", func(f *files) bool {
			return replaceInService(&f.compose, "temporal-admin-tools", "restart: on-failure:10", "restart: unless-stopped")
		}, "service temporal-admin-tools: a one-shot"},
		{"one-shot not waited out", func(f *files) bool {
			return replaceInService(&f.compose, "temporal", "condition: service_completed_successfully", "condition: service_started")
		}, "depends_on temporal-admin-tools with condition service_started"},
		{"receiver outside a profile", func(f *files) bool {
			return replace(&f.compose, "    profiles: [receiver]\n", "")
		}, "service receiver: not in a profile"},
		{"receiver secret with a default", func(f *files) bool {
			return replace(&f.compose, `"${HOOKFLOW_RECEIVER_SECRET:-}"`, `"${HOOKFLOW_RECEIVER_SECRET:-whsec_changeme}"`)
		}, "HOOKFLOW_RECEIVER_SECRET="},
		{"receiver secret required by compose", func(f *files) bool {
			return replace(&f.compose, `"${HOOKFLOW_RECEIVER_SECRET:-}"`, `"${HOOKFLOW_RECEIVER_SECRET:?register the endpoint first}"`)
		}, "requires ${HOOKFLOW_RECEIVER_SECRET:?...}"},
		{"image with the embedded Temporal server", func(f *files) bool {
			return replace(&f.dockerfile, "go build -tags deploy ", "go build ")
		}, "-tags deploy"},
		{"Go version floats", func(f *files) bool {
			return replace(&f.dockerfile, "ARG GO_VERSION=1.26.8", "ARG GO_VERSION=1.26")
		}, "go.mod says go 1.26.8"},
		{"go.mod moves ahead of the image", func(f *files) bool {
			return replace(&f.goMod, "\ngo 1.26.8\n", "\ngo 1.26.9\n")
		}, "go.mod says go 1.26.9"},
		{"builder ignores GO_VERSION", func(f *files) bool {
			return replace(&f.dockerfile, "FROM golang:${GO_VERSION}-bookworm", "FROM golang:1.26-bookworm")
		}, "FROM golang:1.26-bookworm"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := files{string(compose), string(dockerfile), string(mainGo), string(script), string(goMod), string(envFile)}
			if !tc.mutate(&f) {
				t.Fatal("the mistake could not be made: the files changed; update this case")
			}
			repo := overlay{repo, map[string]string{initScript: f.script, "go.mod": f.goMod, envExample: f.envExample}}
			errs := check([]byte(f.compose), []byte(f.dockerfile), []byte(f.mainGo), repo)
			for _, err := range errs {
				// Only an error the mistake caused counts, not one the real
				// files already have.
				if !before[err.Error()] && strings.Contains(err.Error(), tc.want) {
					return
				}
			}
			t.Errorf("no new error mentions %q; got %v", tc.want, errs)
		})
	}
}

func readInputs(t *testing.T) (compose, dockerfile, mainGo []byte) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(path.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return read("docker-compose.yml"), read("Dockerfile"), read("cmd/hookflow/main.go")
}

func replace(s *string, old, new string) bool {
	if !strings.Contains(*s, old) {
		return false
	}
	*s = strings.Replace(*s, old, new, 1)
	return true
}

// replaceInService replaces the first old after the line that starts
// service name in a compose file, and before the next service.
func replaceInService(compose *string, name, old, new string) bool {
	start := strings.Index(*compose, "\n  "+name+":\n")
	if start < 0 {
		return false
	}
	start++
	end := len(*compose)
	if i := regexp.MustCompile(`\n  [a-z][a-z0-9-]*:\n|\n[a-z]`).FindStringIndex((*compose)[start+1:]); i != nil {
		end = start + 1 + i[0]
	}
	section := (*compose)[start:end]
	if !replace(&section, old, new) {
		return false
	}
	*compose = (*compose)[:start] + section + (*compose)[end:]
	return true
}

// overlay is a repository with some files' contents replaced.
type overlay struct {
	base  fs.FS
	files map[string]string
}

func (o overlay) Open(name string) (fs.File, error) {
	if s, ok := o.files[name]; ok {
		return fstest.MapFS{name: {Data: []byte(s)}}.Open(name)
	}
	return o.base.Open(name)
}

// --- the checks -------------------------------------------------------------

type composeFile struct {
	Services map[string]service `yaml:"services"`
}

type service struct {
	Image       string     `yaml:"image"`
	Build       any        `yaml:"build"`
	Profiles    []string   `yaml:"profiles"`
	Command     stringList `yaml:"command"`
	Restart     string     `yaml:"restart"`
	Healthcheck struct {
		Test stringList `yaml:"test"`
	} `yaml:"healthcheck"`
	Environment environment   `yaml:"environment"`
	DependsOn   dependsOn     `yaml:"depends_on"`
	Ports       []portMapping `yaml:"ports"`
	Volumes     []mount       `yaml:"volumes"`
	NetworkMode string        `yaml:"network_mode"`
	Deploy      struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
}

// stringList is compose's list-or-string form (command, entrypoint).
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = strings.Fields(n.Value)
		return nil
	}
	var s []string
	err := n.Decode(&s)
	*l = s
	return err
}

// environment is compose's map form (merge keys resolved by yaml.v3) or its
// KEY=VALUE list form.
type environment map[string]string

func (e *environment) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.SequenceNode {
		var items []string
		if err := n.Decode(&items); err != nil {
			return err
		}
		*e = environment{}
		for _, it := range items {
			k, v, _ := strings.Cut(it, "=")
			(*e)[k] = v
		}
		return nil
	}
	var m map[string]*string // null values: passed through from the shell
	if err := n.Decode(&m); err != nil {
		return err
	}
	*e = environment{}
	for k, v := range m {
		if v == nil {
			(*e)[k] = ""
		} else {
			(*e)[k] = *v
		}
	}
	return nil
}

// dependsOn is compose's list form (condition service_started) or map form.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	if n.Kind == yaml.SequenceNode {
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, s := range names {
			(*d)[s] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for s, c := range m {
		if c.Condition == "" {
			c.Condition = "service_started"
		}
		(*d)[s] = c.Condition
	}
	return nil
}

// check returns every way the compose file, Dockerfile and CLI disagree, and
// every default in the compose file that is unsafe beyond a laptop. repo is
// the repository, for the files compose mounts.
func check(composeYAML, dockerfile, mainGo []byte, repo fs.FS) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	var cf composeFile
	if err := yaml.Unmarshal(composeYAML, &cf); err != nil {
		return []error{fmt.Errorf("docker-compose.yml: %w", err)}
	}
	for _, name := range requiredServices {
		if _, ok := cf.Services[name]; !ok {
			fail("docker-compose.yml: service %q is missing", name)
		}
	}
	for _, name := range sortedKeys(cf.Services) {
		for dep := range cf.Services[name].DependsOn {
			if _, ok := cf.Services[dep]; !ok {
				fail("service %s: depends_on names unknown service %q", name, dep)
			}
		}
	}

	if w, ok := cf.Services["worker"]; ok {
		if w.Deploy.Replicas == nil || *w.Deploy.Replicas != 3 {
			fail("service worker: want deploy.replicas 3, got %v", deref(w.Deploy.Replicas))
		}
	}

	for _, name := range mustRunAfterMigrate {
		s, ok := cf.Services[name]
		if !ok {
			continue
		}
		if c := s.DependsOn["migrate"]; c != "service_completed_successfully" {
			fail("service %s: want depends_on migrate with condition service_completed_successfully, got %q", name, c)
		}
	}

	for _, name := range sortedKeys(mustSet) {
		s, ok := cf.Services[name]
		if !ok {
			continue
		}
		for _, k := range mustSet[name] {
			v, ok := s.Environment[k]
			switch {
			case !ok || interpolate(v) == "":
				fail("service %s: %s is not set (its default is a loopback address, or off)", name, k)
			case strings.Contains(v, "127.0.0.1") || strings.Contains(v, "localhost"):
				fail("service %s: %s=%q is a loopback address, unreachable across containers", name, k, v)
			}
		}
	}

	// Hookflow services run a real subcommand.
	registered := registeredCommands(mainGo)
	hookflowServices := 0
	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		if !isHookflow(s) {
			continue
		}
		hookflowServices++
		if len(s.Command) == 0 {
			fail("service %s: a hookflow service needs a command (the image's default only prints help)", name)
			continue
		}
		sub := s.Command[0]
		if !subcommands[sub] {
			fail("service %s: command %q is not a hookflow subcommand (%s)", name, sub, strings.Join(sortedKeys(subcommands), ", "))
		} else if !registered[sub] {
			fail("service %s: subcommand %q is not registered in cmd/hookflow/main.go (registered: %s)", name, sub, strings.Join(sortedKeys(registered), ", "))
		}
		if b, ok := s.Build.(map[string]any); ok {
			if c, _ := b["context"].(string); c != "." {
				fail("service %s: build context %q, want \".\" (the repository root)", name, c)
			}
			if d, _ := b["dockerfile"].(string); d != "" && d != "Dockerfile" {
				fail("service %s: build dockerfile %q, want Dockerfile", name, d)
			}
		}
	}
	if hookflowServices == 0 {
		fail("docker-compose.yml: no hookflow service (build: or image hookflow) found")
	}

	// Every HOOKFLOW_* variable is a real setting, not a dev-only one, and
	// its value (with ${VAR:-default} taken at its default) parses.
	settings := map[string]config.Setting{}
	for _, s := range config.Settings() {
		settings[s.Env] = s
	}
	checkEnv := func(where string, env map[string]string) {
		var names []string
		values := map[string]string{}
		for _, k := range sortedKeys(env) {
			if !strings.HasPrefix(k, "HOOKFLOW_") {
				continue
			}
			s, ok := settings[k]
			switch {
			case !ok:
				fail("%s: %s is not a hookflow setting (config.Settings)", where, k)
			case strings.HasPrefix(s.Help, "dev only"):
				fail("%s: %s is read by hookflow dev only", where, k)
			default:
				names = append(names, k)
				values[k] = interpolate(env[k])
			}
		}
		if len(names) == 0 {
			return
		}
		getenv := func(k string) string { return values[k] }
		if _, _, err := config.Load("compose", "", names, nil, getenv, nil, io.Discard); err != nil {
			fail("%s: %v", where, err)
		}
	}
	for _, name := range sortedKeys(cf.Services) {
		checkEnv("service "+name, cf.Services[name].Environment)
	}
	// Extension fields (the shared environment anchor) on their own, so a
	// name there is checked even if no service merged it.
	extensions := extensionEnvs(composeYAML)
	for _, k := range sortedKeys(extensions) {
		checkEnv(k, extensions[k])
	}

	errs = append(errs, checkExposure(cf, extensions, repo)...)
	errs = append(errs, checkEnvExample(composeYAML, repo)...)
	errs = append(errs, checkStartup(cf)...)
	goMod, err := fs.ReadFile(repo, "go.mod")
	if err != nil {
		return append(errs, err)
	}
	errs = append(errs, checkDockerfile(dockerfile, goMod)...)
	return errs
}

// registeredCommands finds the subcommand names in main.go: the quoted keys
// of the commands() map, as in `"api": {...}`.
func registeredCommands(mainGo []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*"([a-z][a-z0-9-]*)"\s*:`).FindAllSubmatch(mainGo, -1) {
		out[string(m[1])] = true
	}
	return out
}

func isHookflow(s service) bool {
	if s.Build != nil {
		return true
	}
	img := s.Image
	if i := strings.LastIndex(img, ":"); i > strings.LastIndex(img, "/") {
		img = img[:i]
	}
	return path.Base(img) == "hookflow"
}

// extensionEnvs returns the compose file's top-level x- fields that are maps
// (the shared environment anchor), with their values as strings.
func extensionEnvs(composeYAML []byte) map[string]map[string]string {
	out := map[string]map[string]string{}
	var top map[string]any
	if err := yaml.Unmarshal(composeYAML, &top); err != nil {
		return out
	}
	for k, v := range top {
		if m, ok := v.(map[string]any); ok && strings.HasPrefix(k, "x-") {
			env := map[string]string{}
			for ek, ev := range m {
				env[ek] = fmt.Sprint(ev)
			}
			out[k] = env
		}
	}
	return out
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}`)

// requiredStandIn is what interpolate puts for ${VAR:?message}: compose
// refuses to start without VAR, so some value the operator chose is there.
const requiredStandIn = "required"

// interpolate resolves compose's ${VAR}, ${VAR:-default} and ${VAR-default}
// as if VAR were unset, ${VAR:?message} as requiredStandIn, and $$ to $.
func interpolate(v string) string {
	v = interpolation.ReplaceAllStringFunc(v, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		switch sub[2] {
		case "-", ":-":
			return sub[3]
		case ":?":
			return requiredStandIn
		}
		return ""
	})
	return strings.ReplaceAll(v, "$$", "$")
}

// deployTag is the build tag that leaves the dev-only commands, and the
// embedded Temporal server and Web UI with them, out of the binary
// (cmd/hookflow/commands_deploy.go).
const deployTag = "deploy"

var goDirective = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)

// checkDockerfile asserts the image is the deploy build of ./cmd/hookflow,
// without cgo, by the Go version go.mod names, and runs the binary as a
// non-root user.
func checkDockerfile(dockerfile, goMod []byte) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("Dockerfile: "+format, args...)) }

	type instr struct{ op, args string }
	var global []instr // before the first FROM: ARGs for the FROM lines
	var stages [][]instr
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(dockerfile)))
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		op, args, _ := strings.Cut(line, " ")
		op = strings.ToUpper(op)
		in := instr{op, strings.TrimSpace(args)}
		switch {
		case op == "FROM":
			stages = append(stages, []instr{in})
		case len(stages) == 0:
			global = append(global, in)
		default:
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	if len(stages) < 2 {
		fail("want a multi-stage build (builder and runtime), found %d stage(s)", len(stages))
		return errs
	}

	args := map[string]string{} // ARG defaults, for ${NAME} in FROM
	for _, in := range global {
		if in.op == "ARG" {
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = strings.Trim(v, `"`)
		}
	}
	built, cgoOff, tagged := false, false, false
	var builderImage string
	for _, stage := range stages[:len(stages)-1] {
		for _, in := range stage {
			if (in.op == "ENV" || in.op == "ARG") && strings.Contains(in.args, "CGO_ENABLED=0") {
				cgoOff = true
			}
			if in.op != "RUN" || !strings.Contains(in.args, "go build") {
				continue
			}
			if strings.Contains(in.args, "CGO_ENABLED=0") {
				cgoOff = true
			}
			fields := strings.Fields(in.args)
			hookflow := false
			for _, f := range fields {
				hookflow = hookflow || f == "./cmd/hookflow"
			}
			if !hookflow {
				continue
			}
			built = true
			builderImage = strings.Fields(stage[0].args)[0]
			tagged = tagged || slices.Contains(buildTags(fields), deployTag)
		}
	}
	if !built {
		fail("no builder RUN does `go build ... ./cmd/hookflow`")
	} else if !tagged {
		fail("the builder's `go build ... ./cmd/hookflow` has no -tags %s: the image would carry the embedded Temporal server and Web UI (hookflow dev), which no deployed process runs", deployTag)
	}

	// The builder's Go is go.mod's: the golang image keeps GOTOOLCHAIN=local,
	// so an older toolchain refuses go.mod instead of fetching a newer one.
	want := ""
	if m := goDirective.FindSubmatch(goMod); m != nil {
		want = string(m[1])
	}
	if built {
		image := os.Expand(builderImage, func(k string) string { return args[k] })
		repo, tag, _ := strings.Cut(image, ":")
		version, _, _ := strings.Cut(tag, "-")
		switch {
		case path.Base(repo) != "golang":
			fail("the builder stage is FROM %s; want the golang image at go.mod's version", builderImage)
		case version != want:
			fail("the builder is FROM %s, Go %q, but go.mod says go %s: pin ARG GO_VERSION=%s (a floating tag can be older, and GOTOOLCHAIN=local will not fetch a newer one)",
				builderImage, version, want, want)
		}
	}
	if !cgoOff {
		fail("CGO_ENABLED=0 is not set for the build")
	}

	final := stages[len(stages)-1]
	var user, entrypoint string
	copied := false
	for _, in := range final {
		switch in.op {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			if strings.Contains(in.args, "--from=") && strings.HasSuffix(in.args, " /usr/local/bin/hookflow") {
				copied = true
			}
		}
	}
	if !copied {
		fail("the runtime stage does not COPY --from the builder to /usr/local/bin/hookflow")
	}
	if entrypoint != `["/usr/local/bin/hookflow"]` {
		fail(`want ENTRYPOINT ["/usr/local/bin/hookflow"], got %q`, entrypoint)
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		fail("the runtime stage must run as a non-root USER, got %q", user)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func deref(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}

// buildTags returns the tags a `go build` command line sets (-tags a,b,
// -tags=a, --tags "a b").
func buildTags(fields []string) []string {
	var tags []string
	for i, f := range fields {
		var v string
		switch {
		case f == "-tags" || f == "--tags":
			if i+1 < len(fields) {
				v = fields[i+1]
			}
		case strings.HasPrefix(f, "-tags="), strings.HasPrefix(f, "--tags="):
			_, v, _ = strings.Cut(f, "=")
		default:
			continue
		}
		tags = append(tags, strings.FieldsFunc(strings.Trim(v, `"'`), func(r rune) bool { return r == ',' || r == ' ' })...)
	}
	return tags
}
