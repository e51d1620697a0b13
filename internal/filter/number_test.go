package filter

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCmpNumberAgreesWithBigRat holds the exact comparison to math/big's
// on numbers written every way JSON allows, with exponents small enough
// for big.Rat to hold.
func TestCmpNumberAgreesWithBigRat(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var s string
		if r.IntN(2) == 0 {
			s = "-"
		}
		digits := func(n int) string {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte('0' + r.IntN(3)*r.IntN(4)) // zeros often
			}
			return string(b)
		}
		intPart := digits(1 + r.IntN(20))
		for len(intPart) > 1 && intPart[0] == '0' {
			intPart = intPart[1:]
		}
		s += intPart
		if r.IntN(2) == 0 {
			s += "." + digits(1+r.IntN(20))
		}
		if r.IntN(2) == 0 {
			s += []string{"e", "E", "e+", "e-", "E-0"}[r.IntN(5)] + fmt.Sprint(r.IntN(40))
		}
		return s
	}
	for range 20000 {
		a, b := gen(), gen()
		na, ok := parseNumber(a)
		require.True(t, ok, a)
		nb, ok := parseNumber(b)
		require.True(t, ok, b)
		ra, _ := new(big.Rat).SetString(a)
		rb, _ := new(big.Rat).SetString(b)
		require.Equal(t, ra.Cmp(rb), cmpNumber(&na, &nb), "%s vs %s", a, b)
	}
}

func TestCmpNumber(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"9007199254740993", "9007199254740992", 1},
		{"1", "1.0", 0},
		{"1", "1e0", 0},
		{"1", "10E-1", 0},
		{"-0", "0.000e99", 0},
		{"0.001", "1e-3", 0},
		{"-1", "0", -1},
		{"-1", "-2", 1},
		{"1e99999999999999999999", "9e99999999999999999998", 1},
		{"-1e99999999999999999999", "-9e99999999999999999998", -1},
		{"1e-99999999999999999999", "1e-99999999999999999998", -1},
		{"1e00000000000000000000000000001", "10", 0},
		{"123e1152921504606846975", "1.23e1152921504606846977", 0},
	} {
		na, ok := parseNumber(c.a)
		require.True(t, ok, c.a)
		nb, ok := parseNumber(c.b)
		require.True(t, ok, c.b)
		require.Equal(t, c.want, cmpNumber(&na, &nb), "%s vs %s", c.a, c.b)
		require.Equal(t, -c.want, cmpNumber(&nb, &na), "%s vs %s", c.b, c.a)
	}
	for _, bad := range []string{"", "-", "01", "1.", ".1", "1e", "1e+", "+1", "1x", "0x10", "NaN"} {
		_, ok := parseNumber(bad)
		require.False(t, ok, bad)
	}
}
