package contract_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/kit/intake"
)

// TestAggregate: an event's state is its deliveries' together.
func TestAggregate(t *testing.T) {
	t.Parallel()
	D, W, L, X, S := contract.StateDelivered, contract.StateWaiting, contract.StateDelivering, contract.StateDeadLettered, contract.StateSkipped
	for _, c := range []struct {
		in   []contract.State
		want contract.State
	}{
		{nil, D}, {[]contract.State{D, D}, D}, {[]contract.State{S, S}, S}, {[]contract.State{S, D}, D},
		{[]contract.State{D, W}, W}, {[]contract.State{W, L}, L}, {[]contract.State{L, X, D}, X},
	} {
		require.Equal(t, c.want, contract.Aggregate(c.in), "%v", c.in)
	}
}

// TestWithReleaseIsTheLanes: a delivery carries its lane's endpoint and
// position, and the envelope says them.
func TestWithReleaseIsTheLanes(t *testing.T) {
	t.Parallel()
	in := contract.DeliverInput{EventID: "e1", CorrelationID: "c", Sequence: 7}.WithRelease(contract.LaneRelease{Endpoint: "ep_b", Previous: 3, Skipped: []int64{5}})
	require.Equal(t, "ep_b", in.EndpointID)
	env := in.Envelope()
	require.Equal(t, "ep_b", env.EndpointID)
	require.EqualValues(t, 3, env.PreviousSequence)
	require.Equal(t, []int64{5}, env.SkippedSequences)
}

// TestEnvelopeCarriesPreviousSequence: endpoint_id and previous_sequence
// are always in the signed body, 0 included, so a receiver never has to
// guess its lane or its place in it.
func TestEnvelopeCarriesPreviousSequence(t *testing.T) {
	t.Parallel()
	in := contract.DeliverInput{EventID: "e1", CorrelationID: "c", Sequence: 1, EndpointID: "ep_a", Type: "t", Timestamp: time.Unix(0, 0), Data: json.RawMessage(`{}`)}
	body, err := json.Marshal(in.Envelope())
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"e1","type":"t","timestamp":"1970-01-01T00:00:00Z","endpoint_id":"ep_a","correlation_id":"c","sequence":1,"previous_sequence":0,"data":{}}`, string(body))

	in.Sequence, in.Previous, in.Skipped = 4, 1, []int64{3}
	body, err = json.Marshal(in.Envelope())
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"e1","type":"t","timestamp":"1970-01-01T00:00:00Z","endpoint_id":"ep_a","correlation_id":"c","sequence":4,"previous_sequence":1,"skipped_sequences":[3],"data":{}}`, string(body))
}

// TestFitKeywordList: a keyword list is cut where its JSON would pass
// Temporal's 2 KiB limit, never in the middle of an ID.
func TestFitKeywordList(t *testing.T) {
	t.Parallel()
	var ids []string
	for i := 0; i < 120; i++ {
		ids = append(ids, fmt.Sprintf("ep_%016d", i))
	}
	kept, dropped := contract.FitKeywordList(ids)
	require.Equal(t, 120, len(kept)+dropped)
	raw, err := json.Marshal(kept)
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), contract.MaxKeywordListBytes)
	more, err := json.Marshal(ids[:len(kept)+1])
	require.NoError(t, err)
	require.Greater(t, len(more), contract.MaxKeywordListBytes, "one more would not fit")
	kept, dropped = contract.FitKeywordList(ids[:3])
	require.Len(t, kept, 3)
	require.Zero(t, dropped)
}

// TestOperationalPrefixIsReserved: the prefixes of hookflow's operational
// types and correlations are the ones intake refuses to producers.
func TestOperationalPrefixIsReserved(t *testing.T) {
	t.Parallel()
	require.Equal(t, intake.ReservedTypePrefix, contract.OperationalPrefix)
	require.Equal(t, intake.ReservedCorrelationPrefix, contract.OperationalCorrelationPrefix)
	require.Equal(t, "hookflow:ep_dev_receiver", contract.OperationalCorrelation("ep_dev_receiver"))
	for _, typ := range []string{contract.OpCircuitOpened, contract.OpCircuitClosed, contract.OpEndpointDisabled, contract.OpDeadLetterCreated, contract.OpDeadLetterAutoReplayed} {
		require.True(t, contract.Operational(typ), typ)
	}
}

// TestCapReason: whatever a receiver answers, a reason's JSON takes at most
// MaxReasonBytes, cut at a character with its front kept; a short one is
// left as it is.
func TestCapReason(t *testing.T) {
	t.Parallel()
	require.Equal(t, "permanent rejection: receiver answered 400", contract.CapReason("permanent rejection: receiver answered 400"))
	for _, body := range []string{
		strings.Repeat("a", 5000), strings.Repeat("<", 5000), strings.Repeat("é", 5000), strings.Repeat("\x01", 5000),
		strings.Repeat("\"\\", 5000), strings.Repeat("\u2028", 5000), strings.Repeat("\xff", 5000), strings.Repeat("a<é\x01\"", 2000),
	} {
		got := contract.CapReason(contract.WindowSpentPrefix + body)
		raw, err := json.Marshal(got)
		require.NoError(t, err)
		require.LessOrEqual(t, len(raw)-2, contract.MaxReasonBytes, "%q", got[:40])
		require.Greater(t, len(raw)-2, contract.MaxReasonBytes-8, "cut no shorter than it must be")
		require.True(t, strings.HasPrefix(got, contract.WindowSpentPrefix))
		require.True(t, strings.HasSuffix(got, "…"))
	}
}

// TestWorkflowIDsFitTemporalsSQLPersistence: Temporal's SQL persistence
// keeps workflow IDs in VARCHAR(255), and a longer one never starts. An
// event's and a sequencer's workflow IDs fit it at the longest tenant ID
// and the longest key; one that fits is the key in full, as before; an
// abbreviated one keeps its tenant whole (the Web UI's prefix filter) and
// is the same for the same key, and two keys that share all but their
// last character get two IDs.
func TestWorkflowIDsFitTemporalsSQLPersistence(t *testing.T) {
	t.Parallel()
	tenant := strings.Repeat("t", 200)
	require.Nil(t, intake.ValidTenantID("tenant_id", tenant), "the longest tenant ID")
	key := func(last byte) string { return strings.Repeat("k", 254) + string(last) }
	require.Nil(t, intake.ValidKey("id", key('a')), "the longest key")
	seen := map[string]string{}
	for _, tn := range []string{"default", tenant} {
		for _, k := range []string{key('a'), key('b'), strings.Repeat("k", 40)} {
			for kind, id := range map[string]string{"event": contract.EventWorkflowID(tn, k), "sequencer": contract.SequencerID(tn, k)} {
				require.LessOrEqual(t, len(id), contract.MaxWorkflowIDLength, "%s of %.8s…/%.8s…", kind, tn, k)
				require.True(t, strings.HasPrefix(id, tn+"/"), "the tenant leads, whole")
				require.NotContains(t, seen, id, "a second key with the same workflow ID")
				seen[id] = kind + tn + k
			}
		}
	}
	require.Equal(t, "default/evt-1", contract.EventWorkflowID("default", "evt-1"), "a key that fits is the ID, in full")
	require.Equal(t, "default/sequencer/order-42", contract.SequencerID("default", "order-42"))
	require.Equal(t, contract.EventWorkflowID(tenant, key('a')), contract.EventWorkflowID(tenant, key('a')), "the same key, the same workflow")
	long := contract.EventWorkflowID("default", key('a'))
	require.True(t, strings.HasPrefix(long, "default/kkkk"), "as much of the key as fits leads: %s", long)
	_, _, ok := contract.EventOf(long)
	require.False(t, ok, "an abbreviated ID does not hold the whole key")
	tn, ok := contract.TenantOf(contract.SequencerID(tenant, key('a')))
	require.True(t, ok)
	require.Equal(t, tenant, tn)
}
