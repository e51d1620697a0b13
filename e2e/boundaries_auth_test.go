package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxyFrom is a reverse proxy on 127.0.0.1 in front of the API, whose
// connections to the API come from local (a loopback address of its own,
// so the API can tell it from a client's direct connection).
func (b *bundle) proxyFrom(local string) *httptest.Server {
	b.t.Helper()
	target, err := url.Parse(b.apiURL)
	require.NoError(b.t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	rp.Transport = &http.Transport{DialContext: dialer.DialContext}
	srv := httptest.NewServer(rp)
	b.t.Cleanup(srv.Close)
	return srv
}

// getVia sends GET /v1/session to base with token, from loopback address
// from ("" for any) and with X-Forwarded-For xff ("" for none), and
// answers the status.
func getVia(t *testing.T, base, token, from, xff string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/session", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	tr := &http.Transport{}
	if from != "" {
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// badKey is a well-formed API key no one holds, the i-th of a guesser's:
// each starts differently.
func badKey(i int) string {
	n := fmt.Sprint(i)
	return "hfk_" + n + strings.Repeat("0", 42-len(n)) + "A"
}

// TestFailedLoginsLockOutNoValidCredential: behind a reverse proxy that no
// setting names, every client shares the proxy's address. 60 failed
// authentications through it (bad keys, bad portal tokens, garbage) are
// answered 429 once the address's bucket is spent, and all the while the
// bootstrap token, a tenant's key and a portal session are let through
// the same proxy.
func TestFailedLoginsLockOutNoValidCredential(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	s := b.newLimitedSide("bounds-auth-" + b.prefix)
	proxy := b.proxyFrom("127.0.0.1")
	codes := map[int]int{}
	for i := range 60 {
		bad := []string{badKey(i), "hfp_" + strings.Repeat("x", 43), "garbage"}[i%3]
		codes[getVia(t, proxy.URL, bad, "", "")]++
	}
	require.Positive(t, codes[http.StatusTooManyRequests], "%v", codes)
	require.Equal(t, 60, codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests], "%v", codes)
	for _, tok := range []string{b.cfg.APIToken, s.key, s.session} {
		require.Equal(t, http.StatusOK, getVia(t, proxy.URL, tok, "", ""))
		require.Equal(t, http.StatusOK, getVia(t, b.apiURL, tok, "", ""))
	}
	// The guesser is refused all the same. The bucket refills one a second,
	// and the calls above may have taken seconds on a loaded machine: a
	// refilled place may let a first guess be answered 401, but not the
	// burst's worth that follows.
	refused := false
	for i := 0; i < 40 && !refused; i++ {
		refused = getVia(t, proxy.URL, badKey(i), "", "") == http.StatusTooManyRequests
	}
	require.True(t, refused, "the guesser's failures after the valid calls are refused 429 within a burst")
}

// TestTrustedProxiesNameTheClient: with HOOKFLOW_TRUSTED_PROXIES naming
// the proxy (127.0.0.2), the client is the address the proxy puts in
// X-Forwarded-For: an attacker's failures (from 127.0.0.7) spend its own
// bucket, and another client behind the same proxy (127.0.0.9) is
// answered 401, not 429; a direct connection's X-Forwarded-For (from
// 127.0.0.1, not trusted) is ignored, its failures its own address's.
func TestTrustedProxiesNameTheClient(t *testing.T) {
	t.Parallel()
	b := setup(t, options{trustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	proxy := b.proxyFrom("127.0.0.2")
	for i := range 40 {
		getVia(t, proxy.URL, badKey(i), "127.0.0.7", "")
	}
	require.Equal(t, http.StatusTooManyRequests, getVia(t, proxy.URL, badKey(100), "127.0.0.7", ""))
	require.Equal(t, http.StatusUnauthorized, getVia(t, proxy.URL, badKey(101), "127.0.0.9", ""), "another client behind the proxy")
	require.Equal(t, http.StatusOK, getVia(t, proxy.URL, b.cfg.APIToken, "127.0.0.7", ""), "the attacker's address, with a good token")
	for i := range 40 {
		getVia(t, b.apiURL, badKey(200+i), "127.0.0.1", fmt.Sprintf("192.0.2.%d", i))
	}
	require.Equal(t, http.StatusTooManyRequests, getVia(t, b.apiURL, badKey(300), "127.0.0.1", "192.0.2.250"))
	require.Equal(t, http.StatusUnauthorized, getVia(t, proxy.URL, badKey(301), "127.0.0.10", ""))
}
