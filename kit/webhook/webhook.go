// Package webhook implements the Standard Webhooks signing scheme hookflow
// speaks on the wire: secrets are "whsec_" + base64 key bytes, and a delivery
// carries webhook-id, webhook-timestamp and webhook-signature headers, the
// signature being "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Header names of the Standard Webhooks contract.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts every signing secret.
const SecretPrefix = "whsec_"

// ErrInvalidSecret is returned for a secret that is not "whsec_" + base64 of
// at least 24 bytes.
var ErrInvalidSecret = errors.New("invalid webhook secret: want whsec_ followed by base64 of at least 24 bytes")

// NewSecret returns a fresh secret of 32 random bytes.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// DecodeSecret returns the key bytes of a whsec_ secret.
func DecodeSecret(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrInvalidSecret
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) < 24 {
		return nil, ErrInvalidSecret
	}
	return key, nil
}

// Sign returns the webhook-signature header value for one delivery: one
// "v1,<sig>" per secret, space separated (several during a rotation).
func Sign(secrets []string, id string, timestamp int64, body []byte) (string, error) {
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		key, err := DecodeSecret(s)
		if err != nil {
			return "", err
		}
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body)))
	}
	return strings.Join(sigs, " "), nil
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(timestamp, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}
