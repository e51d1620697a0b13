package api_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/api"
	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
)

// fakeBroker stands in for a broker's transport: its config is
// {"addr": "host:port", "subject": "prefix"}, its address
// fake://host:port/prefix, and its check takes only the password "right".
type fakeBroker struct{ targets egress.Policy }

func (fakeBroker) Validate(context.Context, transport.Destination) error { return nil }

func (fakeBroker) Send(context.Context, transport.Destination, transport.Message) (transport.Result, error) {
	return transport.Result{Outcome: transport.Delivered}, nil
}

func (f fakeBroker) Address(_ context.Context, d transport.Destination) (string, error) {
	var cfg struct{ Addr, Subject string }
	if err := json.Unmarshal(d.Config, &cfg); err != nil {
		return "", &transport.FieldError{Field: "config", Reason: err.Error()}
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return "", &transport.FieldError{Field: "config.addr", Reason: "not host:port"}
	}
	if err := f.targets.ForTenant(d.PrivateTargets).CheckAddr(host, port, true); err != nil {
		return "", &transport.FieldError{Field: "config.addr", Reason: err.Error()}
	}
	if cfg.Subject == "" || strings.ContainsAny(cfg.Subject, "*> ") {
		return "", &transport.FieldError{Field: "config.subject", Reason: "a prefix of plain tokens"}
	}
	return "fake://" + cfg.Addr + "/" + cfg.Subject, nil
}

func (fakeBroker) Check(_ context.Context, d transport.Destination) error {
	if d.Credentials["password"] != "right" {
		return &transport.FieldError{Field: "credentials", Reason: "the broker refused them"}
	}
	return nil
}

// TestBrokerDestination: a broker endpoint is set by config and
// credentials, never by url or a webhook's headers; its address is the
// canonical one its transport makes, one endpoint's alone; its credentials
// are stored but never shown; a change of address must send them again;
// and every refusal names its field and stores nothing.
func TestBrokerDestination(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const password = "right"
	create := `{"type":"nats","config":{"addr":"broker.example.com:4222","subject":"orders"},"credentials":{"password":"` + password + `"}}`
	raw := b.call(t, http.MethodPost, "/v1/endpoints", create, http.StatusCreated)
	require.NotContains(t, raw, password, "an answer never holds a credential")
	var ep struct {
		ID          string            `json:"id"`
		URL         string            `json:"url"`
		Config      map[string]any    `json:"config"`
		Credentials map[string]string `json:"credentials"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &ep))
	require.Equal(t, "fake://broker.example.com:4222/orders", ep.URL)
	require.Equal(t, "orders", ep.Config["subject"])
	require.Equal(t, map[string]string{"password": api.RedactedHeaderValue}, ep.Credentials)
	var stored string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT credentials->>'password' FROM endpoints WHERE id = $1`, ep.ID).Scan(&stored))
	require.Equal(t, password, stored)
	for _, path := range []string{"/v1/endpoints/" + ep.ID, "/v1/endpoints"} {
		require.NotContains(t, b.call(t, http.MethodGet, path, "", http.StatusOK), password)
	}

	before := b.endpointRows(t)
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"a url", `{"type":"nats","url":"https://example.com/x","config":{"addr":"b.example.com:4222","subject":"a"}}`, 422, "url"},
		{"no config", `{"type":"nats","credentials":{"password":"right"}}`, 400, "config"},
		{"headers", `{"type":"nats","config":{"addr":"b.example.com:4222","subject":"b"},"credentials":{"password":"right"},"headers":{"X-A":"b"}}`, 422, "headers"},
		{"a bad field", `{"type":"nats","config":{"addr":"b.example.com:4222","subject":"a.>"},"credentials":{"password":"right"}}`, 422, "config.subject"},
		{"a private address", `{"type":"nats","config":{"addr":"127.0.0.1:4222","subject":"c"},"credentials":{"password":"right"}}`, 422, "config.addr"},
		{"credentials the broker refuses", `{"type":"nats","config":{"addr":"b.example.com:4222","subject":"d"},"credentials":{"password":"wrong"}}`, 422, "credentials"},
		{"a destination taken", create, 422, "config"},
		{"a webhook with config", `{"url":"https://example.com/y","config":{"addr":"b.example.com:4222"}}`, 422, "config"},
		{"a webhook with credentials", `{"url":"https://example.com/y","credentials":{"password":"x"}}`, 422, "credentials"},
		{"a webhook without url", `{"type":"webhook"}`, 400, "url"},
	} {
		resp, body := b.do(t, http.MethodPost, "/v1/endpoints", "application/json", c.body, b.bearer())
		requireProblem(t, resp, body, c.status, c.field)
		require.NotContains(t, body, "wrong", c.name)
		require.Equal(t, before, b.endpointRows(t), "%s: nothing stored", c.name)
	}

	path := "/v1/endpoints/" + ep.ID
	moved := `{"config":{"addr":"other.example.com:4222","subject":"orders"}}`
	resp, body := b.do(t, http.MethodPatch, path, "application/json", moved, b.bearer())
	requireProblem(t, resp, body, 422, "credentials")
	resp, body = b.do(t, http.MethodPatch, path, "application/json", `{"headers":{"X-A":"b"}}`, b.bearer())
	requireProblem(t, resp, body, 422, "headers")
	resp, body = b.do(t, http.MethodPatch, path, "application/json", `{"url":"https://example.com/z"}`, b.bearer())
	requireProblem(t, resp, body, 422, "url")
	resp, body = b.do(t, http.MethodPatch, path, "application/json", `{"credentials":{"password":"wrong"}}`, b.bearer())
	requireProblem(t, resp, body, 422, "credentials")
	require.Equal(t, before, b.endpointRows(t), "refused changes change nothing")

	raw = b.call(t, http.MethodPatch, path, `{"config":{"addr":"other.example.com:4222","subject":"orders"},"credentials":{"password":"right","username":"svc"}}`, http.StatusOK)
	require.NoError(t, json.Unmarshal([]byte(raw), &ep))
	require.Equal(t, "fake://other.example.com:4222/orders", ep.URL)
	require.Equal(t, map[string]string{"password": api.RedactedHeaderValue, "username": api.RedactedHeaderValue}, ep.Credentials)
	changes := b.call(t, http.MethodGet, path+"/url-changes", "", http.StatusOK)
	require.Contains(t, changes, "fake://other.example.com:4222/orders", "a change of address is audited")
	// Credentials alone are checked against the stored config.
	b.call(t, http.MethodPatch, path, `{"credentials":{"password":"right"}}`, http.StatusOK)
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT credentials::text FROM endpoints WHERE id = $1`, ep.ID).Scan(&stored))
	require.JSONEq(t, `{"password":"right"}`, stored, "credentials are replaced whole")
}
