package redact

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestValuesForms: a secret value planted in an answer in
// each form a receiver may quote it in is taken out, and so is the start of
// one that the cut to the recorded length splits.
func TestValuesForms(t *testing.T) {
	t.Parallel()
	const secret = "rcv_live_<a&b>/\"c'd=e+f?g h"
	s := NewValues([]string{secret, "ab"})
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
			got := s.Replace("echo: " + form + " :end")
			require.Contains(t, got, Mark)
			requireNoPiece(t, got, secret)
			if !strings.HasPrefix(name, "inside") {
				require.Equal(t, "echo: "+Mark+" :end", got, "the %s form whole", name)
			}
			got = s.Cut("echo: "+form+" :end", 2048)
			require.True(t, strings.HasPrefix(got, "echo: "), got)
			require.True(t, strings.HasSuffix(got, " :end"), got)
			requireNoPiece(t, got, secret)

			// Cut in the middle: the form's start at the end goes too.
			text := strings.Repeat(".", 100) + form
			cut := s.Cut(text, 100+len(form)/2)
			requireNoPiece(t, cut, secret)
			if !strings.HasPrefix(name, "inside") { // a dump's start is no secret
				require.Equal(t, strings.Repeat(".", 100)+Mark, cut, "the start of the %s form at the cut", name)
			}
		})
	}
	// Short values and short starts are left: they say nothing.
	require.Equal(t, "ab ok rc", s.Cut("ab ok rc", 2048))
	require.Equal(t, "kept as is", (*Values)(nil).Cut("kept as is", 2048))
	require.Equal(t, "kept", (*Values)(nil).Cut("kept as is", 4))
	require.Nil(t, NewValues(nil))
	// Scrubbing lengthens a text of short values: the cut still holds.
	short := NewValues([]string{"k3y!"})
	require.LessOrEqual(t, len(short.Cut(strings.Repeat("k3y!", 100), 64)), 64)
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
