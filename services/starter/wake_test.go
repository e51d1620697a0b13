package starter

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
	"github.com/hookflow/hookflow/lab/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// signalRecorder is a Temporal client that records the workflows it is
// asked to signal, in order, and answers each at once.
type signalRecorder struct {
	client.Client
	mu  sync.Mutex
	ids []string
}

func (r *signalRecorder) SignalWorkflow(_ context.Context, id, _, _ string, _ any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	return nil
}

// TestTheWakeServesTheEndpointsInTurn (endpoints served in turn): two circuits
// close at once, the first endpoint's with more lanes delivering than a
// pass signals of one endpoint: the pass signals its share of the first,
// then the second's lanes, and the next pass the rest of the first. Before,
// the second waited for every lane of the first.
func TestTheWakeServesTheEndpointsInTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	lanes := map[string]int{"big": wakePerPass + 50, "small": 3}
	for _, ep := range []string{"big", "small"} {
		_, err := st.EndpointInsert(ctx, ep, "https://example.com/"+ep, "whsec_x", nil)
		require.NoError(t, err)
		for i := range lanes[ep] {
			id := fmt.Sprintf("%s-%04d", ep, i)
			_, ok, err := st.EventInsertRouted(ctx, intake.Event{ID: id, CorrelationID: id, Sequence: 1, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{ep}, nil)
			require.NoError(t, err)
			require.True(t, ok)
			_, err = st.DeliveryStartAttempt(ctx, id, ep)
			require.NoError(t, err)
		}
		for i := range 3 {
			_, err := st.CircuitFailed(ctx, ep, fmt.Sprint("f", i), store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Hour})
			require.NoError(t, err)
		}
		tr, err := st.CircuitSucceeded(ctx, ep, false, 1)
		require.NoError(t, err)
		require.True(t, tr.Closed)
	}
	rec := &signalRecorder{}
	s, err := New(Config{TaskQueue: "q", RecoveryWindow: time.Minute}, st, rec, testenv.Logger(t))
	require.NoError(t, err)

	_, err = s.SweepCircuitWake(ctx)
	require.NoError(t, err)
	require.Len(t, rec.ids, wakePerPass+lanes["small"], "a share of the big endpoint, then every lane of the small one")
	require.Equal(t, "default/big-0000", rec.ids[0], "the workflow of the endpoint's tenant's event")
	require.Equal(t, "default/small-0000", rec.ids[wakePerPass], "the small endpoint is served after the big one's share")

	_, err = s.SweepCircuitWake(ctx)
	require.NoError(t, err)
	require.Len(t, rec.ids, lanes["big"]+lanes["small"], "the next pass signals the rest of the big one")
	require.Equal(t, fmt.Sprintf("default/big-%04d", wakePerPass), rec.ids[wakePerPass+lanes["small"]], "from where it got to")
	wakes, err := st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, wakes, "both woken")
}

// TestEachAnswerOfAHalfOpenCircuitWakesItsLanes: a half-open circuit's
// next probe is due at once, so each answer short of the K that close it
// wakes the lanes delivering to the endpoint (one of them sends that
// probe, the claim letting one through), as the close does: K answers
// close it with no lane waiting out its timer. Before, going half-open
// woke nobody, and each answer cost a parked lane's timer (its lease,
// timeout + 10 s, or the old next probe time).
func TestEachAnswerOfAHalfOpenCircuitWakesItsLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.New(testenv.MigratedPool(t))
	require.NoError(t, err)
	st = st.Tenant(store.DefaultTenant)
	_, err = st.EndpointInsert(ctx, "ep", "https://example.com/ep", "whsec_x", nil)
	require.NoError(t, err)
	for _, id := range []string{"e1", "e2"} {
		_, ok, err := st.EventInsertRouted(ctx, intake.Event{ID: id, CorrelationID: id, Sequence: 1, Type: "t", Data: []byte(`{}`), PayloadHash: []byte{1}}, []string{"ep"}, nil)
		require.NoError(t, err)
		require.True(t, ok)
		_, err = st.DeliveryStartAttempt(ctx, id, "ep")
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := st.CircuitFailed(ctx, "ep", fmt.Sprint("f", i), store.Settings{CircuitFailureThreshold: 3, DisableAfter: time.Hour})
		require.NoError(t, err)
	}
	rec := &signalRecorder{}
	s, err := New(Config{TaskQueue: "q", RecoveryWindow: time.Minute}, st, rec, testenv.Logger(t))
	require.NoError(t, err)
	_, err = s.SweepCircuitWake(ctx)
	require.NoError(t, err)
	require.Empty(t, rec.ids, "an open circuit wakes nobody")

	for i := range 3 {
		tr, err := st.CircuitSucceeded(ctx, "ep", false, 3)
		require.NoError(t, err)
		require.Equal(t, i == 2, tr.Closed, "answer %d", i+1)
		_, err = s.SweepCircuitWake(ctx)
		require.NoError(t, err)
		require.Len(t, rec.ids, 2*(i+1), "answer %d wakes both lanes", i+1)
	}
	wakes, err := st.CircuitsWakePending(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, wakes)
}
