package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// accepted is the part of a 202 these tests read.
type accepted struct {
	State      string `json:"state"`
	Deliveries []struct {
		State string `json:"state"`
	} `json:"deliveries"`
}

// A start Temporal does not answer leaves the event queued for the sweep,
// and the answer says so; a start that fails because the sweep started the
// same event meanwhile is no such thing: the ledger says its workflow
// exists, and the answer says waiting, as the relay has always counted it.
func TestEventCreateAnswersHowTheStartWent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(id string, seq string) accepted {
		t.Helper()
		resp, raw := b.do(t, http.MethodPost, "/v1/events", "application/json",
			eventBody(b.endpointID, map[string]string{"id": id, "sequence": seq}), b.bearer())
		require.Equal(t, http.StatusAccepted, resp.StatusCode, raw)
		var got accepted
		require.NoError(t, json.Unmarshal([]byte(raw), &got))
		require.Len(t, got.Deliveries, 1)
		return got
	}

	b.starter.fail.Store(true)
	got := post(`"evt_queued"`, `1`)
	require.Equal(t, "queued", got.State)
	require.Equal(t, "queued", got.Deliveries[0].State)
	require.Contains(t, b.logs.String(), "workflow start deferred to the sweep")

	b.starter.fail.Store(false)
	b.starter.swept.Store(true)
	got = post(`"evt_swept"`, `2`)
	require.Equal(t, "waiting", got.State)
	require.Equal(t, "waiting", got.Deliveries[0].State)
}
