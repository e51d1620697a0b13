package destcheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/transport"
)

// held is a destination's content, read back in order.
type held []transport.Stored

func (h held) Read(_ context.Context, _ transport.Destination, each func(transport.Stored) error) error {
	for _, s := range h {
		if err := each(s); err != nil {
			return err
		}
	}
	return nil
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// msg is sequence n of lane "a", its predecessor prev, signed.
func msg(t *testing.T, endpoint string, n, prev int64, skipped ...int64) transport.Stored {
	t.Helper()
	m := transport.Message{EventID: "evt_" + string(rune('0'+n)), Body: []byte(`{"n":1}`), At: time.Unix(1700000000+n, 0), CorrelationID: "a",
		Sequence: n, Previous: prev, Skipped: skipped}
	h, err := transport.Headers(transport.Destination{EndpointID: endpoint, Secrets: []string{secret}}, m)
	require.NoError(t, err)
	s, err := transport.StoredFrom(func(k string) string { return h[k] }, m.Body)
	require.NoError(t, err)
	return s
}

// TestCheck: each way a destination can break the promise is found, and
// a lane that keeps it passes.
func TestCheck(t *testing.T) {
	t.Parallel()
	ledger := []Delivery{{EventID: "evt_1", CorrelationID: "a", Sequence: 1, Delivered: true}, {EventID: "evt_2", CorrelationID: "a", Sequence: 2, Skipped: true},
		{EventID: "evt_3", CorrelationID: "a", Sequence: 3, Delivered: true}, {EventID: "evt_4", CorrelationID: "a", Sequence: 4, Delivered: true}}
	d := transport.Destination{EndpointID: "ep_a"}
	check := func(h held, repeats bool) Report {
		r, err := Check(context.Background(), h, d, []string{secret}, ledger, repeats)
		require.NoError(t, err)
		return r
	}
	good := held{msg(t, "ep_a", 1, 0), msg(t, "ep_a", 3, 1, 2), msg(t, "ep_a", 4, 3)}
	r := check(good, false)
	require.True(t, r.OK(), "%+v", r)
	require.Equal(t, 3, r.Totals().Delivered)

	bad := msg(t, "ep_a", 4, 3)
	bad.Signature = strings.Replace(bad.Signature, "v1,", "v1,AAAA", 1)
	for name, c := range map[string]struct {
		h     held
		field func(Lane) []int64
		want  []int64
	}{
		"missing":             {held{msg(t, "ep_a", 1, 0), msg(t, "ep_a", 4, 3)}, func(l Lane) []int64 { return l.Missing }, []int64{3}},
		"repeated":            {append(good, msg(t, "ep_a", 4, 3)), func(l Lane) []int64 { return l.Repeated }, []int64{4}},
		"out of order":        {held{msg(t, "ep_a", 1, 0), msg(t, "ep_a", 4, 3), msg(t, "ep_a", 3, 1, 2)}, func(l Lane) []int64 { return l.OutOfOrder }, []int64{3}},
		"chain break":         {held{msg(t, "ep_a", 1, 0), msg(t, "ep_a", 3, 1), msg(t, "ep_a", 4, 2)}, func(l Lane) []int64 { return l.ChainBreaks }, []int64{4}},
		"bad signature":       {held{msg(t, "ep_a", 1, 0), msg(t, "ep_a", 3, 1, 2), bad}, func(l Lane) []int64 { return l.BadSignature }, []int64{4}},
		"written but skipped": {held{msg(t, "ep_a", 1, 0), msg(t, "ep_a", 2, 1), msg(t, "ep_a", 3, 1, 2), msg(t, "ep_a", 4, 3)}, func(l Lane) []int64 { return l.WrittenSkipped }, []int64{2}},
	} {
		r := check(c.h, false)
		require.Equal(t, c.want, c.field(r.Totals()), name)
		require.Equal(t, name == "written but skipped", r.OK(), "%s: %+v", name, r.Totals())
	}
	require.True(t, check(append(good, msg(t, "ep_a", 4, 3)), true).OK(), "a repeat is allowed where the destination promises at least once")
	foreign := check(append(good, msg(t, "ep_b", 9, 0)), false)
	require.Equal(t, 1, foreign.Foreign)
	require.False(t, foreign.OK())
	var out strings.Builder
	require.NoError(t, foreign.Print(&out, true))
	require.Contains(t, out.String(), "FAIL")
}
