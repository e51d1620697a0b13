package redact_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/redact"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, public, secret string }{
		{"https://user:pass@example.com:8443/hooks/a?token=s3cret&x=1#frag", "https://example.com:8443/hooks/a", "https://example.com:8443/[redacted]"},
		{"http://127.0.0.1:9/hook?token=s3cret", "http://127.0.0.1:9/hook", "http://127.0.0.1:9/[redacted]"},
		{"https://example.com?token=s3cret", "https://example.com", "https://example.com"},
		{"https://example.com/?token=s3cret", "https://example.com/", "https://example.com/"},
		{"https://example.com/a%2Fb?token=s3cret", "https://example.com/a%2Fb", "https://example.com/[redacted]"},
		{"http://[::1]:8080/h?token=s3cret", "http://[::1]:8080/h", "http://[::1]:8080/[redacted]"},
		{"https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX", "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX", "https://hooks.slack.com/[redacted]"},
	} {
		u, err := url.Parse(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.public, redact.URL(u, true), tc.in)
		require.Equal(t, tc.public, redact.RawURL(tc.in, true), tc.in)
		require.Equal(t, tc.secret, redact.URL(u, false), tc.in)
		require.Equal(t, tc.secret, redact.RawURL(tc.in, false), tc.in)
	}
}

func TestRedactRawURLThatDoesNotParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, public, secret string }{
		{"http://u:p@127.0.0.1:80:80/hooks?token=s3cret#f", "http://127.0.0.1:80:80/hooks", "http://127.0.0.1:80:80/[redacted]"},
		{"http://exa mple.com/h?token=s3cret", "http://exa mple.com/h", "http://exa mple.com/[redacted]"},
		{"http://example.com/\x7f?token=s3cret", "http://example.com/\x7f", "http://example.com/[redacted]"},
		{"https://u:p@[::1/h?token=s3cret", "https://[::1/h", "https://[::1/[redacted]"},
	} {
		_, err := url.Parse(tc.in)
		require.Error(t, err, tc.in)
		require.Equal(t, tc.public, redact.RawURL(tc.in, true), tc.in)
		require.Equal(t, tc.secret, redact.RawURL(tc.in, false), tc.in)
	}
}
