package nats

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hookflow/hookflow/internal/transport"
)

// Config is a NATS destination's settings (transport.Destination.Config).
type Config struct {
	// URL is the server: tls://host:port, or nats://host:port (plain TCP,
	// for an allowlisted private target only). The port defaults to 4222.
	URL string `json:"url"`
	// Subject is the prefix of the lanes' subjects: tokens of letters,
	// digits, "_" and "-" joined by ".", at most 100 bytes.
	Subject string `json:"subject"`
	// Stream names the JetStream stream that captures <subject>.>; empty
	// finds it by subject.
	Stream string `json:"stream,omitempty"`
	// TLSCAPEM holds the certificates (PEM) a tls:// server's certificate
	// is checked against instead of the system's roots.
	TLSCAPEM string `json:"tls_ca_pem,omitempty"`
}

// Credential keys (transport.Destination.Credentials): a user and its
// password, or a token, or none.
const (
	CredentialUsername = "username"
	CredentialPassword = "password"
	CredentialToken    = "token"
)

const (
	defaultPort   = "4222"
	maxSubjectLen = 100
	maxStreamLen  = 255
	schemePlain   = "nats"
	schemeTLS     = "tls"
	fieldURL      = "config.url"
	fieldSubject  = "config.subject"
	fieldStream   = "config.stream"
	fieldTLSCA    = "config.tls_ca_pem"
	fieldConfig   = "config"
	fieldCreds    = "credentials"
	fieldCredsPre = "credentials."
	tokenChars    = `[A-Za-z0-9_-]+`
)

var (
	subjectPattern = regexp.MustCompile(`^` + tokenChars + `(\.` + tokenChars + `)*$`)
	streamPattern  = regexp.MustCompile(`^` + tokenChars + `$`)
	// lanePattern is what a correlation id may hold: each is one subject
	// token as it is, so lanes need no escaping and never nest.
	lanePattern = regexp.MustCompile(`^[A-Za-z0-9_:-]+$`)
)

// settings are a destination's Config and Credentials, checked.
type settings struct {
	scheme, host, port string
	prefix, stream     string
	roots              *x509.CertPool
	user, password     string
	token              string
}

// server is the server's URL as dialled, without credentials.
func (s settings) server() string {
	return s.scheme + "://" + net.JoinHostPort(s.host, s.port)
}

// address is the destination's canonical address: the server and the
// subject prefix, which together name the lanes.
func (s settings) address() string { return s.server() + "/" + s.prefix }

func (s settings) tls() bool { return s.scheme == schemeTLS }

// parse reads and checks d's Config and Credentials, without the egress
// rules (Address) and without reaching the server. Its errors are
// *transport.FieldError and quote no credential.
func parse(d transport.Destination) (settings, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(d.Config))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(d.Config)) == 0 || dec.Decode(&c) != nil {
		return settings{}, &transport.FieldError{Field: fieldConfig, Reason: `must be an object {"url": "tls://host:4222", "subject": "prefix"} with no other fields than stream and tls_ca_pem`}
	}
	s, err := parseURL(c.URL)
	if err != nil {
		return settings{}, err
	}
	switch {
	case c.Subject == "":
		return settings{}, &transport.FieldError{Field: fieldSubject, Reason: "is required"}
	case len(c.Subject) > maxSubjectLen:
		return settings{}, &transport.FieldError{Field: fieldSubject, Reason: fmt.Sprintf("is longer than %d bytes", maxSubjectLen)}
	case !subjectPattern.MatchString(c.Subject):
		return settings{}, &transport.FieldError{Field: fieldSubject, Reason: `must be tokens of letters, digits, "_" and "-" joined by "." (no wildcards)`}
	}
	s.prefix = c.Subject
	if c.Stream != "" && (len(c.Stream) > maxStreamLen || !streamPattern.MatchString(c.Stream)) {
		return settings{}, &transport.FieldError{Field: fieldStream, Reason: `must be letters, digits, "_" and "-"`}
	}
	s.stream = c.Stream
	if c.TLSCAPEM != "" {
		if !s.tls() {
			return settings{}, &transport.FieldError{Field: fieldTLSCA, Reason: "applies to a tls:// url only"}
		}
		s.roots = x509.NewCertPool()
		if !s.roots.AppendCertsFromPEM([]byte(c.TLSCAPEM)) {
			return settings{}, &transport.FieldError{Field: fieldTLSCA, Reason: "holds no PEM certificate"}
		}
	}
	if err := s.readCredentials(d.Credentials); err != nil {
		return settings{}, err
	}
	return s, nil
}

func parseURL(raw string) (settings, error) {
	bad := func(reason string) (settings, error) {
		return settings{}, &transport.FieldError{Field: fieldURL, Reason: reason}
	}
	if raw == "" {
		return bad("is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("is not a URL")
	}
	switch {
	case u.Scheme != schemeTLS && u.Scheme != schemePlain:
		return bad("must be tls://host:port (or nats://host:port for an allowlisted private target)")
	case u.User != nil:
		return bad("must hold no credentials: give them as credentials")
	case u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return bad("must be a server's address only, with no path or query")
	case u.Hostname() == "":
		return bad("needs a host")
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return bad("has a port out of range")
	}
	return settings{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: port}, nil
}

func (s *settings) readCredentials(creds map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(creds)) {
		if k != CredentialUsername && k != CredentialPassword && k != CredentialToken {
			return &transport.FieldError{Field: fieldCredsPre + k, Reason: "is not a NATS credential (username and password, or token)"}
		}
		if creds[k] == "" {
			return &transport.FieldError{Field: fieldCredsPre + k, Reason: "is empty"}
		}
	}
	s.user, s.password, s.token = creds[CredentialUsername], creds[CredentialPassword], creds[CredentialToken]
	switch {
	case s.token != "" && (s.user != "" || s.password != ""):
		return &transport.FieldError{Field: fieldCreds, Reason: "give username and password, or a token, not both"}
	case s.user != "" && s.password == "":
		return &transport.FieldError{Field: fieldCredsPre + CredentialPassword, Reason: "is required with a username"}
	case s.password != "" && s.user == "":
		return &transport.FieldError{Field: fieldCredsPre + CredentialUsername, Reason: "is required with a password"}
	}
	return nil
}

// lane is the subject of a correlation's lane.
func (s settings) lane(correlationID string) (string, error) {
	if !lanePattern.MatchString(correlationID) {
		return "", fmt.Errorf("correlation id %q is not one NATS subject token", correlationID)
	}
	return s.prefix + "." + correlationID, nil
}

// lanes is the filter of every lane's subject: one token under the
// prefix, so that a longer prefix's subjects are never read as lanes.
func (s settings) lanes() string { return s.prefix + ".*" }

// covers reports whether a stream subject (a filter, maybe with
// wildcards) captures every subject filter matches, where filter's
// wildcards are "*" tokens only.
func covers(subject, filter string) bool {
	st, ft := strings.Split(subject, "."), strings.Split(filter, ".")
	for i, f := range ft {
		if i >= len(st) {
			return false
		}
		switch st[i] {
		case ">":
			return true
		case "*":
			continue
		}
		if f == "*" || st[i] != f {
			return false
		}
	}
	return len(st) == len(ft)
}
