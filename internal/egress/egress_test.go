package egress_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/egress"
)

func TestCheckURLRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://127.0.0.1",
		"https://127.0.0.1:8443/hook",
		"https://127.1.2.3",
		"https://[::1]",
		"https://[::1]:443/x",
		"https://[::ffff:127.0.0.1]",
		"https://[::ffff:7f00:1]",
		"https://[::]",
		"https://[fe80::1]",
		"https://[fd00::1]",
		"https://10.0.0.1",
		"https://100.64.0.1",
		"https://172.16.0.1",
		"https://172.31.255.255",
		"https://192.168.1.1",
		"https://169.254.169.254",
		"https://169.254.169.254/latest/meta-data/",
		"https://[fd00:ec2::254]",
		"https://[fec0::1]",
		"https://[feff:ffff::1]",
		"https://[100::1]",
		"https://[100::ffff:ffff:ffff:ffff]",
		"https://192.0.2.1",
		"https://198.51.100.7",
		"https://203.0.113.255",
		"https://[::ffff:203.0.113.9]",
		"https://[64:ff9b::c633:6401]",
		"https://0.0.0.0",
		"https://0",
		"https://2130706433",
		"https://0x7f000001",
		"https://0X7F000001",
		"https://0177.0.0.1",
		"https://0x7f.0.0.1",
		"https://127.1",
		"https://localhost",
		"https://LOCALHOST",
		"https://localhost:8443",
		"https://api.localhost",
		"https://localhost.",
		"https://127.0.0.1.",
	} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			err := egress.Policy{}.CheckURL(u)
			require.ErrorIs(t, err, egress.ErrForbiddenTarget)
		})
	}
}

func TestCheckURLRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"http://example.com",      // https only outside allowPrivate
		"http://93.184.216.34",    // likewise
		"ftp://example.com/x",     // not http(s)
		"file:///etc/passwd",      // not http(s)
		"gopher://example.com",    // not http(s)
		"https://",                // no host
		"https:///path",           // no host
		"https://:443",            // no host name
		"example.com/hook",        // no scheme
		"not a url",               // no scheme
		"https://exa mple.com",    // not a URL
		"https://u:p@example.com", // credentials
		"https://u@example.com",   // credentials
		"",
	} {
		t.Run(u, func(t *testing.T) {
			t.Parallel()
			require.Error(t, egress.Policy{}.CheckURL(u))
		})
	}
	// With private targets allowed, plain http is fine but the rest is not.
	for _, u := range []string{"ftp://127.0.0.1", "https://u:p@127.0.0.1", "http://", "not a url"} {
		require.Error(t, egress.Policy{AllowPrivate: true}.CheckURL(u), u)
	}
}

func TestCheckURLAccepts(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://example.com",
		"https://example.com/hooks?x=1",
		"https://93.184.216.34",
		"https://93.184.216.34:8443/hook",
		"https://[2606:2800:220:1:248:1893:25c8:1946]/hook",
		"https://hooks.example.com.",
		"https://10.example.com",
		"https://localhost-hooks.example.com",
	} {
		require.NoError(t, egress.Policy{}.CheckURL(u), u)
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://localhost:8080/hook", "https://10.0.0.1", "http://[::1]:9000"} {
		require.NoError(t, egress.Policy{AllowPrivate: true}.CheckURL(u), u)
	}
}

func TestForbidden(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1", "::1", "::ffff:10.1.2.3", "169.254.169.254", "fd00:ec2::254", "224.0.0.1", "255.255.255.255",
		"fec0::1", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "100::1", "192.0.2.0", "198.51.100.255", "203.0.113.1", "::ffff:192.0.2.1"} {
		require.True(t, egress.Forbidden(netip.MustParseAddr(a)), a)
	}
	// The edges of the documentation, site-local and discard-only ranges
	// stay public.
	for _, a := range []string{"93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1", "11.0.0.1",
		"192.0.3.1", "198.51.101.1", "203.0.112.255", "203.0.114.0", "fe00::1", "100:0:0:1::1"} {
		require.False(t, egress.Forbidden(netip.MustParseAddr(a)), a)
	}
}

// target is a real HTTP server on 127.0.0.1 counting the requests it sees.
func target(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func get(ctx context.Context, c *http.Client, u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// TestClientRefusesPrivateAddressAtDial bypasses CheckURL: the client
// itself refuses to connect, whether the URL names the address or a name
// that resolves to it, so a DNS answer that changes after registration
// cannot reach the inside.
func TestClientRefusesPrivateAddressAtDial(t *testing.T) {
	t.Parallel()
	srv, hits := target(t, nil)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	client := egress.Policy{}.NewClient()
	for _, raw := range []string{
		srv.URL + "/hook",
		"http://localhost:" + u.Port() + "/hook",
		"https://localhost:" + u.Port() + "/hook",
	} {
		resp, err := get(ctx, client, raw)
		if resp != nil {
			resp.Body.Close()
		}
		require.ErrorIs(t, err, egress.ErrForbiddenTarget, raw)
		var opErr *net.OpError
		require.True(t, errors.As(err, &opErr), "refused while dialling: %v", err)
	}
	require.Zero(t, hits.Load(), "the private server saw no request")

	resp, err := get(ctx, egress.Policy{AllowPrivate: true}.NewClient(), srv.URL+"/hook")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", string(body))
	require.EqualValues(t, 1, hits.Load())

	resp, err = get(ctx, egress.Policy{AllowPrivate: true}.NewClient(), "http://localhost:"+u.Port()+"/hook")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestClientDoesNotFollowRedirects: a receiver answering 302 towards an
// internal address gets its 302 back as the answer; the internal address is
// never requested.
func TestClientDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	internal, internalHits := target(t, nil)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector, _ := target(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, internal.URL+"/internal", code)
		})
		// Private targets allowed only so the client can reach the redirector
		// on 127.0.0.1; redirects are refused either way.
		req, err := http.NewRequest(http.MethodPost, redirector.URL+"/hook", nil)
		require.NoError(t, err)
		resp, err := egress.Policy{AllowPrivate: true}.NewClient().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, code, resp.StatusCode)
		require.Equal(t, internal.URL+"/internal", resp.Header.Get("Location"))
	}
	require.Zero(t, internalHits.Load(), "the redirect target was never requested")
}

// TestClientIgnoresProxyEnvironment: a proxy would dial on the client's
// behalf and so sidestep the dial-time check.
func TestClientIgnoresProxyEnvironment(t *testing.T) {
	c := egress.Policy{}.NewClient()
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok)
	require.Nil(t, tr.Proxy)
}

// TestAllowlistLetsOnlyTheNamedTargetsThrough: an exact host:port in the
// allowlist may be private and plain http, at registration and at dial;
// another port of the same host, or another host, may not.
func TestAllowlistLetsOnlyTheNamedTargetsThrough(t *testing.T) {
	t.Parallel()
	srv, hits := target(t, nil)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	p := egress.Policy{Allowlist: []string{"LOCALHOST:" + u.Port(), "receiver:8090"}}

	require.NoError(t, p.CheckURL("http://localhost:"+u.Port()+"/hook"))
	require.NoError(t, p.CheckURL("http://receiver:8090/webhook"))
	require.NoError(t, p.CheckURL("http://Receiver:8090/webhook"), "host names compare without case")
	for _, refused := range []string{
		"http://receiver:8091/webhook",        // another port
		"http://receiver/webhook",             // port 80
		"http://127.0.0.1:" + u.Port() + "/x", // the same server by another name
		"http://postgres:5432/",
	} {
		require.Error(t, p.CheckURL(refused), refused)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := p.NewClient()
	resp, err := get(ctx, client, "http://localhost:"+u.Port()+"/hook")
	require.NoError(t, err)
	resp.Body.Close()
	require.EqualValues(t, 1, hits.Load())
	_, err = get(ctx, client, srv.URL+"/hook") // 127.0.0.1:port is not on the list
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
	require.EqualValues(t, 1, hits.Load())
}

// TestAllowlistIsATenantsOnlyWhenGranted: the allowlist lets a target
// through for a tenant granted it and for no other, at registration and
// at dial; hookflow dev's AllowPrivate is every tenant's.
func TestAllowlistIsATenantsOnlyWhenGranted(t *testing.T) {
	t.Parallel()
	srv, hits := target(t, nil)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	hook := "http://localhost:" + u.Port() + "/hook"
	p := egress.Policy{Allowlist: []string{"localhost:" + u.Port()}}
	require.NoError(t, p.ForTenant(true).CheckURL(hook))
	require.Error(t, p.ForTenant(false).CheckURL(hook))
	require.NoError(t, egress.Policy{AllowPrivate: true}.ForTenant(false).CheckURL(hook))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := get(ctx, p.ForTenant(true).NewClient(), hook)
	require.NoError(t, err)
	resp.Body.Close()
	require.EqualValues(t, 1, hits.Load())
	_, err = get(ctx, p.ForTenant(false).NewClient(), hook)
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
	require.EqualValues(t, 1, hits.Load(), "nothing reached the target for the tenant not granted it")
}

// TestCheckAddr: a broker's address is judged as a webhook's URL is: TLS
// and a public host unless its exact host:port is allowlisted for the
// tenant, and the dial refuses a name that resolves to a private address.
func TestCheckAddr(t *testing.T) {
	t.Parallel()
	p := egress.Policy{Allowlist: []string{"10.0.0.5:4222"}}
	for _, c := range []struct {
		host, port string
		tls        bool
		ok         bool
	}{
		{"nats.example.com", "4222", true, true},
		{"nats.example.com", "4222", false, false},
		{"127.0.0.1", "6379", true, false},
		{"localhost", "6379", true, false},
		{"redis.localhost.", "6379", true, false},
		{"169.254.169.254", "80", true, false},
		{"fe80::1%eth0", "5672", true, false},
		{"", "5672", true, false},
		{"10.0.0.5", "4222", false, true},
		{"10.0.0.5", "4223", true, false},
	} {
		err := p.CheckAddr(c.host, c.port, c.tls)
		require.Equal(t, c.ok, err == nil, "%s:%s tls=%v: %v", c.host, c.port, c.tls, err)
	}
	require.Error(t, p.ForTenant(false).CheckAddr("10.0.0.5", "4222", false), "the allowlist is a granted tenant's only")
	_, err := p.DialContext(t.Context(), "tcp", "127.0.0.1:1")
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
}
