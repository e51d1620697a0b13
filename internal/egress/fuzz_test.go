package egress_test

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/idna"

	"github.com/hookflow/hookflow/internal/egress"
)

// The seed corpus is in testdata/fuzz/<target> (plain `go test` runs it;
// `make test-fuzz` fuzzes from it): URL and address forms of forbidden
// targets and a few public ones (zones, IPv4-mapped and translated IPv6,
// decimal, octal and hex IPv4, the unspecified addresses, non-ASCII names
// that IDNA maps onto them) and what fuzzing found ("https://0X": inet_aton
// reads a bare 0x as 0).

// FuzzCheckURL: whatever URL registration accepts names no forbidden target
// under any reading of its host: as net/netip and net parse it, as inet_aton
// (decimal, octal, hex, one to four parts) reads it, and as http.Transport
// dials it (after its IDNA mapping); and it carries no zone. Forbidden is
// judged by the standard library's own classification plus the ranges a
// translator maps onto IPv4, not by the blocklist under test.
func FuzzCheckURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw string) {
		if err := (egress.Policy{}).CheckURL(raw); err != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", raw, err)
		}
		for _, host := range dialledHosts(u) {
			if strings.Contains(host, "%") {
				t.Fatalf("accepted %q: host %q has a zone", raw, host)
			}
			name := strings.TrimSuffix(strings.ToLower(host), ".")
			if name == "localhost" || strings.HasSuffix(name, ".localhost") {
				t.Fatalf("accepted %q: host %q is loopback by name", raw, host)
			}
			for _, a := range readings(host) {
				if forbiddenOracle(a) {
					t.Fatalf("accepted %q: host %q reads as %s", raw, host, a)
				}
			}
		}
	})
}

// FuzzForbidden: the dial check (Forbidden, on the address actually
// dialled) agrees with the oracle for every address, zoned or not, and for
// every IPv4 address in its IPv6 forms.
func FuzzForbidden(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte, zone string) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		if a.Is6() && zone != "" && !strings.ContainsAny(zone, "\x00") {
			a = a.WithZone(zone)
		}
		if forbiddenOracle(a) && !egress.Forbidden(a) {
			t.Fatalf("%s is forbidden but passes", a)
		}
		if a.Is4() {
			v4 := a.As4()
			for _, in6 := range []string{"::ffff:", "::", "64:ff9b::", "::ffff:0:"} {
				m := netip.MustParseAddr(in6 + a.String())
				if egress.Forbidden(a) && !egress.Forbidden(m) {
					t.Fatalf("%s is forbidden but %s passes", a, m)
				}
			}
			sixToFour := netip.AddrFrom16([16]byte{0x20, 0x02, v4[0], v4[1], v4[2], v4[3]})
			if egress.Forbidden(a) && !egress.Forbidden(sixToFour) {
				t.Fatalf("%s is forbidden but %s passes", a, sixToFour)
			}
		}
	})
}

// dialledHosts are the host as registered and as http.Transport dials it:
// a host that is not ASCII goes through IDNA's lookup mapping (fullwidth
// digits become digits, U+3002 a dot).
func dialledHosts(u *url.URL) []string {
	hosts := []string{u.Hostname()}
	if a, err := idna.Lookup.ToASCII(u.Hostname()); err == nil {
		hosts = append(hosts, a)
	}
	return hosts
}

// readings are the addresses host may stand for.
func readings(host string) []netip.Addr {
	h := strings.TrimSuffix(host, ".")
	var out []netip.Addr
	if a, err := netip.ParseAddr(h); err == nil {
		out = append(out, a)
	}
	if ip := net.ParseIP(h); ip != nil {
		if a, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, a)
		}
	}
	if a, ok := inetAton(h); ok {
		out = append(out, a)
	}
	return out
}

// inetAton reads host as glibc's inet_aton does: one to four parts, each
// decimal, octal (a leading 0) or hex (0x), the last filling the bytes
// left. It is written apart from the package's own reader, as the oracle.
func inetAton(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
			if digits == "" {
				digits = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(digits, base, 64)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var v uint64
	for i, x := range vals[:len(vals)-1] {
		if x > 255 {
			return netip.Addr{}, false
		}
		v |= x << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(32-8*(len(vals)-1)) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// forbiddenOracle: the standard library's classes (loopback, private,
// link-local, multicast, unspecified), the IPv4 special ranges it does not
// class (this network, shared address space, the IETF's, documentation,
// benchmarking, reserved and broadcast; IPv6 site-local and discard-only,
// the EC2 metadata service's IPv6), and every IPv6
// form a translator maps onto an IPv4 address, judged by that address.
func forbiddenOracle(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	if a.Is4() {
		b := a.As4()
		return b[0] == 0 || b[0] >= 240 || (b[0] == 100 && b[1]&0xc0 == 64) ||
			(b[0] == 192 && b[1] == 0 && (b[2] == 0 || b[2] == 2)) || (b[0] == 198 && b[1]&0xfe == 18) ||
			(b[0] == 198 && b[1] == 51 && b[2] == 100) || (b[0] == 203 && b[1] == 0 && b[2] == 113)
	}
	b := a.As16()
	v4 := netip.AddrFrom4([4]byte(b[12:]))
	switch {
	case a == netip.MustParseAddr("fd00:ec2::254"):
		return true
	case isZero(b[:12]): // IPv4-compatible
		return true
	case isZero(b[:8]) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0: // SIIT
		return true
	case netip.MustParsePrefix("64:ff9b::/96").Contains(a):
		return forbiddenOracle(v4)
	case netip.MustParsePrefix("64:ff9b:1::/48").Contains(a), netip.MustParsePrefix("2001::/32").Contains(a):
		return true
	case b[0] == 0x20 && b[1] == 0x02: // 6to4, refused whole
		return true
	case b[0] == 0xfe && b[1]&0xc0 == 0xc0: // site-local, fec0::/10
		return true
	case b[0] == 0x01 && isZero(b[1:8]): // discard-only, 100::/64
		return true
	}
	return false
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
