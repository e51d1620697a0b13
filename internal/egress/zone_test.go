package egress_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/egress"
)

// TestCheckURLRefusesZonedHosts: netip.Prefix.Contains is false for any
// address with a zone, so a zoned loopback or link-local literal once
// passed the blocklist. A zone means nothing on a public address either: a
// zoned host is refused whatever the address.
func TestCheckURLRefusesZonedHosts(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"https://[::1%25lo]:6443/",
		"https://[::1%25lo]/",
		"https://[fe80::1%25eth0]/",
		"https://[fe80::1%251]/",
		"https://[::ffff:127.0.0.1%25lo]/",
		"https://[fd00::1%25eth0]:8443/x",
		"https://[2606:4700::1111%25eth0]/",
	} {
		require.ErrorIs(t, egress.Policy{}.CheckURL(u), egress.ErrForbiddenTarget, u)
	}
}

// TestForbiddenIgnoresZones: the dial check is judged on the address
// without its zone, so a zone cannot take an address out of its range.
func TestForbiddenIgnoresZones(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"::1%lo", "fe80::1%eth0", "fd00::2%eth0", "::ffff:10.0.0.1%eth0", "ff02::1%lo"} {
		require.True(t, egress.Forbidden(netip.MustParseAddr(a)), a)
	}
}

// TestForbiddenTranslatedRanges: addresses that carry an IPv4 address a
// translator (NAT64 behind DNS64, 6to4, IPv4-compatible, SIIT) turns back
// into it. Behind DNS64 a name whose only A record is 10.x resolves to
// 64:ff9b::a00:x: that must be judged as 10.x. A public IPv4 address behind
// the well-known NAT64 prefix stays reachable (IPv6-only networks deliver
// that way); the local-use NAT64 prefix, 6to4, IPv4-compatible, SIIT and
// Teredo have no place in a webhook target and are refused whole.
func TestForbiddenTranslatedRanges(t *testing.T) {
	t.Parallel()
	for _, a := range []string{
		"64:ff9b::10.0.0.1", "64:ff9b::127.0.0.1", "64:ff9b::169.254.169.254", "64:ff9b::a00:1", "64:ff9b::",
		"64:ff9b:1::1", "64:ff9b:1::8.8.8.8", "64:ff9b:1:ffff::1",
		"2002::1", "2002:7f00:1::", "2002:0808:0808::1",
		"::127.0.0.1", "::10.0.0.1", "::8.8.8.8", "::2",
		"::ffff:0:127.0.0.1", "::ffff:0:8.8.8.8",
		"2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
	} {
		require.True(t, egress.Forbidden(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"64:ff9b::8.8.8.8", "64:ff9b::5db8:d822", "2001:4860:4860::8888"} {
		require.False(t, egress.Forbidden(netip.MustParseAddr(a)), a)
	}
	for _, u := range []string{"https://[64:ff9b::10.0.0.1]/", "https://[2002:a00:1::]/", "https://[::127.0.0.1]/"} {
		require.ErrorIs(t, egress.Policy{}.CheckURL(u), egress.ErrForbiddenTarget, u)
	}
}

// TestClientRefusesZonedAddressAtDial bypasses CheckURL: a server on
// [::1] is not reached through [::1%lo] either.
func TestClientRefusesZonedAddressAtDial(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp6", "[::1]:0")
	require.NoError(t, err, "this test needs IPv6 loopback")
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	port := netip.MustParseAddrPort(ln.Addr().String()).Port()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw := "http://[::1%25lo]:" + strconv.Itoa(int(port)) + "/hook"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	require.NoError(t, err)
	resp, err := egress.Policy{}.NewClient().Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	require.ErrorIs(t, err, egress.ErrForbiddenTarget)
	require.Zero(t, hits.Load(), "the loopback server saw no request")
}
