package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
	standard "github.com/hookflow/hookflow/kit/webhook"
)

// TestSendReadsTheAnswer: each receiver answer maps to the outcome the
// wire contract gives it, and to whether the endpoint's breaker counts it
// as an outage; the status is kept, and what is recorded names the answer.
func TestSendReadsTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code       int
		retryAfter string
		want       transport.Outcome
		outage     bool
		wait       time.Duration
	}{
		{code: 200, want: transport.Delivered},
		{code: 204, want: transport.Delivered},
		{code: 202, want: transport.Retry},
		{code: 302, want: transport.Permanent},
		{code: 400, want: transport.Permanent},
		{code: 408, want: transport.Retry, outage: true},
		{code: 410, want: transport.Gone},
		{code: 429, want: transport.Retry, outage: true},
		{code: 429, retryAfter: "30", want: transport.Retry, outage: true, wait: 30 * time.Second},
		{code: 503, retryAfter: "7", want: transport.Retry, outage: true, wait: 7 * time.Second},
		{code: 500, retryAfter: "7", want: transport.Retry, outage: true},
		{code: 502, want: transport.Retry, outage: true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tc.retryAfter != "" {
				w.Header().Set("Retry-After", tc.retryAfter)
			}
			w.WriteHeader(tc.code)
			_, _ = w.Write([]byte("said so"))
		}))
		res, err := New(egress.Policy{AllowPrivate: true}).Send(context.Background(), transport.Destination{EndpointID: "ep_1", URL: srv.URL, Secrets: []string{secret(t)}},
			transport.Message{EventID: "evt_1", Body: []byte(`{}`), At: time.Now()})
		srv.Close()
		require.NoError(t, err)
		require.Equal(t, tc.want, res.Outcome, "%d", tc.code)
		require.Equal(t, tc.code, res.Status)
		require.Equal(t, tc.outage, res.Outage, "%d outage", tc.code)
		require.Equal(t, tc.wait, res.RetryAfter, "%d Retry-After %q", tc.code, tc.retryAfter)
		if tc.want == transport.Delivered {
			require.Empty(t, res.Detail)
			continue
		}
		require.Contains(t, res.Detail, "receiver answered")
		require.Contains(t, res.Detail, "said so")
		require.NotContains(t, res.Summary, "said so", "the summary holds none of the receiver's words")
	}
}

// TestSendConfinesTenantsNotGrantedTheAllowlist: a loopback target that the
// deployment allowlists is dialled for a tenant granted the allowlist, and
// refused at dial for any other, which counts as an outage to retry.
func TestSendConfinesTenantsNotGrantedTheAllowlist(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	tr := New(egress.Policy{Allowlist: []string{srv.Listener.Addr().String()}})
	d := transport.Destination{EndpointID: "ep_1", URL: srv.URL, Secrets: []string{secret(t)}}
	m := transport.Message{EventID: "evt_1", Body: []byte(`{}`), At: time.Now()}

	res, err := tr.Send(context.Background(), d, m)
	require.NoError(t, err)
	require.Equal(t, transport.Retry, res.Outcome)
	require.True(t, res.Outage)
	require.Zero(t, res.Status)
	require.Contains(t, res.Detail, "not allowed")
	require.Error(t, tr.Validate(context.Background(), d), "the API refuses what the dial would")

	d.PrivateTargets = true
	require.NoError(t, tr.Validate(context.Background(), d))
	res, err = tr.Send(context.Background(), d, m)
	require.NoError(t, err)
	require.Equal(t, transport.Delivered, res.Outcome)
	require.EqualValues(t, 1, hits.Load())
}

func secret(t *testing.T) string {
	t.Helper()
	s, err := standard.NewSecret()
	require.NoError(t, err)
	return s
}
