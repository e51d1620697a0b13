package redact_test

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/redact"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"https://user:pass@example.com:8443/hooks/a?token=s3cret&x=1#frag", "https://example.com:8443/hooks/a"},
		{"http://127.0.0.1:9/hook?token=s3cret", "http://127.0.0.1:9/hook"},
		{"https://example.com?token=s3cret", "https://example.com"},
		{"https://example.com/a%2Fb?token=s3cret", "https://example.com/a%2Fb"},
		{"http://[::1]:8080/h?token=s3cret", "http://[::1]:8080/h"},
		{"https://example.com/hook", "https://example.com/hook"},
	} {
		u, err := url.Parse(tc.in)
		require.NoError(t, err)
		require.Equal(t, tc.want, redact.URL(u), tc.in)
		require.Equal(t, tc.want, redact.RawURL(tc.in), tc.in)
	}
}

func TestRedactRawURLThatDoesNotParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"http://u:p@127.0.0.1:80:80/hooks?token=s3cret#f", "http://127.0.0.1:80:80/hooks"},
		{"http://exa mple.com/h?token=s3cret", "http://exa mple.com/h"},
		{"http://example.com/\x7f?token=s3cret", "http://example.com/\x7f"},
		{"https://u:p@[::1/h?token=s3cret", "https://[::1/h"},
	} {
		_, err := url.Parse(tc.in)
		require.Error(t, err, tc.in)
		require.Equal(t, tc.want, redact.RawURL(tc.in), tc.in)
	}
}
