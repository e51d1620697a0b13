package contract_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/contract"
)

// TestReleasePrevious: with one endpoint per correlation, the last delivered
// sequence is the one before the skipped run that ends just before the
// released event.
func TestReleasePrevious(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rel  contract.Release
		want int64
	}{
		{contract.Release{Sequence: 1}, 0},
		{contract.Release{Sequence: 5}, 4},
		{contract.Release{Sequence: 5, Skipped: []int64{3, 4}}, 2},
		{contract.Release{Sequence: 3, Skipped: []int64{1, 2}}, 0},
	} {
		require.Equal(t, c.want, c.rel.Previous(), "%+v", c.rel)
	}
}

// TestEnvelopeCarriesPreviousSequence: previous_sequence is always in the
// signed body, 0 included, so a receiver never has to guess it.
func TestEnvelopeCarriesPreviousSequence(t *testing.T) {
	t.Parallel()
	in := contract.DeliverInput{EventID: "e1", CorrelationID: "c", Sequence: 1, Type: "t", Timestamp: time.Unix(0, 0), Data: json.RawMessage(`{}`)}
	body, err := json.Marshal(in.Envelope())
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"e1","type":"t","timestamp":"1970-01-01T00:00:00Z","correlation_id":"c","sequence":1,"previous_sequence":0,"data":{}}`, string(body))

	in.Sequence, in.Previous, in.Skipped = 4, 1, []int64{3}
	body, err = json.Marshal(in.Envelope())
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"e1","type":"t","timestamp":"1970-01-01T00:00:00Z","correlation_id":"c","sequence":4,"previous_sequence":1,"skipped_sequences":[3],"data":{}}`, string(body))
}
