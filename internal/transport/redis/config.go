package redis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
)

// Durability values of config.durability.
const (
	// DurabilityAOF (the default) needs the server to log every write to
	// its append-only file before answering (appendonly yes), so that a
	// crash loses nothing acknowledged.
	DurabilityAOF = "aof"
	// DurabilityBestEffort accepts a server without AOF: a crash may lose
	// what it acknowledged since its last snapshot, and the lanes would
	// then go on past the hole.
	DurabilityBestEffort = "best_effort"
)

// DefaultIndexMaxLen is the index stream's approximate length bound when
// config.index_maxlen is unset: the index is a notice board for consumers,
// the lanes keep the messages.
const DefaultIndexMaxLen = 1_000_000

// Credential keys.
const (
	CredentialPassword = "password"
	CredentialUsername = "username"
)

// config is a redis destination's config as stored (Destination.Config).
type config struct {
	// Addr is the server's host:port.
	Addr string `json:"addr"`
	// Stream is the prefix of the destination's keys: its index stream is
	// {stream} and each lane's stream {stream}:<correlation_id>.
	Stream string `json:"stream"`
	// TLS, true unless set false: plain TCP only to a target the egress
	// policy allows (an allowlisted host:port).
	TLS *bool `json:"tls"`
	// DB is the logical database (SELECT).
	DB int `json:"db"`
	// IndexMaxLen bounds the index stream (MAXLEN ~); 0 is
	// DefaultIndexMaxLen.
	IndexMaxLen int64 `json:"index_maxlen"`
	// Durability is DurabilityAOF (also when empty) or
	// DurabilityBestEffort.
	Durability string `json:"durability"`
}

// streamPrefix is what a stream prefix may hold: no braces (they make the
// Cluster hash tag) and no glob characters (Read scans by pattern).
var streamPrefix = regexp.MustCompile(`^[A-Za-z0-9_:.-]{1,100}$`)

// dest is a destination's settings, checked.
type dest struct {
	config
	host, port string
	tls        bool
	username   string
	password   string
}

// index is the endpoint's index stream; the hash tag keeps it and every
// lane in one Cluster slot, so that the append script stays legal there.
func (d *dest) index() string { return "{" + d.Stream + "}" }

// lane is the stream of one correlation's messages.
func (d *dest) lane(correlationID string) string { return d.index() + ":" + correlationID }

// url is the canonical address: scheme by TLS, host lowercased, database
// and prefix, no credentials.
func (d *dest) url() string {
	u := url.URL{Scheme: "redis", Host: net.JoinHostPort(d.host, d.port), Path: "/" + strconv.Itoa(d.DB), RawQuery: url.Values{"stream": {d.Stream}}.Encode()}
	if d.tls {
		u.Scheme = "rediss"
	}
	return u.String()
}

// parse checks d's config and credentials as stored, the egress policy on
// the address included, without reaching the server.
func parse(targets egress.Policy, d transport.Destination) (*dest, error) {
	var c config
	dec := json.NewDecoder(bytes.NewReader(d.Config))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, configError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &transport.FieldError{Field: "config", Reason: "must be one JSON object"}
	}
	out := &dest{config: c, tls: c.TLS == nil || *c.TLS}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil || host == "" {
		return nil, &transport.FieldError{Field: "config.addr", Reason: "must be host:port"}
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return nil, &transport.FieldError{Field: "config.addr", Reason: "the port must be a number from 1 to 65535"}
	}
	out.host, out.port = strings.ToLower(host), port
	if err := targets.ForTenant(d.PrivateTargets).CheckAddr(out.host, out.port, out.tls); err != nil {
		return nil, &transport.FieldError{Field: "config.addr", Reason: err.Error()}
	}
	if !streamPrefix.MatchString(c.Stream) {
		return nil, &transport.FieldError{Field: "config.stream", Reason: "must be 1 to 100 of A-Z a-z 0-9 _ : . -"}
	}
	if c.DB < 0 {
		return nil, &transport.FieldError{Field: "config.db", Reason: "must not be negative"}
	}
	if c.IndexMaxLen < 0 {
		return nil, &transport.FieldError{Field: "config.index_maxlen", Reason: "must not be negative"}
	}
	if out.IndexMaxLen == 0 {
		out.IndexMaxLen = DefaultIndexMaxLen
	}
	switch c.Durability {
	case "":
		out.Durability = DurabilityAOF
	case DurabilityAOF, DurabilityBestEffort:
	default:
		return nil, &transport.FieldError{Field: "config.durability", Reason: fmt.Sprintf("must be %q or %q", DurabilityAOF, DurabilityBestEffort)}
	}
	for _, k := range slices.Sorted(maps.Keys(d.Credentials)) {
		if k != CredentialPassword && k != CredentialUsername {
			return nil, &transport.FieldError{Field: "credentials." + k, Reason: "unknown: a redis destination takes password and username"}
		}
	}
	// A server reachable without a password is open to anyone who reaches
	// it: hookflow does not write there.
	out.password, out.username = d.Credentials[CredentialPassword], d.Credentials[CredentialUsername]
	if out.password == "" {
		return nil, &transport.FieldError{Field: "credentials.password", Reason: "is required"}
	}
	return out, nil
}

// configError names the field a JSON error is about, and quotes nothing of
// the value (it is not secret, but it may be long).
func configError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &transport.FieldError{Field: "config." + te.Field, Reason: "must be a " + jsonKind(te.Type)}
	}
	if m, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f, _ := strconv.Unquote(m)
		return &transport.FieldError{Field: "config." + f, Reason: "unknown field"}
	}
	return &transport.FieldError{Field: "config", Reason: "must be a JSON object"}
}

// jsonKind names a Go type as JSON does.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int64:
		return "integer"
	}
	return t.Kind().String()
}
