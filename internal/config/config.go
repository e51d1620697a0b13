// Package config holds hookflow's settings: every one an environment variable
// with a flag of the same meaning and a working local default.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/receiver"
)

// Config is every setting of every subcommand. Each subcommand registers the
// subset it uses (see Bind).
type Config struct {
	DatabaseURL       string
	TemporalAddress   string
	TemporalNamespace string
	TaskQueue         string
	APIAddr           string
	APIToken          string
	RecoveryWindow    time.Duration
	DeliveryTimeout   time.Duration
	RepairAfter       time.Duration
	// StatementTimeout bounds each statement an API request runs
	// (HOOKFLOW_STATEMENT_TIMEOUT); at least a millisecond, Postgres's
	// unit for it.
	StatementTimeout time.Duration
	MaxBodyBytes     int64
	// AllowPrivate lets deliveries reach every private target; hookflow dev
	// and the tests set it, no variable does.
	AllowPrivate bool
	// EventMaxHistory is the history length past which an event's
	// workflow continues as new (0: workflows.DefaultEventMaxHistory);
	// the tests and the chaos runs set it low to see it happen
	// (HOOKFLOW_EVENT_MAX_HISTORY).
	EventMaxHistory int
	// HandOverBatch is how long a delivered lane of an event waits for its
	// peers' first attempts before it is handed over without them (0:
	// workflows.HandOverBatch); the tests that count hand-overs set it
	// long, no variable sets it.
	HandOverBatch time.Duration
	// Dev is set by hookflow dev, whose bootstrap token is the well-known
	// dev-token, shorter than the API accepts elsewhere; no variable sets it.
	Dev              bool
	PrivateAllowlist []string
	EventsRateLimit  float64
	// MaxEndpoints and MaxSubscribers cap fan-out.
	MaxEndpoints   int
	MaxSubscribers int
	ReadsRateLimit float64
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (HOOKFLOW_TRUSTED_PROXIES); none, the client is the connection's peer.
	TrustedProxies []netip.Prefix
	// Retention of the ledger; 0 keeps for ever.
	PayloadRetention     time.Duration
	AttemptRetention     time.Duration
	KeyRetention         time.Duration
	CleanerInterval      time.Duration
	ReceiverRetention    time.Duration
	DevTemporalRetention time.Duration
	DataDir              string
	DevTemporalPort      int
	DevUIPort            int
	DevPostgresPort      int
	DevNATSPort          int
	DevWorkers           int
	ReceiverAddr         string
	ReceiverSecrets      string
	ReceiverDatabase     string
	ReceiverStart        receiver.StartPosition
	APIURL               string
	OutboxDatabaseURL    string
	MetricsAddr          string
	// Tenant is the tenant the CLI's API commands act on (an operator
	// key's ?tenant_id=); empty acts on the key's own.
	Tenant string
	// PortalBaseURL is where portal links point (HOOKFLOW_PORTAL_BASE_URL);
	// empty, the API's own address (PortalBase).
	PortalBaseURL string
	// CircuitCloseSuccesses is how many answers in a row close an open
	// circuit (the workers').
	CircuitCloseSuccesses int
}

// Setting describes one variable: its name, flag, default and help.
type Setting struct {
	Env     string
	Flag    string
	Default string
	Help    string
	set     func(c *Config, v string) error
}

// Settings lists every variable hookflow reads, in the order of docs/operability.md's configuration table.
func Settings() []Setting {
	return []Setting{
		{"HOOKFLOW_DATABASE_URL", "database-url", "postgres://postgres@127.0.0.1:5433/hookflow?sslmode=disable", "PostgreSQL DSN of hookflow's own database", str(func(c *Config) *string { return &c.DatabaseURL })},
		{"HOOKFLOW_TEMPORAL_ADDRESS", "temporal-address", "127.0.0.1:7233", "Temporal frontend host:port", hostPort(func(c *Config) *string { return &c.TemporalAddress })},
		{"HOOKFLOW_TEMPORAL_NAMESPACE", "temporal-namespace", "default", "Temporal namespace", nonEmpty(func(c *Config) *string { return &c.TemporalNamespace })},
		{"HOOKFLOW_TASK_QUEUE", "task-queue", "hookflow", "Temporal task queue shared by all workers (they also poll {queue}-sequencers, where the correlations' sequencers run)", nonEmpty(func(c *Config) *string { return &c.TaskQueue })},
		{"HOOKFLOW_API_ADDR", "api-addr", "127.0.0.1:8080", "listen address of the REST API", hostPort(func(c *Config) *string { return &c.APIAddr })},
		{"HOOKFLOW_API_TOKEN", "api-token", "", "api: the bootstrap admin token, a bearer token with every scope to create API keys (required, at least 32 characters; hookflow dev uses dev-token); CLI commands that call the API: the token they send", required(func(c *Config) *string { return &c.APIToken })},
		{"HOOKFLOW_PORTAL_BASE_URL", "portal-base-url", "", "api: the public base URL of the portal page, what a portal session's link starts with (<base>/portal/<tenant>/#code=…), e.g. https://hooks.example.com; never taken from a request's Host (empty: http:// and the address the API listens on, 127.0.0.1 for an unspecified host)", baseURL(func(c *Config) *string { return &c.PortalBaseURL })},
		{"HOOKFLOW_EVENTS_RATE_LIMIT", "events-rate-limit", "1000", "api: POST /v1/events allowed per second per API key, in each API process (bursts of twice as many); past it 429 with Retry-After", positiveFloat(func(c *Config) *float64 { return &c.EventsRateLimit })},
		{"HOOKFLOW_MAX_ENDPOINTS", "max-endpoints", strconv.Itoa(contract.DefaultMaxEndpoints), "api: the most endpoints (not deleted) each tenant holds, unless the tenant's own max_endpoints says otherwise (counted per tenant, so one tenant cannot use up another's); past it POST /v1/endpoints is answered 422 endpoint-limit", intRange(1, math.MaxInt32, func(c *Config) *int { return &c.MaxEndpoints })},
		{"HOOKFLOW_MAX_SUBSCRIBERS", "max-subscribers", strconv.Itoa(contract.DefaultMaxSubscribers), fmt.Sprintf("api, relay: the most endpoints one event may be routed to (at most %d, which keeps an event's workflow input far under Temporal's payload limit); an endpoint whose event_types would make a type's subscribers more is refused, 422 too-many-subscribers; an event subscribed to by more all the same (the setting lowered) is refused at accept and never stored (the relay holds the outbox row and tries again)", contract.MaxSubscribersCeiling), intRange(1, contract.MaxSubscribersCeiling, func(c *Config) *int { return &c.MaxSubscribers })},
		{"HOOKFLOW_READS_RATE_LIMIT", "reads-rate-limit", "100", "api: GET requests on /v1 allowed per second per API key, in each API process (bursts of twice as many); past it 429 with Retry-After", positiveFloat(func(c *Config) *float64 { return &c.ReadsRateLimit })},
		{"HOOKFLOW_TRUSTED_PROXIES", "trusted-proxies", "", "api: CIDRs of the reverse proxies in front of the API, comma separated (e.g. 10.0.0.0/8,127.0.0.1/32): from such a peer the client is the rightmost X-Forwarded-For address that is not one of them; empty, the client is the connection's peer and X-Forwarded-For is ignored. Failed authentications are throttled per client network, so behind a proxy set it", cidrList(func(c *Config) *[]netip.Prefix { return &c.TrustedProxies })},
		{"HOOKFLOW_RECOVERY_WINDOW", "recovery-window", "5m", "how long delivery of a released event is retried before it is dead-lettered (Go duration; set it alike on the API and the workers, which start held events)", positiveDuration(func(c *Config) *time.Duration { return &c.RecoveryWindow })},
		{"HOOKFLOW_DELIVERY_TIMEOUT", "delivery-timeout", "15s", "HTTP timeout of one delivery attempt (Go duration; alike on the API and the workers)", positiveDuration(func(c *Config) *time.Duration { return &c.DeliveryTimeout })},
		{"HOOKFLOW_CIRCUIT_CLOSE_SUCCESSES", "circuit-close-successes", "3", "worker: answers in a row that close an endpoint's open circuit (1 to 100); short of them it is half-open, one probe at a time, so a flapping receiver stays open and its disable_after counts on", intRange(1, 100, func(c *Config) *int { return &c.CircuitCloseSuccesses })},
		{"HOOKFLOW_REPAIR_AFTER", "repair-after", "30s", "api: how long a correlation's next event may sit unchanged, counted from when it became next, before the API's sweep checks its workflow and sequencer, and repairs what a Terminate or Reset broke (Go duration)", positiveDuration(func(c *Config) *time.Duration { return &c.RepairAfter })},
		{"HOOKFLOW_STATEMENT_TIMEOUT", "statement-timeout", "10s", "api: the longest one Postgres statement of an API request may run, a read's or a write's (its connections' statement_timeout; the sweeps, the cleaner, the workers and the starting of the events a request accepts, handed to the starter, have their own connections, without it); past it the request is answered 503 query-timeout and the statement is cancelled, so no request costs the database more than this (Go duration, at least 1ms)", millisDuration(func(c *Config) *time.Duration { return &c.StatementTimeout })},
		{"HOOKFLOW_EVENT_MAX_HISTORY", "event-max-history", "0", "api and worker: the history length past which an event's workflow continues as new, at the first moment all its lanes wait (0: 2000); the chaos and operator-model runs set it low so that it happens within a run", nonNegativeInt(func(c *Config) *int { return &c.EventMaxHistory })},
		{"HOOKFLOW_PAYLOAD_RETENTION", "payload-retention", "30d", "api: delivered and skipped events lose their payload this long after they finished (key, hash, correlation, sequence, state and times stay, so reposts are answered as before); 0 keeps payloads for ever", retention(func(c *Config) *time.Duration { return &c.PayloadRetention })},
		{"HOOKFLOW_ATTEMPT_RETENTION", "attempt-retention", "30d", "api: delivery attempts of delivered and skipped events are deleted this long after they were made (a dead letter keeps its own copy); 0 keeps them", retention(func(c *Config) *time.Duration { return &c.AttemptRetention })},
		{"HOOKFLOW_KEY_RETENTION", "key-retention", "90d", "api: delivered and skipped events' rows (their keys) are deleted this long after they finished (at least the two retentions above); a repost of such a key is then answered 409 (its sequence is behind its correlation's cursor), never delivered twice; 0 keeps keys for ever", retention(func(c *Config) *time.Duration { return &c.KeyRetention })},
		{"HOOKFLOW_CLEANER_INTERVAL", "cleaner-interval", "1m", "api: how often the cleaner prunes by the retentions above (one API process at a time does the work, in small batches)", positiveDuration(func(c *Config) *time.Duration { return &c.CleanerInterval })},
		{"HOOKFLOW_MAX_BODY_BYTES", "max-body-bytes", "1048576", "largest accepted request body in bytes", positiveInt64(func(c *Config) *int64 { return &c.MaxBodyBytes })},
		{"HOOKFLOW_PRIVATE_TARGET_ALLOWLIST", "private-target-allowlist", "", "exact host:port targets, comma separated, that endpoints may use although they are private (loopback, private, link-local) or plain http, e.g. receiver:8090 (hookflow dev allows every target)", hostPortList(func(c *Config) *[]string { return &c.PrivateAllowlist })},
		{"HOOKFLOW_DATA_DIR", "data-dir", "./.hookflow", "dev only: where the local Postgres cluster and logs live", nonEmpty(func(c *Config) *string { return &c.DataDir })},
		{"HOOKFLOW_DEV_TEMPORAL_PORT", "dev-temporal-port", "7233", "dev only: Temporal frontend port", port(func(c *Config) *int { return &c.DevTemporalPort })},
		{"HOOKFLOW_DEV_UI_PORT", "dev-ui-port", "8233", "dev only: Temporal Web UI port; 0 runs no Web UI", portOrOff(func(c *Config) *int { return &c.DevUIPort })},
		{"HOOKFLOW_DEV_POSTGRES_PORT", "dev-postgres-port", "5433", "dev only: local Postgres port", port(func(c *Config) *int { return &c.DevPostgresPort })},
		{"HOOKFLOW_DEV_NATS_PORT", "dev-nats-port", "4222", "dev only: port of the NATS JetStream server to try broker destinations with (its stream HOOKFLOW_DEV captures dev.>); 0 runs none", portOrOff(func(c *Config) *int { return &c.DevNATSPort })},
		{"HOOKFLOW_DEV_TEMPORAL_RETENTION", "dev-temporal-retention", "1d", "dev only: how long the Temporal namespace keeps closed workflows (at least 1d: Temporal's minimum; the ledger answers for events Temporal has forgotten)", atLeastADay(func(c *Config) *time.Duration { return &c.DevTemporalRetention })},
		{"HOOKFLOW_DEV_WORKERS", "dev-workers", "1", "dev only: in-process workers (0 lets external hookflow worker processes do the work)", nonNegativeInt(func(c *Config) *int { return &c.DevWorkers })},
		{"HOOKFLOW_RECEIVER_ADDR", "receiver-addr", "127.0.0.1:8090", "listen address of the reference receiver", hostPort(func(c *Config) *string { return &c.ReceiverAddr })},
		{"HOOKFLOW_RECEIVER_RETENTION", "receiver-retention", "30d", "reference receiver: processed_events rows below their correlation's cursor are pruned this long after they were applied; 0 keeps them", retention(func(c *Config) *time.Duration { return &c.ReceiverRetention })},
		{"HOOKFLOW_RECEIVER_SECRET", "receiver-secret", "", "reference receiver: whsec_ secrets it accepts, space separated", str(func(c *Config) *string { return &c.ReceiverSecrets })},
		{"HOOKFLOW_RECEIVER_START", "receiver-start", "beginning", "reference receiver: where a lane (endpoint, correlation) it has never seen starts: beginning (its first event must have previous_sequence 0; a later one parks) or mid-stream (its first event applies whatever its previous_sequence: for a fresh receiver an endpoint with history was re-pointed at)", startPosition(func(c *Config) *receiver.StartPosition { return &c.ReceiverStart })},
		{"HOOKFLOW_RECEIVER_DATABASE_URL", "receiver-database-url", "postgres://postgres@127.0.0.1:5433/hookflow_receiver?sslmode=disable", "reference receiver: its PostgreSQL DSN", str(func(c *Config) *string { return &c.ReceiverDatabase })},
		{"HOOKFLOW_API_URL", "api-url", "http://127.0.0.1:8080", "CLI commands that call the API (dlq, status, keys, demo): its base URL", str(func(c *Config) *string { return &c.APIURL })},
		{"HOOKFLOW_TENANT", "tenant", "", "CLI commands that call the API: the tenant they act on, sent as tenant_id with an operator key (empty: the key's own, default for an operator key); keys create issues a key confined to it", str(func(c *Config) *string { return &c.Tenant })},
		{"HOOKFLOW_METRICS_ADDR", "metrics-addr", "", "api, worker: listen address of the process's own GET /metrics, apart from the API's (empty: off)", optionalHostPort(func(c *Config) *string { return &c.MetricsAddr })},
		{"HOOKFLOW_OUTBOX_DATABASE_URL", "outbox-database-url", "", "relay: PostgreSQL DSN of the producer's database holding the outbox table (empty: HOOKFLOW_DATABASE_URL)", str(func(c *Config) *string { return &c.OutboxDatabaseURL })},
	}
}

// ErrHelp is returned by Load when -h/--help was asked for.
var ErrHelp = flag.ErrHelp

// UsageError is a bad setting or flag; the CLI prints it on one line and
// exits with code 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Load reads the named settings from the environment, then from the flags in
// args, and returns the remaining positional arguments. overrides replaces
// defaults (dev uses it to allow private targets).
func Load(name, summary string, names []string, args []string, getenv func(string) string, overrides map[string]string, usageOut io.Writer) (Config, []string, error) {
	return LoadWithFlags(name, summary, names, args, getenv, overrides, usageOut, nil)
}

// LoadWithFlags is Load for commands with flags of their own: extra
// registers them on the same flag set before parsing.
func LoadWithFlags(name, summary string, names []string, args []string, getenv func(string) string, overrides map[string]string, usageOut io.Writer, extra func(*flag.FlagSet)) (Config, []string, error) {
	all := map[string]Setting{}
	for _, s := range Settings() {
		all[s.Env] = s
	}
	var c Config
	fs := flag.NewFlagSet("hookflow "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	chosen := make([]Setting, 0, len(names))
	missing := map[string]Setting{}
	for _, n := range names {
		s, ok := all[n]
		if !ok {
			return c, nil, fmt.Errorf("config: unknown setting %s", n)
		}
		chosen = append(chosen, s)
		if d, ok := overrides[n]; ok {
			s.Default = d
		}
		v := s.Default
		if e := getenv(s.Env); e != "" {
			v = e
		}
		// A required setting left empty may still come as a flag: it is
		// judged once the flags are parsed.
		if err := s.set(&c, v); errors.Is(err, errRequired) {
			missing[s.Flag] = s
		} else if err != nil {
			return c, nil, &UsageError{fmt.Sprintf("invalid %s=%q: %v", s.Env, v, err)}
		}
		fs.Func(s.Flag, s.Help+" (env "+s.Env+", default "+quoteEmpty(s.Default)+")", func(v string) error {
			if err := s.set(&c, v); err != nil {
				return fmt.Errorf("%v", err)
			}
			delete(missing, s.Flag)
			return nil
		})
	}
	if extra != nil {
		extra(fs)
	}
	// Flags may come before or after positional arguments
	// (hookflow conformance <url> --secret …), so parse in rounds.
	var positional []string
	err := fs.Parse(args)
	for err == nil && fs.NArg() > 0 {
		positional = append(positional, fs.Arg(0))
		err = fs.Parse(fs.Args()[1:])
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(usageOut, "usage: hookflow %s [flags]\n\n%s\n\nflags:\n", name, summary)
			fs.SetOutput(usageOut)
			fs.PrintDefaults()
			return c, nil, ErrHelp
		}
		return c, nil, &UsageError{err.Error()}
	}
	for _, s := range chosen {
		if _, ok := missing[s.Flag]; ok {
			return c, nil, &UsageError{fmt.Sprintf("%s is required: %s", s.Env, s.Help)}
		}
	}
	return c, positional, nil
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// baseURL takes an absolute http(s) URL with no query or fragment (a path
// prefix is kept), without its trailing slash; empty is left empty.
func baseURL(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if v == "" {
			*f(c) = ""
			return nil
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return errors.New("want an absolute http or https URL with no query or fragment, like https://hooks.example.com")
		}
		*f(c) = strings.TrimRight(v, "/")
		return nil
	}
}

// PortalBase is the base of portal links: the setting, or else http://
// and the address the API is bound to (listen), its unspecified host
// (0.0.0.0, ::) made 127.0.0.1, which a browser on the same machine
// reaches.
func PortalBase(setting, listen string) string {
	if setting != "" {
		return setting
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func str(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *f(c) = v; return nil }
}

func startPosition(f func(*Config) *receiver.StartPosition) func(*Config, string) error {
	return func(c *Config, v string) error {
		p, err := receiver.ParseStartPosition(v)
		if err != nil {
			return err
		}
		*f(c) = p
		return nil
	}
}

// errRequired marks a setting that has no default and was not set.
var errRequired = errors.New("is required")

func required(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if strings.TrimSpace(v) == "" {
			return errRequired
		}
		*f(c) = v
		return nil
	}
}

func positiveFloat(f func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
			return errors.New("must be a number greater than 0")
		}
		*f(c) = n
		return nil
	}
}

func optionalHostPort(f func(*Config) *string) func(*Config, string) error {
	hp := hostPort(f)
	return func(c *Config, v string) error {
		if v == "" {
			*f(c) = ""
			return nil
		}
		return hp(c, v)
	}
}

func hostPortList(f func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			host, port, err := net.SplitHostPort(item)
			if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%q is not a host:port", item)
			}
			out = append(out, item)
		}
		*f(c) = out
		return nil
	}
}

// cidrList parses comma-separated CIDRs; a bare address is its own /32
// or /128.
func cidrList(f func(*Config) *[]netip.Prefix) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []netip.Prefix
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			p, err := netip.ParsePrefix(item)
			if err != nil {
				a, aerr := netip.ParseAddr(item)
				if aerr != nil {
					return fmt.Errorf("%q is not a CIDR (10.0.0.0/8) or an address", item)
				}
				p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			}
			out = append(out, p.Masked())
		}
		*f(c) = out
		return nil
	}
}

func nonEmpty(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("must not be empty")
		}
		*f(c) = v
		return nil
	}
}

func hostPort(f func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		if _, p, err := net.SplitHostPort(v); err != nil {
			return errors.New("want host:port")
		} else if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return errors.New("port must be a number from 0 to 65535")
		}
		*f(c) = v
		return nil
	}
}

// retention reads a retention: a Go duration, whole days as "30d", or 0
// for ever.
func retention(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := ParseRetention(v)
		if err != nil {
			return err
		}
		*f(c) = d
		return nil
	}
}

func atLeastADay(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := ParseRetention(v)
		if err != nil {
			return err
		}
		if d < 24*time.Hour {
			return errors.New("must be at least 1d (Temporal keeps closed workflows at least a day)")
		}
		*f(c) = d
		return nil
	}
}

// ParseRetention reads "30d" (days), a Go duration ("720h", "90m"), or "0"
// (for ever).
func ParseRetention(v string) (time.Duration, error) {
	bad := errors.New("want a number of days such as 30d, a Go duration such as 720h, or 0 for ever")
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, bad
	}
	return d, nil
}

func positiveDuration(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return errors.New("want a Go duration such as 5m or 30s")
		}
		if d <= 0 {
			return errors.New("must be greater than zero")
		}
		*f(c) = d
		return nil
	}
}

// millisDuration is positiveDuration for a setting Postgres takes in whole
// milliseconds, where 0 means none: under one would switch it off.
func millisDuration(f func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		if err := positiveDuration(f)(c, v); err != nil {
			return err
		}
		if *f(c) < time.Millisecond {
			return errors.New("must be at least 1ms (Postgres counts it in milliseconds; less would be none)")
		}
		return nil
	}
}

func positiveInt64(f func(*Config) *int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return errors.New("want a whole number greater than zero")
		}
		*f(c) = n
		return nil
	}
}

func nonNegativeInt(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return errors.New("want a whole number, 0 or more")
		}
		*f(c) = n
		return nil
	}
}

func intRange(lo, hi int, f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want a whole number from %d to %d", lo, hi)
		}
		*f(c) = n
		return nil
	}
}

func port(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return errors.New("want a port number from 1 to 65535")
		}
		*f(c) = n
		return nil
	}
}

// portOrOff is port, with 0 meaning "do not serve it".
func portOrOff(f func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		if v == "0" {
			*f(c) = 0
			return nil
		}
		if err := port(f)(c, v); err != nil {
			return errors.New("want a port number from 1 to 65535, or 0 for none")
		}
		return nil
	}
}
