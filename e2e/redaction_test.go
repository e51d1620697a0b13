package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/interceptor"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/tracing"
	"github.com/hookflow/hookflow/lab/spantest"
	"github.com/hookflow/hookflow/lab/testenv"
)

// TestRedaction: an endpoint whose URL carries a token in its query string
// and another in its path (as Slack's and Discord's do) refuses connections
// through a whole recovery window, and the event is dead-lettered. The
// tokens are then nowhere hookflow writes: in no table of its database (but
// the endpoint's own url column), in no answer of the API about the event,
// in no answer about the endpoints to a read key, in no log record of the
// API, the worker or the Temporal SDK, in no span, and nowhere in the
// event's or its sequencer's workflow history, payloads included. The
// failure is still told: the dead letter's reason and attempts name the
// endpoint as scheme://host/[redacted].
//
// The endpoint carries a custom header whose value is a secret too, and so
// does a second endpoint, whose receiver refuses its event (400) with an
// answer that echoes the header and the path: neither is anywhere either,
// but in the endpoints' own headers and url columns (not in an attempt, a
// dead letter, a log, a span, a history or an answer of the API, the
// endpoints' included). A third endpoint says its path is public
// (url_path_public): its path is shown to the read key and in its dead
// letter.
func TestRedaction(t *testing.T) {
	t.Parallel()
	tp, spans := spantest.Install(t)
	ic, err := tracing.TemporalInterceptor(tp)
	require.NoError(t, err)
	// 6 s: the first attempt (a local activity), then the regular
	// activity's, a second and five seconds in.
	logs := &logBuffer{}
	logger := slog.New(slog.NewMultiHandler(
		slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}),
		testenv.Logger(t).Handler(),
	))
	b := setup(t, options{window: 6 * time.Second, logger: logger, interceptors: []interceptor.ClientInterceptor{ic}})

	secret := "tok" + randHex(16)
	addr := refusedAddr(t)
	pathSecret := "pth" + randHex(16)
	redacted := "http://" + addr + "/[redacted]"
	raw := "http://" + addr + "/services/T01/B02/" + pathSecret + "?token=" + secret + "&v=2"
	hdrSecret := "hdr" + randHex(16)
	headers := map[string]any{"X-Api-Key": hdrSecret}
	ep := b.createEndpointWith(map[string]any{"url": raw, "headers": headers})
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "unknown key %s at %s", r.Header.Get("X-Api-Key"), r.URL.Path)
	}))
	t.Cleanup(echo.Close)
	echoEp := b.createEndpointWith(map[string]any{"url": echo.URL + "/api/webhooks/42/" + pathSecret, "headers": headers})
	publicEp := b.createEndpointWith(map[string]any{"url": echo.URL + "/public/orders-hook", "url_path_public": true})
	corr, id := b.id("redact"), b.id("redact-1")
	code, _ := b.postEvent(id, corr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	echoCorr, echoID := b.id("redact-echo"), b.id("redact-echo-1")
	code, _ = b.postEvent(echoID, echoCorr, 1, echoEp.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	publicCorr, publicID := b.id("redact-public"), b.id("redact-public-1")
	code, _ = b.postEvent(publicID, publicCorr, 1, publicEp.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(id, contract.StateDeadLettered, time.Minute)
	b.waitState(echoID, contract.StateDeadLettered, time.Minute)
	b.waitState(publicID, contract.StateDeadLettered, time.Minute)
	reader := b.createKey("redaction-reader", "events:read")

	dl := b.deadLetter(id)
	var storedHeaders map[string]string
	require.NoError(t, b.store.Pool().QueryRow(context.Background(), "SELECT headers FROM endpoints WHERE id = $1", echoEp.ID).Scan(&storedHeaders))
	require.Equal(t, hdrSecret, storedHeaders["X-Api-Key"], "kept in the endpoint's own row, for its deliveries")
	where := map[string]string{
		"database":    b.databaseText(t, ep.ID, raw),
		"API answers": b.apiText(id) + b.apiText(echoID),
		// The management sees the URL whole, token included (the token is
		// not looked for here); never a header's value.
		"endpoint answers":       b.endpointsText(b.cfg.APIToken, ep.ID, echoEp.ID),
		"read key's endpoints":   b.endpointsText(reader, ep.ID, echoEp.ID),
		"logs":                   logs.String(),
		"spans":                  spansText(spans.Ended()),
		"event history":          b.historyText(id),
		"sequencer history":      b.historyText(contract.SequencerID(contract.DefaultTenant, corr)),
		"echoed event history":   b.historyText(echoID),
		"echoed event sequencer": b.historyText(contract.SequencerID(contract.DefaultTenant, echoCorr)),
	}
	for _, name := range slices.Sorted(maps.Keys(where)) {
		// bytea columns and byte payloads would show it as hex.
		for what, s := range map[string]string{
			"the token": secret, "the token (hex)": hex.EncodeToString([]byte(secret)),
			"the header's value": hdrSecret, "the header's value (hex)": hex.EncodeToString([]byte(hdrSecret)),
			"the path's token": pathSecret, "the path's token (hex)": hex.EncodeToString([]byte(pathSecret)),
		} {
			if name == "endpoint answers" && (strings.HasPrefix(what, "the token") || strings.HasPrefix(what, "the path's token")) {
				continue
			}
			if lines := linesWith(where[name], s); len(lines) > 0 {
				t.Errorf("%s is in the %s:\n%s", what, name, strings.Join(lines, "\n"))
			}
		}
	}
	// The echoed refusal is told, without the value.
	echoDL := b.deadLetter(echoID)
	require.Contains(t, echoDL.Reason, "permanent rejection: receiver answered 400: unknown key [redacted] at [redacted]")
	require.Contains(t, where["read key's endpoints"], `"url":"`+redacted+`"`)
	// A public path is shown: to the read key, and in what the receiver's
	// answer quotes of it.
	require.Contains(t, b.deadLetter(publicID).Reason, "at /public/orders-hook")
	require.Contains(t, b.endpointsText(reader, publicEp.ID), `"url":"`+echo.URL+`/public/orders-hook","url_path_public":true`)
	require.Contains(t, where["endpoint answers"], `"X-Api-Key":"********"`, "the endpoints are shown with the header's name")
	require.Contains(t, where["echoed event history"], "unknown key [redacted]")

	// Told, without the token: the dead letter names the endpoint by its
	// redacted URL, for the local activity's attempt and the regular
	// activity's alike.
	require.Contains(t, dl.Reason, "Post "+redacted+": dial tcp "+addr+": connect: connection refused")
	require.GreaterOrEqual(t, len(dl.Attempts), 2, "the local activity's attempt and the regular activity's")
	for _, at := range dl.Attempts {
		require.NotNil(t, at.Error)
		require.Contains(t, *at.Error, "Post "+redacted+": ")
	}
	// The dumps hold what they should, so their silence on the token means
	// something.
	require.Contains(t, where["database"], redacted)
	require.Contains(t, where["API answers"], redacted)
	require.Contains(t, where["logs"], "event dead-lettered")
	require.Contains(t, where["logs"], "Activity error.", "the SDK's records are captured")
	require.Contains(t, where["logs"], redacted)
	require.Contains(t, where["spans"], "connection refused")
	require.Contains(t, where["event history"], redacted)
	require.Contains(t, where["sequencer history"], id)
}

// linesWith returns the lines of text holding s, cut to a readable length.
func linesWith(text, s string) []string {
	var out []string
	for line := range strings.Lines(text) {
		if i := strings.Index(line, s); i >= 0 {
			out = append(out, line[max(0, i-200):min(len(line), i+len(s)+100)])
		}
	}
	return out
}

// refusedAddr is a 127.0.0.1 address nothing listens on any more.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// logBuffer keeps every log record written to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// databaseText is every row of every table of hookflow's database as JSON,
// but the url, headers and credentials columns of the endpoints: an
// endpoint's URL, its custom headers and a broker's credentials are
// stored as registered. The url column is checked
// to hold url, so the dump would find the token if it were stored anywhere
// else.
func (b *bundle) databaseText(t *testing.T, endpointID, url string) string {
	t.Helper()
	ctx := context.Background()
	pool := b.store.Pool()
	var stored string
	require.NoError(t, pool.QueryRow(ctx, "SELECT url FROM endpoints WHERE id = $1", endpointID).Scan(&stored))
	require.Equal(t, url, stored)

	rows, err := pool.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	require.NoError(t, err)
	var tables []pgx.Identifier
	for rows.Next() {
		var schema, name string
		require.NoError(t, rows.Scan(&schema, &name))
		tables = append(tables, pgx.Identifier{schema, name})
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, tables)

	var sb strings.Builder
	for _, tbl := range tables {
		omit := []string{}
		if tbl[1] == "endpoints" {
			omit = []string{"url", "headers", "credentials"}
		}
		var text string
		q := fmt.Sprintf(`SELECT coalesce(string_agg((to_jsonb(t) - $1::text[])::text, E'\n'), '') FROM %s t`, tbl.Sanitize())
		require.NoError(t, pool.QueryRow(ctx, q, omit).Scan(&text), tbl.Sanitize())
		fmt.Fprintf(&sb, "%s:\n%s\n", tbl.Sanitize(), text)
	}
	return sb.String()
}

// endpointsText is what the API answers token about the endpoints, one by
// one and listed.
func (b *bundle) endpointsText(token string, ids ...string) string {
	var sb strings.Builder
	for _, path := range append([]string{"/v1/endpoints"}, func() []string {
		var ps []string
		for _, id := range ids {
			ps = append(ps, "/v1/endpoints/"+id)
		}
		return ps
	}()...) {
		var body json.RawMessage
		require.Equal(b.t, http.StatusOK, b.callAs(token, http.MethodGet, path, nil, &body), path)
		fmt.Fprintf(&sb, "%s: %s\n", path, body)
	}
	return sb.String()
}

// apiText is what the API answers about the event and its dead letter.
func (b *bundle) apiText(eventID string) string {
	var sb strings.Builder
	for _, path := range []string{"/v1/events/" + eventID, "/v1/dead-letters/" + eventID} {
		var body json.RawMessage
		require.Equal(b.t, http.StatusOK, b.call(http.MethodGet, path, nil, &body), path)
		fmt.Fprintf(&sb, "%s: %s\n", path, body)
	}
	return sb.String()
}

// historyText is a workflow's whole history: every event as protojson, and
// every string and byte string in it, so the content of payloads (activity
// inputs and results, which protojson shows in base64) is read too.
func (b *bundle) historyText(workflowID string) string {
	b.t.Helper()
	it := b.client.GetWorkflowHistory(context.Background(), wf(workflowID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var sb strings.Builder
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(b.t, err)
		raw, err := protojson.Marshal(ev)
		require.NoError(b.t, err)
		sb.Write(raw)
		sb.WriteByte('\n')
		protoText(ev.ProtoReflect(), &sb)
		n++
	}
	require.NotZero(b.t, n, "history of %s", workflowID)
	return sb.String()
}

// protoText writes every string and byte string in m, however deep.
func protoText(m protoreflect.Message, sb *strings.Builder) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				protoValue(fd, l.Get(i), sb)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				sb.WriteString(k.String() + "\n")
				protoValue(fd.MapValue(), mv, sb)
				return true
			})
		default:
			protoValue(fd, v, sb)
		}
		return true
	})
}

func protoValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, sb *strings.Builder) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		protoText(v.Message(), sb)
	case protoreflect.StringKind:
		sb.WriteString(v.String() + "\n")
	case protoreflect.BytesKind:
		sb.Write(v.Bytes())
		sb.WriteByte('\n')
	}
}

// spansText is every span's name, status, attributes and events as text.
func spansText(spans []sdktrace.ReadOnlySpan) string {
	var sb strings.Builder
	for _, s := range spans {
		fmt.Fprintln(&sb, s.Name(), s.Status().Description)
		for k, v := range spantest.Attrs(s) {
			fmt.Fprintln(&sb, k, v)
		}
		for _, ev := range s.Events() {
			fmt.Fprintln(&sb, ev.Name)
			for _, kv := range ev.Attributes {
				fmt.Fprintln(&sb, kv.Key, kv.Value.String())
			}
		}
	}
	return sb.String()
}

// TestRedactionEchoedForms: a receiver refuses its event (400) with an
// answer that echoes the endpoint's custom header value in every form a
// debugging page may quote it in (JSON-, HTML- and percent-escaped, base64
// of every kind, inside a base64 dump of the headers), and once more as is
// where the cut to the recorded length (2048 bytes) splits it. None of the
// forms, nor the start of the split one, is in the attempt, the dead
// letter, the API's answers, the database, the event's history, or the
// hookflow.dead_letter.created an operator's endpoint receives.
func TestRedactionEchoedForms(t *testing.T) {
	t.Parallel()
	b := setup(t, options{window: 6 * time.Second})
	secret := randHex(8) + `<a&b>/"c'd=e+f?g h` + randHex(8)
	forms := echoForms(secret)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get("X-Api-Key")
		var body strings.Builder
		for _, f := range echoForms(v) {
			fmt.Fprintf(&body, "%s | ", f)
		}
		// The last echo as is, starting 10 bytes before the cut.
		body.WriteString(strings.Repeat(".", 2048-10-body.Len()))
		body.WriteString(v)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, body.String())
	}))
	t.Cleanup(echo.Close)
	ep := b.createEndpointWith(map[string]any{"url": echo.URL + "/hook", "headers": map[string]any{"X-Api-Key": secret}})
	// An operator's endpoint gets hookflow.dead_letter.created, reason and
	// all.
	var opMu sync.Mutex
	var opBodies []string
	op := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		opMu.Lock()
		opBodies = append(opBodies, string(raw))
		opMu.Unlock()
	}))
	t.Cleanup(op.Close)
	b.createEndpointWith(map[string]any{"url": op.URL + "/ops", "event_types": []string{"hookflow.*"}})
	corr, id := b.id("forms"), b.id("forms-1")
	code, _ := b.postEvent(id, corr, 1, ep.ID, map[string]any{"n": 1})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(id, contract.StateDeadLettered, time.Minute)

	dl := b.deadLetter(id)
	require.Contains(t, dl.Reason, "receiver answered 400: [redacted] | [redacted] | ", "the echo is told, without the value")
	var opText string
	waitFor(t, time.Minute, "hookflow.dead_letter.created at the operator's endpoint", func() bool {
		opMu.Lock()
		defer opMu.Unlock()
		opText = strings.Join(opBodies, "\n")
		return strings.Contains(opText, "hookflow.dead_letter.created")
	})
	require.Contains(t, opText, "[redacted] | [redacted] | ", "the reason is told")
	require.NotEmpty(t, dl.Attempts)
	where := map[string]string{
		"dead letter's reason":  dl.Reason,
		"dead letter's attempt": *dl.Attempts[len(dl.Attempts)-1].Error,
		"API answers":           b.apiText(id),
		"database":              b.databaseText(t, ep.ID, echo.URL+"/hook"),
		"event history":         b.historyText(id),
		"operational event":     opText,
	}
	for _, name := range slices.Sorted(maps.Keys(where)) {
		for i, f := range forms {
			for _, piece := range []string{f, f[:len(f)/2]} {
				if lines := linesWith(where[name], piece); len(lines) > 0 {
					t.Errorf("form %d of the header's value (%q) is in the %s:\n%s", i, piece, name, strings.Join(lines, "\n"))
				}
			}
		}
	}
	require.True(t, strings.HasSuffix(*dl.Attempts[len(dl.Attempts)-1].Error, "..........[redacted]"), "the value the cut splits goes too")
}

// echoForms are the forms of v a receiver's debugging page may quote:
// as is, JSON-escaped (Go's, and with "/" escaped), HTML-escaped,
// percent-encoded, base64 of each kind, and a base64 dump of the headers
// with v at each of the three offsets.
func echoForms(v string) []string {
	j, _ := json.Marshal(v)
	js := string(j[1 : len(j)-1])
	forms := []string{v, js, strings.ReplaceAll(js, "/", `\/`), html.EscapeString(v), url.QueryEscape(v), url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))}
	for off := range 3 {
		forms = append(forms, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", off)+"X-Api-Key: "+v+"\r\n")))
	}
	return forms
}
