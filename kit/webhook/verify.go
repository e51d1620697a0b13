package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a webhook-timestamp may lie from the
// receiver's clock, in either direction, when no tolerance is given.
const DefaultTolerance = 5 * time.Minute

// Verification errors. Verify wraps or returns exactly one of them, so
// callers can branch with errors.Is.
var (
	// ErrMissingHeaders means webhook-id, webhook-timestamp or
	// webhook-signature is absent or empty.
	ErrMissingHeaders = errors.New("missing webhook headers")
	// ErrTimestampInvalid means webhook-timestamp is not Unix seconds.
	ErrTimestampInvalid = errors.New("invalid webhook timestamp")
	// ErrTimestampExpired means webhook-timestamp lies outside the
	// tolerance, in the past or in the future.
	ErrTimestampExpired = errors.New("webhook timestamp outside tolerance")
	// ErrSignatureMismatch means no v1 signature in the header matches any
	// of the secrets (this includes a header with no well-formed v1 entry).
	ErrSignatureMismatch = errors.New("webhook signature mismatch")
)

// Verify checks one delivery against the Standard Webhooks scheme. The
// signature header may hold several space-separated "v1,<base64>" entries
// (the sender signs with every secret during a rotation); the delivery passes
// when any entry matches any of secrets. Entries with another version prefix
// or bad base64 are ignored. The timestamp must lie within tolerance of now
// (tolerance <= 0 means DefaultTolerance), which bounds how long a captured
// delivery can be replayed.
//
// It returns nil, ErrMissingHeaders, ErrTimestampInvalid, ErrTimestampExpired,
// ErrSignatureMismatch, or an error wrapping ErrInvalidSecret when one of
// secrets is malformed.
func Verify(secrets []string, id string, timestampHeader string, signatureHeader string, body []byte, now time.Time, tolerance time.Duration) error {
	if id == "" || timestampHeader == "" || signatureHeader == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(strings.TrimSpace(timestampHeader), 10, 64)
	if err != nil {
		return ErrTimestampInvalid
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sent := time.Unix(ts, 0)
	if sent.Before(now.Add(-tolerance)) || sent.After(now.Add(tolerance)) {
		return ErrTimestampExpired
	}

	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		key, err := DecodeSecret(s)
		if err != nil {
			return fmt.Errorf("decode secret %d: %w", i, err)
		}
		keys = append(keys, key)
	}
	var given [][]byte
	for entry := range strings.FieldsSeq(signatureHeader) {
		sig, ok := strings.CutPrefix(entry, "v1,")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		given = append(given, raw)
	}
	for _, key := range keys {
		want := mac(key, id, ts, body)
		for _, g := range given {
			if hmac.Equal(want, g) {
				return nil
			}
		}
	}
	return ErrSignatureMismatch
}

// VerifyHeader is Verify reading webhook-id, webhook-timestamp and
// webhook-signature from h.
func VerifyHeader(secrets []string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	return Verify(secrets, h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature), body, now, tolerance)
}
