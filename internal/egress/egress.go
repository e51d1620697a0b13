// Package egress is how hookflow reaches receivers: an HTTP client that never
// follows redirects and refuses to connect to loopback, private, link-local,
// site-local, metadata, documentation, discard or unspecified addresses, except the exact host:port targets a
// deployment allowlists (its own receiver, say) and, in hookflow dev and the
// tests, every target. The check runs on the address actually dialled (a
// net.Dialer Control hook), so a name that resolves differently later (DNS
// rebinding) cannot get around it.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrForbiddenTarget is returned for a destination hookflow must not reach.
var ErrForbiddenTarget = errors.New("destination address is not allowed (loopback, private, link-local or metadata)")

// blocked lists the ranges a public webhook target must never be in: an
// array, so nothing can append to it.
var blocked = [...]netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.0.0.0/24"),
	// The documentation networks (TEST-NET-1 to 3, RFC 5737): never a
	// real receiver, and on some networks routed to something internal.
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	// IPv4-compatible (deprecated, RFC 4291): a stack that still speaks it
	// sends ::a.b.c.d to a.b.c.d. It holds :: and ::1 too.
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::1/128"),
	// SIIT's IPv4-translated addresses (RFC 2765): ::ffff:0:a.b.c.d.
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	// Local-use NAT64 (RFC 8215): where the IPv4 address sits depends on a
	// prefix length only the network knows, so none of it is judged by the
	// address inside. (The well-known 64:ff9b::/96 is, in Forbidden.)
	netip.MustParsePrefix("64:ff9b:1::/48"),
	// The discard-only prefix (RFC 6666): a sink, never a receiver.
	netip.MustParsePrefix("100::/64"),
	// Teredo, whose addresses carry a server's and (obfuscated) a client's
	// IPv4 address, and 6to4 (deprecated, RFC 7526), whose relays forward to
	// the IPv4 address in bits 16 to 47.
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	// Site-local (deprecated, RFC 3879), which older stacks still route
	// inside a site as fc00::/7 is.
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
}

// nat64 is the well-known NAT64 prefix (RFC 6052): behind DNS64 a name with
// only an A record resolves to it, the IPv4 address in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Forbidden reports whether addr is in a range public targets must avoid.
// A zone does not change the answer (netip.Prefix.Contains is false for any
// zoned address, so it is taken off first), and an address behind the
// well-known NAT64 prefix is judged by the IPv4 address it reaches.
func Forbidden(addr netip.Addr) bool {
	addr = addr.WithZone("").Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range blocked {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Policy says which targets may be private (and plain http).
type Policy struct {
	// AllowPrivate lets every target through: hookflow dev and the tests,
	// whose receivers listen on loopback. No setting turns it on.
	AllowPrivate bool
	// Allowlist holds exact host:port targets that may be private and plain
	// http (HOOKFLOW_PRIVATE_TARGET_ALLOWLIST), compared without case.
	Allowlist []string
}

// ForTenant is the policy for a tenant's endpoints: the allowlist applies
// only to a tenant granted it (its allow_private_targets), so that a
// customer cannot aim at an internal address the operator allowlisted for
// itself. AllowPrivate, hookflow dev's, applies to every tenant. The
// attempts of tenants granted it and of the others go through two
// clients (NewClient of each): a connection one kept alive to an
// allowlisted target is never the other's.
func (p Policy) ForTenant(granted bool) Policy {
	if !granted {
		p.Allowlist = nil
	}
	return p
}

// allows reports whether hostPort (as dialled: host:port, port explicit)
// may be private.
func (p Policy) allows(hostPort string) bool {
	if p.AllowPrivate {
		return true
	}
	for _, a := range p.Allowlist {
		if strings.EqualFold(a, hostPort) {
			return true
		}
	}
	return false
}

// CheckURL validates an endpoint URL at registration: http or https with a
// host and no credentials; unless the policy allows its host:port, https
// only and no literal forbidden address (names are checked again at every
// dial).
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		// A *url.Error repeats the URL, query string included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("scheme must be http or https")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("URL needs a host")
	}
	if u.User != nil {
		return errors.New("URL must not carry credentials")
	}
	// A zone (https://[fe80::1%25eth0]/) names an interface of the machine
	// that dials: never a public target, whatever the address.
	if strings.Contains(u.Hostname(), "%") {
		return fmt.Errorf("%w: a host with an IPv6 zone", ErrForbiddenTarget)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if p.allows(net.JoinHostPort(u.Hostname(), port)) {
		return nil
	}
	if u.Scheme != "https" {
		return errors.New("scheme must be https (an exact host:port in HOOKFLOW_PRIVATE_TARGET_ALLOWLIST may use http)")
	}
	return checkHost(u.Hostname())
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// parseLooseIP also reads the forms inet_aton accepts (decimal 2130706433,
// hex 0x7f000001, octal 0177.0.0.1), which some resolvers turn into
// addresses; a host spelled like that is judged by the address it means.
func parseLooseIP(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a, true
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		var n uint64
		var err error
		switch {
		case p == "0x" || p == "0X":
			// inet_aton reads a bare 0x as 0.
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			_, err = fmt.Sscanf(p[2:], "%x", &n)
		case len(p) > 1 && p[0] == '0':
			_, err = fmt.Sscanf(p, "%o", &n)
		default:
			_, err = fmt.Sscanf(p, "%d", &n)
		}
		if err != nil || p == "" {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	switch len(nums) {
	case 1:
		v = nums[0]
	case 2:
		v = nums[0]<<24 | nums[1]
	case 3:
		v = nums[0]<<24 | nums[1]<<16 | nums[2]
	case 4:
		v = nums[0]<<24 | nums[1]<<16 | nums[2]<<8 | nums[3]
	}
	if v > 0xffffffff {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// DialContext dials address (host:port, as configured, before
// resolution) under the policy: an allowlisted target as is, any other
// only to an address that is not forbidden, checked on the address
// actually dialled, so that a name that resolves elsewhere later (DNS
// rebinding) is still refused. Every transport dials through it.
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if p.allows(address) {
		return openDialer.DialContext(ctx, network, address)
	}
	return guardedDialer.DialContext(ctx, network, address)
}

var (
	openDialer    = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	guardedDialer = &net.Dialer{Timeout: openDialer.Timeout, KeepAlive: openDialer.KeepAlive, Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, address)
		}
		// A zoned address is on a link of this machine, never public.
		if ap.Addr().Zone() != "" || Forbidden(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrForbiddenTarget, address)
		}
		return nil
	}}
)

// CheckAddr validates a broker's address (host and port, as configured) at
// registration as CheckURL does a URL's: unless the policy allows its
// host:port, TLS only (tls says the connection will use it) and no
// localhost or literal forbidden address (names are checked again at every
// dial, DialContext).
func (p Policy) CheckAddr(host, port string, tls bool) error {
	if host == "" || port == "" {
		return errors.New("an address needs a host and a port")
	}
	if strings.Contains(host, "%") {
		return fmt.Errorf("%w: a host with an IPv6 zone", ErrForbiddenTarget)
	}
	if p.allows(net.JoinHostPort(host, port)) {
		return nil
	}
	if !tls {
		return errors.New("the connection must use TLS (an exact host:port in HOOKFLOW_PRIVATE_TARGET_ALLOWLIST may go without)")
	}
	return checkHost(host)
}

// checkHost refuses a host that names this machine or a forbidden address.
func checkHost(host string) error {
	// Judge the host as the dialer does: a name that is not ASCII goes
	// through IDNA's lookup mapping first, which turns fullwidth digits
	// into digits and U+24DB… into "localhost". A trailing dot makes a
	// name fully qualified; it resolves the same.
	if !isASCII(host) {
		if a, err := idna.Lookup.ToASCII(host); err == nil {
			host = a
		}
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return ErrForbiddenTarget
	}
	if addr, ok := parseLooseIP(host); ok && Forbidden(addr) {
		return ErrForbiddenTarget
	}
	return nil
}

// NewClient returns the HTTP client deliveries use. Redirects are returned
// as responses, never followed.
func (p Policy) NewClient() *http.Client {
	dial := p.DialContext
	tr := &http.Transport{
		DialContext:           dial,
		Proxy:                 nil,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
