package filter

import (
	"math/big"
	"strings"
)

// number is a JSON number held exactly: its value is 0.digits × 10^adj,
// with digits free of leading and trailing zeros ("" for zero). Two
// numbers written differently (1, 1.0, 10e-1) normalise to the same form,
// and comparing two forms allocates nothing, which big.Rat could not
// promise: a producer's 1e999999 would cost a bignum of that size at every
// acceptance. Exponents past int64 keep their exact value in bigAdj.
type number struct {
	neg    bool
	digits string
	adj    int64
	bigAdj *big.Int
}

// maxSmallExp bounds the exponents kept in an int64, far enough from its
// limits that adding a digit count cannot overflow.
const maxSmallExp = 1 << 60

// parseNumber reads a number in JSON's grammar (json.Number's text); ok is
// false for anything else.
func parseNumber(s string) (n number, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		n.neg = true
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return number{}, false
	}
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[fs:i]
		if frac == "" {
			return number{}, false
		}
	}
	expNeg := false
	var expDigits string
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		expDigits = strings.TrimLeft(s[es:i], "0")
		if es == i {
			return number{}, false
		}
	}
	if i != len(s) {
		return number{}, false
	}

	// value = 0.(intPart frac) × 10^(len(intPart) + exp); the position of
	// the first significant digit is what leading zeros shift.
	mant := intPart + frac
	lead := len(mant) - len(strings.TrimLeft(mant, "0"))
	mant = strings.TrimRight(mant[lead:], "0")
	if mant == "" {
		return number{}, true // zero, whatever its sign or exponent
	}
	n.digits = mant
	shift := int64(len(intPart) - lead)
	if len(expDigits) <= 18 {
		var e int64
		for j := 0; j < len(expDigits); j++ {
			e = e*10 + int64(expDigits[j]-'0')
		}
		if expNeg {
			e = -e
		}
		if e > -maxSmallExp && e < maxSmallExp {
			n.adj = e + shift
			return n, true
		}
	}
	e, _ := new(big.Int).SetString(expDigits, 10)
	if expNeg {
		e.Neg(e)
	}
	n.bigAdj = e.Add(e, big.NewInt(shift))
	return n, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (n *number) isZero() bool { return n.digits == "" }

// cmpNumber compares a and b as numbers: -1, 0 or +1.
func cmpNumber(a, b *number) int {
	sa, sb := a.sign(), b.sign()
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	c := cmpAdj(a, b)
	if c == 0 {
		// Digits carry no trailing zeros, so a string that is a prefix
		// of the other is the smaller: bytewise order is numeric order.
		c = strings.Compare(a.digits, b.digits)
	}
	return c * sa
}

func (n *number) sign() int {
	switch {
	case n.isZero():
		return 0
	case n.neg:
		return -1
	}
	return 1
}

func cmpAdj(a, b *number) int {
	if a.bigAdj == nil && b.bigAdj == nil {
		switch {
		case a.adj < b.adj:
			return -1
		case a.adj > b.adj:
			return 1
		}
		return 0
	}
	return a.exactAdj().Cmp(b.exactAdj())
}

func (n *number) exactAdj() *big.Int {
	if n.bigAdj != nil {
		return n.bigAdj
	}
	return big.NewInt(n.adj)
}
