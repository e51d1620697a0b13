package composecheck

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
)

// What makes the first `docker compose up` come up: Postgres takes every
// connection the stack may open, readiness means TCP, the one-shots retry and
// are waited out, and the receiver waits in its profile until its secret is
// there.

// Connections the budget keeps beside the pools: the one-shots' and an
// operator's sessions (hookflow-db's psql, temporal-sql-tool, psql by hand),
// and Postgres's superuser_reserved_connections (3 by default), which the
// hookflow role cannot use.
const (
	adminHeadroom     = 10
	superuserReserved = 3
)

// Temporal's server image runs temporal.DefaultServices (frontend, history,
// matching, worker) in one process, and each service opens its own main and
// visibility pools, sized by SQL_MAX_CONNS and SQL_VIS_MAX_CONNS (the
// image's config template defaults them to 20 and 10).
const (
	temporalServices        = 4
	temporalMainConnsDflt   = 20
	temporalVisConnsDflt    = 10
	temporalMainConnsEnv    = "SQL_MAX_CONNS"
	temporalVisConnsEnv     = "SQL_VIS_MAX_CONNS"
	postgresDefaultMaxConns = 100
)

// oneShots are the services that set something up and exit: hookflow's role
// and databases, Temporal's schema, its namespace and search attributes, and
// hookflow's schema.
var oneShots = []string{"hookflow-db", "temporal-admin-tools", "temporal-setup", "migrate"}

// maxOneShotRetries bounds a one-shot's `restart: on-failure:N`: a setup that
// still fails after that many tries should stop `up` with its error.
const maxOneShotRetries = 20

// receiverSecret is the reference receiver's setting that only an endpoint
// registration can supply.
const receiverSecret = "HOOKFLOW_RECEIVER_SECRET"

var maxConnections = regexp.MustCompile(`^(?:-c|--)?max[_-]connections=(\d+)$`)

// checkStartup returns every way the compose file could fail to come up the
// first time, or fall over once it has: a connection budget Postgres cannot
// hold, a healthcheck that passes before Postgres takes TCP connections,
// one-shots that neither retry nor are waited out, and a receiver started
// before it can run.
func checkStartup(cf composeFile) []error {
	var errs []error
	errs = append(errs, checkConnectionBudget(cf)...)
	errs = append(errs, checkPostgresHealth(cf)...)
	errs = append(errs, checkOneShots(cf)...)
	errs = append(errs, checkReceiverProfile(cf)...)
	return errs
}

// checkConnectionBudget: Postgres's max_connections holds every pool at its
// largest (hookflow's pool_max_conns times replicas, the API's two pools
// sharing its pool_max_conns; Temporal's pools) plus the headroom.
func checkConnectionBudget(cf composeFile) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	pg, ok := cf.Services[postgresService]
	if !ok {
		return nil
	}
	limit := postgresDefaultMaxConns
	for _, arg := range pg.Command {
		if m := maxConnections.FindStringSubmatch(arg); m != nil {
			limit, _ = strconv.Atoi(m[1])
		}
	}

	var terms []string
	sum := 0
	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		replicas := 1
		if s.Deploy.Replicas != nil {
			replicas = *s.Deploy.Replicas
		}
		if isHookflow(s) {
			for _, k := range sortedKeys(s.Environment) {
				d, ok := parseDSN(interpolate(s.Environment[k]))
				if !ok || d.host != postgresService {
					continue
				}
				n, err := strconv.Atoi(d.poolMaxConns)
				if err != nil || n < 1 {
					fail("service %s: %s has no pool_max_conns (got %q); without it the pool is 32 (app.DefaultMaxConns) and nothing sizes %s's max_connections for it",
						name, k, d.poolMaxConns, postgresService)
					continue
				}
				if len(s.Command) > 0 && s.Command[0] == "api" {
					// The API splits its pool size between its base and
					// request pools, each with a floor (app.APIConns).
					base, requests := app.APIConns(int32(n))
					n = int(base + requests)
				}
				sum += replicas * n
				terms = append(terms, fmt.Sprintf("%s %dx%d", name, replicas, n))
			}
			continue
		}
		if isTemporalServer(s) {
			main := atoiOr(interpolate(s.Environment[temporalMainConnsEnv]), temporalMainConnsDflt)
			vis := atoiOr(interpolate(s.Environment[temporalVisConnsEnv]), temporalVisConnsDflt)
			n := replicas * temporalServices * (main + vis)
			sum += n
			terms = append(terms, fmt.Sprintf("%s %dx%dx(%d+%d)", name, replicas, temporalServices, main, vis))
		}
	}
	need := sum + adminHeadroom + superuserReserved
	if limit < need {
		fail("service %s: max_connections=%d, but the stack may open %d (%s, + %d headroom + %d superuser_reserved_connections); set command: [\"postgres\", \"-c\", \"max_connections=N\"] with N >= %d, or shrink the pools",
			postgresService, limit, need, strings.Join(terms, " + "), adminHeadroom, superuserReserved, need)
	}
	return errs
}

// isTemporalServer reports whether s is a Temporal server on the compose
// Postgres (the server image renders its config from DB and POSTGRES_SEEDS).
func isTemporalServer(s service) bool {
	return strings.HasPrefix(interpolate(s.Environment["DB"]), "postgres") &&
		interpolate(s.Environment["POSTGRES_SEEDS"]) == postgresService
}

func atoiOr(s string, dflt int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return dflt
}

// checkPostgresHealth: pg_isready over TCP. Over the Unix socket it answers
// while the image's first-start init runs its temporary server, which takes
// no TCP connection, so healthy would come before anyone can connect.
func checkPostgresHealth(cf composeFile) []error {
	pg, ok := cf.Services[postgresService]
	if !ok {
		return nil
	}
	test := strings.Fields(strings.Join(pg.Healthcheck.Test, " "))
	isready, host := false, ""
	for i, f := range test {
		switch {
		case f == "pg_isready":
			isready = true
		case (f == "-h" || f == "--host") && i+1 < len(test):
			host = test[i+1]
		case strings.HasPrefix(f, "--host="):
			host = strings.TrimPrefix(f, "--host=")
		case strings.HasPrefix(f, "-h") && len(f) > 2:
			host = strings.TrimPrefix(f, "-h")
		}
	}
	if !isready || host == "" || strings.HasPrefix(host, "/") {
		return []error{fmt.Errorf("service %s: healthcheck %q must be pg_isready over TCP (pg_isready -h 127.0.0.1 ...): over the socket it is ready during first-start init, before TCP is",
			postgresService, strings.Join(pg.Healthcheck.Test, " "))}
	}
	return nil
}

// checkOneShots: a one-shot (listed in oneShots, waited on with
// service_completed_successfully, or never restarted) retries a bounded
// number of times (restart: on-failure:N), and whatever depends on it waits
// for it to complete successfully. Docker marks a container it will restart
// "restarting", not "exited", so compose waits through the retries.
func checkOneShots(cf composeFile) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	oneShot := map[string]bool{}
	for _, name := range oneShots {
		oneShot[name] = true
	}
	for _, name := range sortedKeys(cf.Services) {
		if cf.Services[name].Restart == "no" {
			oneShot[name] = true
		}
		for dep, cond := range cf.Services[name].DependsOn {
			if cond == "service_completed_successfully" {
				oneShot[dep] = true
			}
		}
	}
	for _, name := range sortedKeys(oneShot) {
		s, ok := cf.Services[name]
		if !ok {
			continue
		}
		n, ok := strings.CutPrefix(s.Restart, "on-failure:")
		retries, err := strconv.Atoi(n)
		if !ok || err != nil || retries < 1 || retries > maxOneShotRetries {
			fail("service %s: a one-shot that others wait out needs restart: on-failure:N (1..%d), got %q: without it a transient failure stops the whole `up`, and with always or unless-stopped it never completes",
				name, maxOneShotRetries, s.Restart)
		}
	}
	for _, name := range sortedKeys(cf.Services) {
		for _, dep := range sortedKeys(cf.Services[name].DependsOn) {
			if c := cf.Services[name].DependsOn[dep]; oneShot[dep] && c != "service_completed_successfully" {
				fail("service %s: depends_on %s with condition %s; %s is a one-shot, wait for service_completed_successfully", name, dep, c, dep)
			}
		}
	}
	return errs
}

// checkReceiverProfile: the reference receiver cannot run until an endpoint
// is registered and its secret set, so a plain `up` leaves it out (a
// profile), and its secret comes from the operator with no default. Compose
// interpolates every service before it applies profiles, so a required
// ${VAR:?...} in a profiled service would stop every `up`: none may use one.
func checkReceiverProfile(cf composeFile) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r, ok := cf.Services[receiverService]; ok {
		if len(r.Profiles) == 0 {
			fail("service %s: not in a profile; it cannot start before an endpoint's secret exists, so a plain `up` would restart it in a loop (profiles: [receiver])", receiverService)
		}
		v, set := r.Environment[receiverSecret]
		if m := interpolation.FindStringSubmatch(v); !set || m == nil || m[0] != v || m[1] != receiverSecret || (m[2] != "" && m[2] != "-" && m[2] != ":-") || m[3] != "" {
			fail("service %s: %s=%q, want \"${%s:-}\": the operator's, from .env, with no default", receiverService, receiverSecret, v, receiverSecret)
		}
	}
	// A variable every `up` demands anyway (HOOKFLOW_DB_PASSWORD) is no new
	// obstacle; one only a profiled service demands is.
	required := func(v string) []string {
		var names []string
		for _, m := range interpolation.FindAllStringSubmatch(v, -1) {
			if strings.HasSuffix(m[2], "?") {
				names = append(names, m[1])
			}
		}
		return names
	}
	always := map[string]bool{}
	for _, s := range cf.Services {
		if len(s.Profiles) == 0 {
			for _, v := range s.Environment {
				for _, k := range required(v) {
					always[k] = true
				}
			}
		}
	}
	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		if len(s.Profiles) == 0 {
			continue
		}
		for _, k := range sortedKeys(s.Environment) {
			for _, v := range required(s.Environment[k]) {
				if !always[v] {
					fail("service %s (profiles %v): %s requires ${%s:?...}; compose interpolates services outside the active profiles too, so every `up` would refuse to start without it",
						name, s.Profiles, k, v)
				}
			}
		}
	}
	return errs
}
