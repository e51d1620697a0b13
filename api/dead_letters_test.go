package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// deadLettered stores event id, dead-lettered, and returns its dead letter.
func (b *bundle) deadLettered(t *testing.T, id string) store.DeadLetter {
	t.Helper()
	ctx := context.Background()
	_, ok, err := b.store.EventInsertRouted(ctx, intake.Event{ID: id, CorrelationID: "c-" + id, Sequence: 1, EndpointID: b.endpointID, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{b.endpointID}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.store.DeadLetterUpsert(ctx, store.DeadLetter{EventID: id, CorrelationID: "c-" + id, Sequence: 1, EndpointID: b.endpointID,
		Envelope: []byte(`{}`), Attempts: []store.Attempt{}, Reason: "400", DeadLetteredAt: time.Now()}, "window-1")
	require.NoError(t, err)
	d, err := b.store.DeadLetterGet(ctx, id, b.endpointID)
	require.NoError(t, err)
	return d
}

// TestReplayAndSkipTakeAnEmptyJSONBody: generated clients send
// Content-Type: application/json with no body; that is no request body, not
// malformed JSON.
func TestReplayAndSkipTakeAnEmptyJSONBody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deadLettered(t, "evt_replay")
	b.deadLettered(t, "evt_skip")
	for _, path := range []string{"/v1/dead-letters/evt_replay/replay", "/v1/dead-letters/evt_skip/skip"} {
		resp, body := b.do(t, http.MethodPost, path, "application/json", "", b.bearer())
		require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	}
	require.Equal(t, []string{"evt_replay/replay", "evt_skip/skip"}, b.starter.signalled())
}

// TestSecondReplayOfOneDeadLetterIs409: the first replay (or skip) of a dead
// letter claims it; a second, of either kind, is refused and signals
// nothing.
func TestSecondReplayOfOneDeadLetterIs409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deadLettered(t, "evt_1")
	resp, body := b.do(t, http.MethodPost, "/v1/dead-letters/evt_1/replay", "", "", b.bearer())
	require.Equal(t, http.StatusAccepted, resp.StatusCode, body)
	for _, path := range []string{"/v1/dead-letters/evt_1/replay", "/v1/dead-letters/evt_1/skip"} {
		resp, body := b.do(t, http.MethodPost, path, "", "", b.bearer())
		requireProblem(t, resp, body, http.StatusConflict, "")
	}
	require.Equal(t, []string{"evt_1/replay"}, b.starter.signalled())
	d, err := b.store.DeadLetterGet(context.Background(), "evt_1", b.endpointID)
	require.NoError(t, err)
	require.Equal(t, store.DeadLetterReplayed, d.Status)
	require.EqualValues(t, 1, d.ReplayCount)
}
