package webhook_test

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/kit/webhook"
)

// TestSignStandardWebhooksVector checks the signature against the example
// published with the Standard Webhooks specification, so hookflow's
// receivers can use any conforming library.
func TestSignStandardWebhooksVector(t *testing.T) {
	t.Parallel()
	sig, err := webhook.Sign([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		"msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	require.NoError(t, err)
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", sig)
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 20 {
		s, err := webhook.NewSecret()
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(s, webhook.SecretPrefix))
		key, err := webhook.DecodeSecret(s)
		require.NoError(t, err)
		require.Len(t, key, 32)
		require.False(t, seen[s], "secrets are random")
		seen[s] = true
	}
}

func TestDecodeSecret(t *testing.T) {
	t.Parallel()
	enc := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	_, err := webhook.DecodeSecret(webhook.SecretPrefix + enc(24))
	require.NoError(t, err, "24 bytes is the minimum")
	for _, s := range []string{
		"",
		webhook.SecretPrefix,
		enc(32),                                // no prefix
		"WHSEC_" + enc(32),                     // prefix is exact
		webhook.SecretPrefix + enc(23),         // too short
		webhook.SecretPrefix + "not base64!!!", // not base64
		webhook.SecretPrefix + base64.RawURLEncoding.EncodeToString(make([]byte, 32)), // other alphabet, no padding
	} {
		_, err := webhook.DecodeSecret(s)
		require.ErrorIs(t, err, webhook.ErrInvalidSecret, "%q", s)
	}
}

func TestSignDuringRotation(t *testing.T) {
	t.Parallel()
	current, err := webhook.NewSecret()
	require.NoError(t, err)
	previous, err := webhook.NewSecret()
	require.NoError(t, err)
	now := time.Now()
	ts := now.Unix()
	body := []byte(`{"id":"evt_1","sequence":1}`)

	both, err := webhook.Sign([]string{current, previous}, "evt_1", ts, body)
	require.NoError(t, err)
	entries := strings.Split(both, " ")
	require.Len(t, entries, 2)
	one, err := webhook.Sign([]string{current}, "evt_1", ts, body)
	require.NoError(t, err)
	require.Equal(t, one, entries[0], "the current secret's signature comes first")

	// A receiver holding either secret accepts the delivery.
	for _, held := range [][]string{{current}, {previous}, {previous, current}} {
		require.NoError(t, webhook.Verify(held, "evt_1", strconv.FormatInt(ts, 10), both, body, now, 0))
	}
}

func TestSignCoversIDTimestampAndBody(t *testing.T) {
	t.Parallel()
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	base, err := webhook.Sign([]string{secret}, "evt_1", 100, []byte(`{}`))
	require.NoError(t, err)
	for name, args := range map[string]struct {
		id   string
		ts   int64
		body string
	}{
		"id":        {"evt_2", 100, `{}`},
		"timestamp": {"evt_1", 101, `{}`},
		"body":      {"evt_1", 100, `{ }`},
	} {
		got, err := webhook.Sign([]string{secret}, args.id, args.ts, []byte(args.body))
		require.NoError(t, err)
		require.NotEqual(t, base, got, name)
	}
	_, err = webhook.Sign([]string{secret, "whsec_short"}, "evt_1", 100, []byte(`{}`))
	require.ErrorIs(t, err, webhook.ErrInvalidSecret)
}
