package redis

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/transport"
)

// TestAnswerOddReply: a reply the append script never makes is a retry,
// since the write may have landed, never a failure for good.
func TestAnswerOddReply(t *testing.T) {
	t.Parallel()
	p := &dest{config: config{Stream: "orders"}}
	m := transport.Message{EventID: "evt_1", Sequence: 1, CorrelationID: "order-1"}
	for _, reply := range [][]any{nil, {int64(7)}, {int64(0), "x"}, {int64(0), "not-an-id", "", ""}} {
		res := answer(reply, "ep_1", m, p)
		require.Equal(t, transport.Retry, res.Outcome, reply)
		require.Contains(t, res.Detail, "unexpected append reply")
	}
}
