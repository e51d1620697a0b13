package transport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDecide: each kind of tail a lane may hold when sequence 5 (previous
// 3, 4 skipped) is sent leads to its one decision.
func TestDecide(t *testing.T) {
	t.Parallel()
	m := Message{EventID: "evt_5", Sequence: 5, Previous: 3, Skipped: []int64{4}}
	for _, c := range []struct {
		name string
		tail *Tail
		want Decision
	}{
		{"empty lane", nil, Write},
		{"the previous delivery", &Tail{Sequence: 3, EventID: "evt_3", EndpointID: "ep_a"}, Write},
		{"a skipped delivery that reached the broker", &Tail{Sequence: 4, EventID: "evt_4", EndpointID: "ep_a"}, Write},
		{"a lane the broker lost part of", &Tail{Sequence: 1, EventID: "evt_1", EndpointID: "ep_a"}, Write},
		{"this message, its ack lost", &Tail{Sequence: 5, EventID: "evt_5", EndpointID: "ep_a"}, Written},
		{"another event at this sequence", &Tail{Sequence: 5, EventID: "evt_x", EndpointID: "ep_a"}, Refuse},
		{"a successor", &Tail{Sequence: 6, EventID: "evt_6", EndpointID: "ep_a"}, Refuse},
		{"another endpoint's lane", &Tail{Sequence: 3, EventID: "evt_3", EndpointID: "ep_b"}, Refuse},
		{"another endpoint's copy of this event", &Tail{Sequence: 5, EventID: "evt_5", EndpointID: "ep_b"}, Refuse},
	} {
		got, why := Decide(c.tail, m, "ep_a")
		require.Equal(t, c.want, got, c.name)
		require.Equal(t, got == Refuse, why != "", "%s: a reason only with a refusal", c.name)
	}
}

// TestHeadersReadBack: what Headers writes, StoredFrom reads back.
func TestHeadersReadBack(t *testing.T) {
	t.Parallel()
	d := Destination{EndpointID: "ep_a", Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}
	m := Message{EventID: "evt_5", Body: []byte(`{"id":"evt_5"}`), At: time.Unix(1700000000, 0), CorrelationID: "order-1",
		Sequence: 5, Previous: 3, Skipped: []int64{4}, Type: "order.paid"}
	h, err := Headers(d, m)
	require.NoError(t, err)
	require.Equal(t, "order.paid", h[HeaderEventType])
	s, err := StoredFrom(func(n string) string { return h[n] }, m.Body)
	require.NoError(t, err)
	require.Equal(t, Stored{Lane: "order-1", EventID: "evt_5", EndpointID: "ep_a", Sequence: 5, Previous: 3, Skipped: []int64{4},
		Timestamp: 1700000000, Signature: h[HeaderSignature], Body: m.Body}, s)
	delete(h, HeaderSequence)
	_, err = StoredFrom(func(n string) string { return h[n] }, m.Body)
	require.ErrorContains(t, err, HeaderSequence)
}
