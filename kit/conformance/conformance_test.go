package conformance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/conformance"
	"github.com/hookflow/hookflow/kit/webhook"
)

// TestCheckerCanFail points the checker at a receiver that answers 200 to
// anything, signed or not: the signature cases, at least, must fail.
func TestCheckerCanFail(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"applied"}`))
	}))
	t.Cleanup(srv.Close)
	secret, err := webhook.NewSecret()
	require.NoError(t, err)

	report, err := conformance.Run(context.Background(), conformance.Config{URL: srv.URL, Secrets: []string{secret}, CorrelationPrefix: "broken"})
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, report.Print(&out))
	t.Log("\n" + out.String())
	require.False(t, report.OK())

	passed := map[string]bool{}
	for _, res := range report.Results {
		passed[res.Name] = res.Passed
	}
	for _, name := range []string{"tampered_body", "expired_timestamp", "wrong_secret", "gap_then_fill"} {
		require.False(t, passed[name], "%s must fail against a receiver that checks nothing", name)
	}
	require.True(t, passed["exact_duplicate"], "what it cannot see from outside still passes")
}

func TestRunRejectsBadConfig(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	for _, cfg := range []conformance.Config{
		{URL: "", Secrets: []string{secret}},
		{URL: "ftp://example.com", Secrets: []string{secret}},
		{URL: "http://example.com/webhook"},
		{URL: "http://example.com/webhook", Secrets: []string{"whsec_short"}},
		{URL: "http://example.com/webhook", Secrets: []string{secret}, CorrelationPrefix: "no.dots"},
	} {
		_, err := conformance.Run(context.Background(), cfg)
		require.Error(t, err, "%+v", cfg)
	}
}
