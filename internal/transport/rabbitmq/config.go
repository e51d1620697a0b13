package rabbitmq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
)

// Config is a rabbitmq destination's config object, as stored.
type Config struct {
	// URL is the broker: amqps://host[:5671]/vhost (amqp:// only for a
	// target the egress allowlist names), with no credentials.
	URL string `json:"url"`
	// Exchange is the user's exchange hookflow publishes to; hookflow
	// neither creates nor changes it.
	Exchange string `json:"exchange"`
	// AuditQueue is a queue the operator bound to the exchange for every
	// routing key: what Read drains (conformance, tests). Optional; the
	// transport never publishes to it nor reads it when sending.
	AuditQueue string `json:"audit_queue,omitempty"`
}

// Credential keys of a rabbitmq destination: the broker's PLAIN login.
const (
	CredentialUsername = "username"
	CredentialPassword = "password"
)

// configFields are the names Config's fields have in JSON.
var configFields = []string{"url", "exchange", "audit_queue"}

// maxName is AMQP's bound on a short string: exchange and queue names and
// routing keys.
const maxName = 255

// target is a destination's config, checked and taken apart.
type target struct {
	Config
	scheme, host, port, vhost string
	username, password        string
}

func (t target) tls() bool { return t.scheme == "amqps" }

func (t target) addr() string { return net.JoinHostPort(t.host, t.port) }

// uri is the address the client dials: no credentials (they go by SASL,
// never in a URL a driver's error could repeat).
func (t target) uri() string {
	return t.scheme + "://" + t.addr() + "/" + url.PathEscape(t.vhost)
}

// canonical names the destination: the broker, the vhost and the
// exchange (each escaped as RabbitMQ's own HTTP API spells them, so the
// default vhost "/" is %2F).
func (t target) canonical() string {
	return t.uri() + "/" + url.PathEscape(t.Exchange)
}

// parse checks d's config and credentials, the egress rules on the
// broker's address included, without reaching it.
func parse(d transport.Destination, targets egress.Policy) (target, error) {
	var t target
	if err := decodeStrict(d.Config, &t.Config, "config", configFields...); err != nil {
		return t, err
	}
	u, err := url.Parse(t.URL)
	switch {
	case t.URL == "":
		return t, &transport.FieldError{Field: "config.url", Reason: "is required (amqps://host:5671/vhost)"}
	case err != nil:
		return t, &transport.FieldError{Field: "config.url", Reason: "is not a URL"}
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		return t, &transport.FieldError{Field: "config.url", Reason: "scheme must be amqps (or amqp for an allowlisted target)"}
	case u.User != nil:
		return t, &transport.FieldError{Field: "config.url", Reason: "must not carry credentials: send them as credentials.username and credentials.password"}
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return t, &transport.FieldError{Field: "config.url", Reason: "takes no query or fragment"}
	case u.Hostname() == "":
		return t, &transport.FieldError{Field: "config.url", Reason: "needs a host"}
	}
	t.scheme, t.host, t.port = u.Scheme, strings.ToLower(u.Hostname()), u.Port()
	if t.port == "" {
		t.port = map[string]string{"amqp": "5672", "amqps": "5671"}[t.scheme]
	}
	if n, err := strconv.Atoi(t.port); err != nil || n < 1 || n > 65535 {
		return t, &transport.FieldError{Field: "config.url", Reason: "port must be 1 to 65535"}
	}
	// The vhost is the path's one segment, percent-decoded ("/%2F" is
	// the default vhost "/"); no path means the default vhost.
	p := u.EscapedPath()
	switch {
	case p == "" || p == "/":
		t.vhost = "/"
	case strings.Count(p, "/") > 1:
		return t, &transport.FieldError{Field: "config.url", Reason: "path is the vhost alone (escape a / in it as %2F)"}
	default:
		t.vhost, _ = url.PathUnescape(p[1:])
	}
	if err := targets.ForTenant(d.PrivateTargets).CheckAddr(t.host, t.port, t.tls()); err != nil {
		return t, &transport.FieldError{Field: "config.url", Reason: err.Error()}
	}
	if err := checkName(t.Exchange); err != nil {
		return t, &transport.FieldError{Field: "config.exchange", Reason: err.Error()}
	}
	if t.AuditQueue != "" {
		if err := checkName(t.AuditQueue); err != nil {
			return t, &transport.FieldError{Field: "config.audit_queue", Reason: err.Error()}
		}
	}
	for k := range d.Credentials {
		if k != CredentialUsername && k != CredentialPassword {
			return t, &transport.FieldError{Field: "credentials." + k, Reason: "is not a rabbitmq credential (username, password)"}
		}
	}
	t.username, t.password = d.Credentials[CredentialUsername], d.Credentials[CredentialPassword]
	if t.username == "" || len(t.username) > maxName {
		return t, &transport.FieldError{Field: "credentials.username", Reason: "is required (at most 255 bytes)"}
	}
	if t.password == "" {
		return t, &transport.FieldError{Field: "credentials.password", Reason: "is required"}
	}
	return t, nil
}

// checkName holds a name to what AMQP 0-9-1 allows an exchange or a
// queue: letters, digits, - _ . : and at most 255 bytes. The default
// exchange ("") routes by queue name, not by lane, so a name is required.
func checkName(name string) error {
	if name == "" {
		return errors.New("is required")
	}
	if len(name) > maxName {
		return fmt.Errorf("is longer than %d bytes", maxName)
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return errors.New("may hold only letters, digits, dashes, underscores, dots and colons")
		}
	}
	return nil
}

// decodeStrict decodes the JSON object raw into v, refusing a field not
// in known (named as prefix.field) and a value of the wrong type.
func decodeStrict(raw json.RawMessage, v any, prefix string, known ...string) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &transport.FieldError{Field: prefix, Reason: "is required"}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return &transport.FieldError{Field: prefix, Reason: "must be a JSON object"}
	}
	for k := range fields {
		if !slices.Contains(known, k) {
			return &transport.FieldError{Field: prefix + "." + k, Reason: "is not a rabbitmq setting (" + strings.Join(known, ", ") + ")"}
		}
	}
	for _, k := range known {
		if f, ok := fields[k]; ok {
			var s string
			if err := json.Unmarshal(f, &s); err != nil {
				return &transport.FieldError{Field: prefix + "." + k, Reason: "must be a string"}
			}
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &transport.FieldError{Field: prefix, Reason: "does not decode"}
	}
	return nil
}
