package webhook

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func testSecret(fill byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(fill), 32)))
}

func TestVerify(t *testing.T) {
	t.Parallel()
	var (
		current = testSecret('a')
		old     = testSecret('b')
		other   = testSecret('c')
		now     = time.Unix(1_800_000_000, 0)
		id      = "evt_1"
		body    = `{"id":"evt_1","sequence":1}`
	)
	cases := []struct {
		name      string
		verify    []string      // secrets the receiver holds
		sign      []string      // secrets the sender signs with
		age       time.Duration // how old the timestamp is (negative: in the future)
		timestamp string        // raw timestamp header, overriding age
		signature string        // raw signature header, overriding sign
		prefix    string        // replaces "v1," in the signed header
		sentBody  string        // body received, when it differs from the signed one
		want      error
	}{
		{name: "valid", verify: []string{current}, sign: []string{current}},
		{name: "valid at edge of tolerance", verify: []string{current}, sign: []string{current}, age: 5 * time.Minute},
		{name: "rotated: receiver holds both, sender signs with both", verify: []string{current, old}, sign: []string{old, current}},
		{name: "rotated: receiver holds new only", verify: []string{current}, sign: []string{old, current}},
		{name: "rotated: receiver holds old only", verify: []string{old}, sign: []string{old, current}},
		{name: "tampered body", verify: []string{current}, sign: []string{current}, sentBody: `{"id":"evt_1","sequence":2}`, want: ErrSignatureMismatch},
		{name: "wrong secret", verify: []string{current}, sign: []string{other}, want: ErrSignatureMismatch},
		{name: "expired timestamp", verify: []string{current}, sign: []string{current}, age: 6 * time.Minute, want: ErrTimestampExpired},
		{name: "future timestamp", verify: []string{current}, sign: []string{current}, age: -6 * time.Minute, want: ErrTimestampExpired},
		{name: "timestamp not a number", verify: []string{current}, sign: []string{current}, timestamp: "yesterday", want: ErrTimestampInvalid},
		{name: "malformed signature header", verify: []string{current}, signature: "v1 not-base64!!", want: ErrSignatureMismatch},
		{name: "non-v1 prefix", verify: []string{current}, sign: []string{current}, prefix: "v1a,", want: ErrSignatureMismatch},
		{name: "missing signature", verify: []string{current}, signature: " ", want: ErrSignatureMismatch},
		{name: "invalid secret", verify: []string{"whsec_short"}, sign: []string{current}, want: ErrInvalidSecret},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ts := now.Add(-c.age).Unix()
			tsHeader := strconv.FormatInt(ts, 10)
			if c.timestamp != "" {
				tsHeader = c.timestamp
			}
			sig := c.signature
			if sig == "" {
				var err error
				sig, err = Sign(c.sign, id, ts, []byte(body))
				require.NoError(t, err)
				if c.prefix != "" {
					sig = strings.ReplaceAll(sig, "v1,", c.prefix)
				}
			}
			received := body
			if c.sentBody != "" {
				received = c.sentBody
			}
			err := Verify(c.verify, id, tsHeader, sig, []byte(received), now, DefaultTolerance)
			if c.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.want)
		})
	}
}

func TestVerifyHeader(t *testing.T) {
	t.Parallel()
	secret := testSecret('a')
	now := time.Now()
	body := []byte(`{"id":"evt_2"}`)
	sig, err := Sign([]string{secret}, "evt_2", now.Unix(), body)
	require.NoError(t, err)

	h := http.Header{}
	h.Set(HeaderID, "evt_2")
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, sig)
	require.NoError(t, VerifyHeader([]string{secret}, h, body, now, 0))

	h.Del(HeaderTimestamp)
	require.ErrorIs(t, VerifyHeader([]string{secret}, h, body, now, 0), ErrMissingHeaders)
}
