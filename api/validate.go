package api

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// validKey checks an idempotency key, correlation ID or endpoint ID:
// [A-Za-z0-9_:-], 1 to 255 characters. No "." (the signature scheme joins
// with dots) and no "/" (sequencer workflow IDs use it).
func validKey(field, v string) *Problem {
	if v == "" {
		return fieldProblem(field, field+" is required and must not be empty")
	}
	if len(v) > 255 {
		return fieldProblem(field, field+" must be at most 255 characters")
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == ':' || r == '-') {
			return fieldProblem(field, fmt.Sprintf("%s may contain only A-Z a-z 0-9 _ : - (found %q)", field, r))
		}
	}
	return nil
}

// parseSequence accepts a JSON integer literal ≥ 1; strings, fractions and
// exponents are refused so "sequence": "3" or 3.0 is never guessed at.
func parseSequence(raw json.RawMessage) (int64, *Problem) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, fieldProblem("sequence", "sequence is required")
	}
	if raw[0] == '"' {
		return 0, fieldProblem("sequence", "sequence must be an integer, not a string")
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fieldProblem("sequence", "sequence must be an integer ≥ 1")
	}
	if n < 1 {
		return 0, fieldProblem("sequence", "sequence must be ≥ 1")
	}
	return n, nil
}

// canonicalJSON re-encodes a JSON value with sorted object keys and no
// insignificant whitespace, keeping numbers as written, so equal content
// hashes equally however the producer formatted it.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// payloadHash identifies an event's content for the same-key comparison.
func payloadHash(correlationID string, sequence int64, endpointID, typ string, data json.RawMessage) []byte {
	h := sha256.New()
	for _, part := range []string{correlationID, strconv.FormatInt(sequence, 10), endpointID, typ} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(data)
	return h.Sum(nil)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + idEncoding.EncodeToString(b)
}

func validType(v string) *Problem {
	if strings.TrimSpace(v) == "" {
		return fieldProblem("type", "type is required and must not be empty")
	}
	if len(v) > 255 {
		return fieldProblem("type", "type must be at most 255 characters")
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return fieldProblem("type", "type must not contain control characters")
		}
	}
	return nil
}
