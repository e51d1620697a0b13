package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRedactError: a *url.Error, as http.Client.Do returns it, becomes its
// operation, the redacted URL and its cause, however deep it is wrapped,
// and nothing of the target's credentials survives elsewhere in the text.
func TestRedactError(t *testing.T) {
	t.Parallel()
	const raw = "http://hook-user:hook-pass@127.0.0.1:9/hook?token=s3cret-token&v=2"
	target, err := url.Parse(raw)
	require.NoError(t, err)
	refused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	ue := &url.Error{Op: "Post", URL: raw, Err: refused}
	const want = "Post http://127.0.0.1:9/hook: dial tcp 127.0.0.1:9: connect: connection refused"

	require.Equal(t, want, redactError(ue, target, true))
	require.Equal(t, "send: "+want, redactError(fmt.Errorf("send: %w", ue), target, true))
	require.Equal(t, "Post http://127.0.0.1:9/hook: context deadline exceeded",
		redactError(&url.Error{Op: "Post", URL: raw, Err: context.DeadlineExceeded}, nil, true))
	require.Equal(t, "boom", redactError(errors.New("boom"), target, true))

	// A cause that quotes the URL in its own way.
	quoting := &url.Error{Op: "Post", URL: raw, Err: fmt.Errorf("proxy refused %s (token s3cret-token, escaped %s)", raw, url.QueryEscape("s3cret-token"))}
	require.Equal(t,
		"Post http://127.0.0.1:9/hook: proxy refused http://[redacted]@127.0.0.1:9/hook?[redacted] (token [redacted], escaped [redacted])",
		redactError(quoting, target, true))

	// By default the path is a secret too (Slack- and Discord-style URLs).
	require.Equal(t, "Post http://127.0.0.1:9/[redacted]: dial tcp 127.0.0.1:9: connect: connection refused", redactError(ue, target, false))
}

// TestScrub: a receiver's answer echoing the URL loses the query, the
// fragment and the userinfo; short values are taken out only where they
// stand in a URL, so the rest of the text keeps its meaning.
func TestScrub(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, url, text, want string }{
		{
			name: "query echoed", url: "https://example.com/hook?token=s3cret-token",
			text: "Cannot POST /hook?token=s3cret-token", want: "Cannot POST /hook?[redacted]",
		},
		{
			name: "value echoed alone", url: "https://example.com/hook?token=s3cret-token&v=2",
			text: "unknown token s3cret-token for v 2", want: "unknown token [redacted] for v 2",
		},
		{
			name: "decoded query echoed", url: "https://example.com/hook?sig=a%2Fb%3Dlong",
			text: "bad ?sig=a/b=long", want: "bad ?[redacted]",
		},
		{
			name: "short query only in a URL", url: "https://example.com/hook?v=2",
			text: "v=2 is fine, /hook?v=2 is not", want: "v=2 is fine, /hook?[redacted] is not",
		},
		{
			name: "fragment", url: "https://example.com/hook#frag-secret",
			text: "at /hook#frag-secret", want: "at /hook#[redacted]",
		},
		{
			name: "userinfo", url: "https://u:p@example.com/hook",
			text: "refused https://u:p@example.com/hook for user u", want: "refused https://[redacted]@example.com/hook for user u",
		},
		{
			name: "nothing to take out", url: "https://example.com/hook",
			text: "receiver answered 500: oops", want: "receiver answered 500: oops",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tc.url)
			require.NoError(t, err)
			require.Equal(t, tc.want, scrub(tc.text, u, true))
		})
	}
	require.Equal(t, "as is", scrub("as is", nil, false))
}

// TestScrubPath: unless the endpoint says its path is public, a receiver's
// answer loses the path it echoes, whole (as sent or decoded), and any
// segment of it long enough to be a token wherever it stands.
func TestScrubPath(t *testing.T) {
	t.Parallel()
	const slack = "https://hooks.slack.com/services/T0001/B0002/XXXXXXXXXXXXXXXXXXXXXXXX"
	u, err := url.Parse(slack)
	require.NoError(t, err)
	require.Equal(t, "no route [redacted] (token [redacted])",
		scrub("no route /services/T0001/B0002/XXXXXXXXXXXXXXXXXXXXXXXX (token XXXXXXXXXXXXXXXXXXXXXXXX)", u, false))
	require.Equal(t, "no route /services/T0001/B0002/XXXXXXXXXXXXXXXXXXXXXXXX",
		scrub("no route /services/T0001/B0002/XXXXXXXXXXXXXXXXXXXXXXXX", u, true))
	enc, err := url.Parse("https://discord.com/api/webhooks/123456789/ab%2Fcd-secret-token")
	require.NoError(t, err)
	require.Equal(t, "bad [redacted] or [redacted]",
		scrub("bad /api/webhooks/123456789/ab%2Fcd-secret-token or /api/webhooks/123456789/ab/cd-secret-token", enc, false))
	// Words of the path are kept where they stand alone.
	plain, err := url.Parse("https://example.com/webhook")
	require.NoError(t, err)
	require.Equal(t, "invalid webhook signature at [redacted]", scrub("invalid webhook signature at /webhook", plain, false))
}
