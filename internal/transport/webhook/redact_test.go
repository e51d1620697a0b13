package webhook

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
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

// TestValueScrubberForms: a custom header's value planted in an answer in
// each form a receiver may quote it in is taken out, and so is the start of
// one that the cut to the recorded length splits.
func TestValueScrubberForms(t *testing.T) {
	t.Parallel()
	const secret = "rcv_live_<a&b>/\"c'd=e+f?g h"
	s := newValueScrubber(headerValues(map[string]string{"X-Api-Key": secret, "X-Short": "ab"}))
	require.NotNil(t, s)
	forms := map[string]string{
		"as is":                secret,
		"JSON":                 `rcv_live_\u003ca\u0026b\u003e/\"c'd=e+f?g h`,
		"JSON, no HTML escape": `rcv_live_<a&b>/\"c'd=e+f?g h`,
		"JSON, slash escaped":  `rcv_live_\u003ca\u0026b\u003e\/\"c'd=e+f?g h`,
		"HTML":                 "rcv_live_&lt;a&amp;b&gt;/&#34;c&#39;d=e+f?g h",
		"HTML, named quotes":   "rcv_live_&lt;a&amp;b&gt;/&quot;c&#x27;d=e+f?g h",
		"query escaped":        url.QueryEscape(secret),
		"query escaped, lower": strings.ToLower(url.QueryEscape(secret)),
		"path escaped":         url.PathEscape(secret),
		"every byte escaped":   "%72%63%76%5F%6C%69%76%65%5F%3C%61%26%62%3E%2F%22%63%27%64%3D%65%2B%66%3F%67%20%68",
		"base64":               base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64, unpadded":     base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64url":            base64.URLEncoding.EncodeToString([]byte(secret)),
		"base64url, unpadded":  base64.RawURLEncoding.EncodeToString([]byte(secret)),
	}
	// Inside a longer text encoded whole, at each of the three offsets.
	for off := range 3 {
		dump := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", off) + "X-Api-Key: " + secret + "\r\nAccept: */*"))
		forms[fmt.Sprintf("inside base64, offset %d", off)] = dump
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := s.replace("echo: " + form + " :end")
			require.Contains(t, got, redactedMark)
			requireNoPiece(t, got, secret)
			if !strings.HasPrefix(name, "inside") {
				require.Equal(t, "echo: "+redactedMark+" :end", got, "the %s form whole", name)
			}
			got = s.cut("echo: "+form+" :end", 2048)
			require.True(t, strings.HasPrefix(got, "echo: "), got)
			require.True(t, strings.HasSuffix(got, " :end"), got)
			requireNoPiece(t, got, secret)

			// Cut in the middle: the form's start at the end goes too.
			text := strings.Repeat(".", 100) + form
			cut := s.cut(text, 100+len(form)/2)
			requireNoPiece(t, cut, secret)
			if !strings.HasPrefix(name, "inside") { // a dump's start is no secret
				require.Equal(t, strings.Repeat(".", 100)+redactedMark, cut, "the start of the %s form at the cut", name)
			}
		})
	}
	// Short values and short starts are left: they say nothing.
	require.Equal(t, "ab ok rc", s.cut("ab ok rc", 2048))
	require.Equal(t, "kept as is", (*valueScrubber)(nil).cut("kept as is", 2048))
	require.Equal(t, "kept", (*valueScrubber)(nil).cut("kept as is", 4))
	require.Nil(t, newValueScrubber(nil))
	// Scrubbing lengthens a text of short values: the cut still holds.
	short := newValueScrubber([]string{"k3y!"})
	require.LessOrEqual(t, len(short.cut(strings.Repeat("k3y!", 100), 64)), 64)
}

// requireNoPiece fails when text holds any 8 bytes in a row of secret, in
// any form secretForms makes of it but the base64 texts of longer ones
// (their edges hold bits of their neighbours).
func requireNoPiece(t *testing.T, text, secret string) {
	t.Helper()
	for _, f := range secretForms(secret) {
		for i := 0; i+8 <= len(f); i++ {
			require.NotContains(t, text, f[i:i+8], "a piece of the form %q", f)
		}
	}
}
