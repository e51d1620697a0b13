package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileReason is what a receiver may answer with a 4xx: an OSC 52 that
// writes the operator's clipboard, a screen clear, an 8-bit CSI and a
// right-to-left override.
const hostileReason = "receiver answered 400: \x1b]52;c;aGk=\x07\x1b[2J\u009b31m\u202egnp.exe"

// TestDLQPrintsNoControlCharacters: a dead letter's reason and attempt
// errors are a receiver's words; `dlq list` and `dlq show`, as tables and
// as --json, print them with every control character escaped.
func TestDLQPrintsNoControlCharacters(t *testing.T) {
	item := `{"event_id":"evt_1","correlation_id":"order-1","sequence":1,"endpoint_id":"ep_1","attempt_count":1,
		"reason":` + jsonString(hostileReason) + `,"dead_lettered_at":"2026-11-29T18:00:00Z","generation":1,"status":"open","replay_count":0`
	full := item + `,"envelope":{"data":` + jsonString("\u009b2J") + `},"attempts":[{"attempt":1,"started_at":"2026-11-29T18:00:00Z","latency_ms":3,
		"status_code":400,"error":` + jsonString(hostileReason) + `,"outcome":"rejected"}]}`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/dead-letters":
			_, _ = w.Write([]byte(`{"items":[` + item + `}]}`))
		case "/v1/dead-letters/evt_1":
			_, _ = w.Write([]byte(full))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	env := map[string]string{"HOOKFLOW_API_URL": hs.URL, "HOOKFLOW_API_TOKEN": "tok"}
	for _, args := range [][]string{{"dlq", "list"}, {"dlq", "list", "--json"}, {"dlq", "show", "evt_1"}, {"dlq", "show", "evt_1", "--json"}} {
		code, out, stderr := runWith(env, args...)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "receiver answered 400", args)
		require.False(t, strings.ContainsAny(out, "\x1b\x07\u009b\u202e"), "%v printed control characters: %q", args, out)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
