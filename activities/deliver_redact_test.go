package activities_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.temporal.io/sdk/temporal"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/lab/spantest"
)

// refusedAddr is a 127.0.0.1 address nothing listens on any more.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// requireRedacted asserts that Deliver's failure, as Temporal gets it, and
// the attempt it stored both say want and nothing of secret.
func requireRedacted(t *testing.T, b *deliverBundle, err error, secret, want string) {
	t.Helper()
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	require.True(t, ok, "want an ApplicationError, got %T: %v", err, err)
	require.NotContains(t, appErr.Error(), secret)
	require.Contains(t, appErr.Error(), want)
	at := b.attempt(t)
	require.NotNil(t, at.Error)
	require.NotContains(t, *at.Error, secret)
	require.Contains(t, *at.Error, want)
}

// TestDeliverRedactsRefusedURL: the connection to an endpoint whose URL
// carries a token in its query is refused. The stored attempt and the
// failure Temporal gets (which becomes the dead letter's reason) name the
// endpoint as scheme://host/[redacted] (its path is not said to be public),
// and so says the span's exception; the token appears nowhere. Not parallel: it installs the global tracer
// provider.
func TestDeliverRedactsRefusedURL(t *testing.T) {
	_, spans := spantest.Install(t)
	addr := refusedAddr(t)
	secret := "s3cret-" + t.Name()
	b := setupDeliver(t, "http://"+addr+"/hooks?token="+secret+"&v=2")

	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypeRetryable, true, 0)
	requireRedacted(t, b, err, secret, "Post http://"+addr+"/[redacted]: dial tcp "+addr+": connect: connection refused")

	var deliverSpans []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "deliver webhook" {
			deliverSpans = append(deliverSpans, s)
		}
	}
	require.Len(t, deliverSpans, 1)
	text := spanText(deliverSpans[0])
	require.Contains(t, text, "connection refused", "the span records the error")
	require.NotContains(t, text, secret)
	require.NotContains(t, text, "token=")
}

// spanText is everything a span holds as text: name, status, attributes
// and its events' attributes.
func spanText(s sdktrace.ReadOnlySpan) string {
	var sb strings.Builder
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
	return sb.String()
}

// TestDeliverRedactsEchoedURL: a receiver whose error page quotes the URL
// it was called at does not get the token into the attempt or the failure.
func TestDeliverRedactsEchoedURL(t *testing.T) {
	t.Parallel()
	secret := "s3cret-echoed"
	url := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "Cannot POST %s (token %s)", r.URL.RequestURI(), r.URL.Query().Get("token"))
	}) + "?token=" + secret
	b := setupDeliver(t, url)

	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypePermanent, false, 0)
	requireRedacted(t, b, err, secret, "receiver answered 404: Cannot POST [redacted]?[redacted] (token [redacted])")
}

// TestDeliverRedactsUnparsableURL: a stored URL that no longer parses fails
// for good, and the message quoting it keeps neither its query nor its
// userinfo.
func TestDeliverRedactsUnparsableURL(t *testing.T) {
	t.Parallel()
	secret := "s3cret-unparsable"
	b := setupDeliver(t, "http://user:"+secret+"@127.0.0.1:80:80/hooks?token="+secret)

	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypePermanent, false, 0)
	require.NotContains(t, err.Error(), secret)
	require.Contains(t, err.Error(), `build request: parse http://127.0.0.1:80:80/[redacted]: invalid port ":80:80" after host`)
	attempts, err := b.st.AttemptsList(context.Background(), b.in.EventID, b.in.EndpointID)
	require.NoError(t, err)
	require.Empty(t, attempts, "no attempt was made")
}

// TestDeliverEscapesControlCharacters: a receiver's 4xx body becomes the
// attempt's error and the failure Temporal gets (the dead letter's
// reason), which operators read in terminals and logs. Control
// characters in it (an OSC 52 that writes the clipboard, a screen clear,
// an 8-bit CSI, a right-to-left override) are stored escaped.
func TestDeliverEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	b := setupDeliver(t, receiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("bad\x1b]52;c;aGk=\x07\x1b[2J\u009b31m\u202e\r\nend"))
	}))
	_, err := b.deliver(t)
	requireFailure(t, err, contract.ErrTypePermanent, false, 0)
	appErr, _ := errors.AsType[*temporal.ApplicationError](err)
	at := b.attempt(t)
	require.NotNil(t, at.Error)
	for _, text := range []string{appErr.Error(), *at.Error} {
		require.False(t, strings.ContainsAny(text, "\x1b\x07\r\n\u009b\u202e"), "control characters kept: %q", text)
		require.Contains(t, text, `receiver answered 400: bad\x1b]52;c;aGk=\x07\x1b[2J\u009b31m\u202e\r\nend`)
	}
}
