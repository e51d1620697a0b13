package composecheck

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The defaults docker-compose.yml must keep beyond a laptop.

// tokenRequiredBy are the subcommands that refuse to start without
// HOOKFLOW_API_TOKEN: compose must demand it rather than supply a default
// anyone can read in this file. No other hookflow service may carry it: the
// worker and the relay never use it, and the worker is the process that
// talks to untrusted hosts.
var tokenRequiredBy = map[string]bool{"api": true}

// loopbackByDefault are the services whose ports are published on
// 127.0.0.1 unless the operator says otherwise (${VAR:-127.0.0.1}): the API
// speaks plain HTTP, and the reference receiver answers GET
// /correlations/{id} to anyone.
var loopbackByDefault = []string{"api", "receiver"}

// passwordVariable names an environment variable that holds a password.
var passwordVariable = regexp.MustCompile(`(?i)(PASSWORD|PWD)$`)

// requiredVariable is the only accepted value of a password: a variable
// compose demands, with a message saying what it is.
var requiredVariable = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*:\?\s*[^}\s][^}]*\}$`)

// envExample is the operator's template of the variables compose reads.
const envExample = ".env.example"

// requiredToken is the only accepted form: compose refuses to start while the
// variable is unset or empty, and says why.
var requiredToken = regexp.MustCompile(`^\$\{HOOKFLOW_API_TOKEN:\?\s*[^}\s][^}]*\}$`)

// loopbackOnly are the services that publish ports on 127.0.0.1 only: Temporal's
// frontend and Web UI have no authentication, and whoever reaches them can
// read payloads and terminate workflows.
var loopbackOnly = []string{"temporal", "temporal-ui"}

// temporalFrontendPort is published on loopback only, whichever service
// publishes it.
const temporalFrontendPort = 7233

// postgresService is the compose service (and host name) of the database
// whose init scripts create hookflow's role.
const postgresService = "postgresql"

// initDir is where the postgres image looks for init scripts.
const initDir = "/docker-entrypoint-initdb.d/"

// privateTargets: the allowlist of exact host:port targets replaces the
// switch that allowed every private address.
const (
	oldPrivateSwitch   = "HOOKFLOW_ALLOW_PRIVATE_TARGETS"
	privateAllowlist   = "HOOKFLOW_PRIVATE_TARGET_ALLOWLIST"
	receiverService    = "receiver"
	defaultReceiverURL = "receiver:8090"
)

// deliverToReceiver are the services that dial the reference receiver (the
// API validates endpoint URLs with the workers' rule).
var deliverToReceiver = []string{"api", "worker"}

// checkExposure returns every default in the compose file that is unsafe
// beyond a laptop: an API token with a default, Temporal published beyond
// loopback, a hookflow DSN on the superuser or on a role no init script
// creates, the old private-targets switch, and /metrics on the API's port or
// published beyond loopback.
func checkExposure(cf composeFile, extensions map[string]map[string]string, repo fs.FS) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		if !isHookflow(s) || len(s.Command) == 0 {
			continue
		}
		v, set := s.Environment["HOOKFLOW_API_TOKEN"]
		switch {
		case tokenRequiredBy[s.Command[0]] && !requiredToken.MatchString(v):
			fail("service %s: HOOKFLOW_API_TOKEN=%q, want \"${HOOKFLOW_API_TOKEN:?<why>}\": `hookflow %s` refuses to start without a token, and a default is one anyone who reads this file knows",
				name, v, s.Command[0])
		case !tokenRequiredBy[s.Command[0]] && set:
			fail("service %s: HOOKFLOW_API_TOKEN is set, but `hookflow %s` never uses the bootstrap admin token: leave it to the api", name, s.Command[0])
		}
	}

	// No password has a default or a literal value: the superuser's
	// included, which Temporal and the database setup use.
	for _, name := range sortedKeys(cf.Services) {
		env := cf.Services[name].Environment
		for _, k := range sortedKeys(env) {
			if passwordVariable.MatchString(k) && !requiredVariable.MatchString(env[k]) {
				fail("service %s: %s=%q, want \"${VAR:?<why>}\": a password with a default is one anyone who reads this file knows", name, k, env[k])
			}
		}
	}

	for _, name := range loopbackByDefault {
		for _, p := range cf.Services[name].Ports {
			if p.Err == nil && !isLoopback(p.HostIP) {
				fail("service %s: ports %q publishes on every interface unless the operator says otherwise; want \"${VAR:-127.0.0.1}:%s:%s\"",
					name, p.Raw, p.hostPart(), p.Target)
			}
		}
	}

	errs = append(errs, checkPorts(cf)...)
	errs = append(errs, checkDatabaseRoles(cf, repo)...)

	// The old switch is gone everywhere, the shared anchor included.
	for _, name := range sortedKeys(cf.Services) {
		if _, ok := cf.Services[name].Environment[oldPrivateSwitch]; ok {
			fail("service %s: %s is set; it allowed every private address and is replaced by %s (exact host:port targets)", name, oldPrivateSwitch, privateAllowlist)
		}
	}
	for _, k := range sortedKeys(extensions) {
		if _, ok := extensions[k][oldPrivateSwitch]; ok {
			fail("%s: %s is set; it allowed every private address and is replaced by %s (exact host:port targets)", k, oldPrivateSwitch, privateAllowlist)
		}
	}
	receiver := defaultReceiverURL
	if r, ok := cf.Services[receiverService]; ok {
		if _, port, err := net.SplitHostPort(interpolate(r.Environment["HOOKFLOW_RECEIVER_ADDR"])); err == nil && port != "" {
			receiver = net.JoinHostPort(receiverService, port)
		}
	}
	for _, name := range deliverToReceiver {
		s, ok := cf.Services[name]
		if !ok {
			continue
		}
		v := interpolate(s.Environment[privateAllowlist])
		listed := false
		for _, entry := range strings.Split(v, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			if !exactHostPort(entry) {
				fail("service %s: %s entry %q is not an exact host:port", name, privateAllowlist, entry)
			}
			listed = listed || entry == receiver
		}
		if !listed {
			fail("service %s: %s=%q does not list %s, the reference receiver on the compose network", name, privateAllowlist, v, receiver)
		}
	}

	// /metrics on its own listener, never on the API's port, and not
	// published beyond this machine.
	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		raw, ok := s.Environment["HOOKFLOW_METRICS_ADDR"]
		if !isHookflow(s) || !ok || interpolate(raw) == "" {
			continue
		}
		_, metricsPort, err := net.SplitHostPort(interpolate(raw))
		if err != nil {
			fail("service %s: HOOKFLOW_METRICS_ADDR=%q: %v", name, raw, err)
			continue
		}
		if api, ok := s.Environment["HOOKFLOW_API_ADDR"]; ok {
			if _, apiPort, err := net.SplitHostPort(interpolate(api)); err == nil && apiPort == metricsPort {
				fail("service %s: HOOKFLOW_METRICS_ADDR=%q is on the API's port (HOOKFLOW_API_ADDR=%q); /metrics has its own listener", name, raw, api)
			}
		}
		n, err := strconv.Atoi(metricsPort)
		if err != nil {
			continue
		}
		for _, p := range s.Ports {
			if p.covers(n) && !isLoopback(p.HostIP) {
				fail("service %s: ports %q publishes /metrics (port %d) beyond this machine; leave it unpublished or bind 127.0.0.1", name, p.Raw, n)
			}
		}
	}
	return errs
}

// checkPorts returns every port of Temporal (and its frontend's port on any
// service) that is published beyond loopback.
func checkPorts(cf composeFile) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	only := map[string]bool{}
	for _, name := range loopbackOnly {
		only[name] = true
	}
	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		if only[name] && s.NetworkMode == "host" {
			fail("service %s: network_mode host publishes every port it listens on; want ports bound to 127.0.0.1", name)
		}
		for _, p := range s.Ports {
			if p.Err != nil {
				fail("service %s: %v", name, p.Err)
				continue
			}
			if isLoopback(p.HostIP) || (!only[name] && !p.covers(temporalFrontendPort)) {
				continue
			}
			on := "every interface"
			if p.HostIP != "" {
				on = p.HostIP
			}
			fail("service %s: ports %q publishes on %s; want 127.0.0.1 only (%q): whoever reaches Temporal can read payloads and terminate workflows",
				name, p.Raw, on, "127.0.0.1:"+p.hostPart()+":"+p.Target)
		}
	}
	return errs
}

// checkDatabaseRoles returns every DSN that connects as a Postgres superuser,
// and every hookflow DSN to the compose database whose role or database no
// init script of the postgres service creates (that role owning it), and every
// file a service mounts from the repository that is missing.
func checkDatabaseRoles(cf composeFile, repo fs.FS) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	superusers := map[string]bool{"postgres": true}
	for _, name := range sortedKeys(cf.Services) {
		if u := interpolate(cf.Services[name].Environment["POSTGRES_USER"]); u != "" {
			superusers[u] = true
		}
	}

	var scripts []string
	for _, name := range sortedKeys(cf.Services) {
		for _, m := range cf.Services[name].Volumes {
			src, inRepo := m.repoPath()
			if !inRepo {
				continue
			}
			b, err := fs.ReadFile(repo, src)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					err = errors.New("no such file in the repository")
				}
				fail("service %s: volume %q: %s: %v", name, m.Raw, src, err)
				continue
			}
			if name == postgresService && strings.HasPrefix(m.Target, initDir) {
				scripts = append(scripts, string(b))
			}
		}
	}
	roles, owners := map[string]bool{}, map[string]string{}
	for _, sc := range scripts {
		for _, m := range createRole.FindAllStringSubmatch(sc, -1) {
			roles[strings.ToLower(m[1])] = true
		}
		for _, m := range createDatabase.FindAllStringSubmatch(sc, -1) {
			owners[strings.ToLower(m[1])] = strings.ToLower(m[2])
		}
	}
	if _, ok := cf.Services[postgresService]; ok && len(scripts) == 0 {
		fail("service %s: mounts no init script from the repository in %s (it creates hookflow's role and databases)", postgresService, initDir)
	}

	for _, name := range sortedKeys(cf.Services) {
		s := cf.Services[name]
		for _, k := range sortedKeys(s.Environment) {
			dsn, ok := parseDSN(interpolate(s.Environment[k]))
			if !ok {
				continue
			}
			if superusers[dsn.user] {
				fail("service %s: %s connects as %q, a Postgres superuser; hookflow's services use their own role", name, k, dsn.user)
				continue
			}
			if !isHookflow(s) || dsn.host != postgresService {
				continue
			}
			switch {
			case dsn.user == "":
				fail("service %s: %s names no user", name, k)
			case !roles[dsn.user]:
				fail("service %s: %s connects as %q, a role no init script of service %s creates", name, k, dsn.user, postgresService)
			case owners[dsn.database] != dsn.user:
				fail("service %s: %s uses database %q, which no init script of service %s creates with OWNER %s (the role must own the tables it migrates)",
					name, k, dsn.database, postgresService, dsn.user)
			}
		}
	}
	return errs
}

var (
	createRole     = regexp.MustCompile(`(?i)\bCREATE\s+(?:ROLE|USER)\s+"?([a-z_][a-z0-9_$]*)`)
	createDatabase = regexp.MustCompile(`(?i)\bCREATE\s+DATABASE\s+"?([a-z_][a-z0-9_$]*)"?\s+(?:WITH\s+)?OWNER\s*=?\s*"?([a-z_][a-z0-9_$]*)`)
	keywordUser    = regexp.MustCompile(`(?:^|\s)user\s*=\s*'?([^'\s]*)`)
	keywordHost    = regexp.MustCompile(`(?:^|\s)host\s*=\s*'?([^'\s]*)`)
	keywordDB      = regexp.MustCompile(`(?:^|\s)dbname\s*=\s*'?([^'\s]*)`)
	keywordPool    = regexp.MustCompile(`(?:^|\s)pool_max_conns\s*=\s*'?([^'\s]*)`)
)

// dsn is what the checks read from a connection string; poolMaxConns is
// pgx's pool_max_conns, "" when unset.
type dsn struct{ user, host, database, poolMaxConns string }

// parseDSN reads a Postgres connection string in URL or keyword form; ok is
// false for any other value.
func parseDSN(v string) (d dsn, ok bool) {
	if strings.HasPrefix(v, "postgres://") || strings.HasPrefix(v, "postgresql://") {
		u, err := url.Parse(v)
		if err != nil {
			return d, false
		}
		d = dsn{user: u.User.Username(), host: u.Hostname(), database: strings.TrimPrefix(u.Path, "/"), poolMaxConns: u.Query().Get("pool_max_conns")}
		if q := u.Query().Get("user"); q != "" {
			d.user = q
		}
		return d, true
	}
	if !strings.Contains(v, "=") || (!keywordHost.MatchString(v) && !keywordDB.MatchString(v)) {
		return d, false
	}
	get := func(re *regexp.Regexp) string {
		if m := re.FindStringSubmatch(v); m != nil {
			return m[1]
		}
		return ""
	}
	return dsn{user: get(keywordUser), host: get(keywordHost), database: get(keywordDB), poolMaxConns: get(keywordPool)}, true
}

// exactHostPort reports whether entry names one host and one numeric port.
func exactHostPort(entry string) bool {
	host, port, err := net.SplitHostPort(entry)
	if err != nil || host == "" || strings.ContainsAny(host, "*?/") {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n < 65536
}

func isLoopback(hostIP string) bool {
	ip := net.ParseIP(hostIP)
	return ip != nil && ip.IsLoopback()
}

// portMapping is one entry of a service's ports, in the short syntax
// ("[ip:][published:]target[/protocol]", or a bare number) or the long one
// (target, published, host_ip). An empty HostIP publishes on every interface.
type portMapping struct {
	Raw       string
	HostIP    string
	Published string
	Target    string
	Err       error // what could not be read
}

func (p *portMapping) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*p = parsePort(interpolate(n.Value))
		return nil
	}
	var long struct {
		Target    any    `yaml:"target"`
		Published any    `yaml:"published"`
		HostIP    string `yaml:"host_ip"`
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	str := func(v any) string {
		if v == nil {
			return ""
		}
		return interpolate(fmt.Sprint(v))
	}
	*p = portMapping{HostIP: interpolate(long.HostIP), Published: str(long.Published), Target: str(long.Target)}
	p.Raw = fmt.Sprintf("host_ip %q, published %q, target %q", p.HostIP, p.Published, p.Target)
	return nil
}

func parsePort(raw string) portMapping {
	p := portMapping{Raw: raw}
	s, _, _ := strings.Cut(raw, "/")
	if rest, ok := strings.CutPrefix(s, "["); ok { // [IPv6]:published:target
		ip, after, ok := strings.Cut(rest, "]")
		published, target, ok2 := strings.Cut(strings.TrimPrefix(after, ":"), ":")
		if !ok || !ok2 {
			p.Err = fmt.Errorf("ports %q: want [ip]:published:target", raw)
			return p
		}
		p.HostIP, p.Published, p.Target = ip, published, target
		return p
	}
	parts := strings.Split(s, ":")
	switch len(parts) {
	case 1:
		p.Target = parts[0]
	case 2:
		p.Published, p.Target = parts[0], parts[1]
	case 3:
		p.HostIP, p.Published, p.Target = parts[0], parts[1], parts[2]
	default:
		p.Err = fmt.Errorf("ports %q: want [ip:][published:]target", raw)
	}
	return p
}

// covers reports whether the container port or range the mapping targets
// includes port.
func (p portMapping) covers(port int) bool {
	lo, hi, isRange := strings.Cut(p.Target, "-")
	if !isRange {
		hi = lo
	}
	l, err1 := strconv.Atoi(lo)
	h, err2 := strconv.Atoi(hi)
	return err1 == nil && err2 == nil && l <= port && port <= h
}

// hostPart is the published port as it would be written, or the target's
// when compose would pick one.
func (p portMapping) hostPart() string {
	if p.Published != "" {
		return p.Published
	}
	return p.Target
}

// mount is one entry of a service's volumes, in the short syntax
// ("source:target[:mode]") or the long one (source, target).
type mount struct {
	Raw    string
	Source string
	Target string
}

func (m *mount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		v := interpolate(n.Value)
		*m = mount{Raw: v}
		parts := strings.Split(v, ":")
		if len(parts) == 1 {
			m.Target = parts[0]
		} else {
			m.Source, m.Target = parts[0], parts[1]
		}
		return nil
	}
	var long struct {
		Source string `yaml:"source"`
		Target string `yaml:"target"`
	}
	if err := n.Decode(&long); err != nil {
		return err
	}
	*m = mount{Source: interpolate(long.Source), Target: interpolate(long.Target)}
	m.Raw = m.Source + ":" + m.Target
	return nil
}

// repoPath is the mount's source as a path in the repository, for a bind
// mount relative to the compose file that stays inside it.
func (m mount) repoPath() (string, bool) {
	if !strings.HasPrefix(m.Source, "./") && !strings.HasPrefix(m.Source, "../") && m.Source != "." {
		return "", false
	}
	p := path.Clean(m.Source)
	return p, fs.ValidPath(p) && p != "."
}

// checkEnvExample returns every variable compose demands (${VAR:?…}) that
// .env.example does not set out as VAR=, and every one with a default
// (${VAR:-…}) it does not mention: the file is where an operator learns
// what to set.
func checkEnvExample(composeYAML []byte, repo fs.FS) []error {
	example, err := fs.ReadFile(repo, envExample)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", envExample, err)}
	}
	var errs []error
	seen := map[string]bool{}
	// $$ is a literal $ (a shell's ${ip:-…} inside a command), not compose's.
	for _, m := range interpolation.FindAllStringSubmatch(strings.ReplaceAll(string(composeYAML), "$$", ""), -1) {
		name, op := m[1], m[2]
		if seen[name+op] {
			continue
		}
		seen[name+op] = true
		set := regexp.MustCompile(`(?m)^` + name + `=`).Match(example)
		mentioned := regexp.MustCompile(`(?m)^#?` + name + `=`).Match(example)
		switch {
		case op == ":?" && !set:
			errs = append(errs, fmt.Errorf("%s: docker-compose.yml demands %s, but no line of %s sets it out as %s=", envExample, name, envExample, name))
		case (op == ":-" || op == "-") && !mentioned:
			errs = append(errs, fmt.Errorf("%s: docker-compose.yml reads %s (with a default), but %s does not mention it (#%s=…)", envExample, name, envExample, name))
		}
	}
	return errs
}
