package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/services/starter"
)

// lateArrival keeps one event's arrival from its sequencer, on the client
// it is installed on (the API's, the sweeps' and the workers'), while late
// names it: its start fails as when Temporal does not answer within the
// API's timeout, and the event stays queued in the ledger for the queued
// sweep, whose starts fail the same way until late is cleared.
type lateArrival struct {
	interceptor.ClientInterceptorBase
	late atomic.Value // string: the event ID held back; "" none
}

func (l *lateArrival) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &lateArrivalOutbound{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, l: l}
}

type lateArrivalOutbound struct {
	interceptor.ClientOutboundInterceptorBase
	l *lateArrival
}

func (o *lateArrivalOutbound) UpdateWithStartWorkflow(ctx context.Context, in *interceptor.ClientUpdateWithStartWorkflowInput) (client.WorkflowUpdateHandle, error) {
	if late, _ := o.l.late.Load().(string); late != "" && in.UpdateOptions.UpdateName == contract.UpdateArrive && len(in.UpdateOptions.Args) == 1 {
		if a, ok := in.UpdateOptions.Args[0].(contract.Arrival); ok && a.EventID == late {
			return nil, serviceerror.NewUnavailable("arrival held back by the test")
		}
	}
	return o.Next.UpdateWithStartWorkflow(ctx, in)
}

// TestAResyncRacingAnArrivalOnANewLaneKeepsItsOrder: a resync of a
// correlation's sequencer begins, and in the same workflow task 11
// arrives, routed to endpoint X, new to the correlation, while 10, routed
// to X too, is stored in the ledger but its arrival is late (its start
// failed; the queued sweep makes it later). The resync's load reads both 10
// and 11 and moves the sequencer's frontier past them. The receiver at X
// gets 10, then 11, each once, and every event ends delivered. Before, the
// lane X that the arrival made during the load kept only 11: the resync
// released it first (previous_sequence 0, which a receiver accepts), 10's
// late arrival was then answered finished, and its workflow was never
// started: it stayed waiting for good.
//
// The two updates reach one task because an earlier resync holds the
// sequencer's task open (its LoadSequencer, which read the ledger before 10
// and 11 were stored, is held here): Temporal gives the updates sent
// meanwhile to the next task, in the order they came, the resync first.
func TestAResyncRacingAnArrivalOnANewLaneKeepsItsOrder(t *testing.T) {
	t.Parallel()
	hold := &heldActivity{name: contract.ActivityLoadSequencer, afterRun: true, started: make(chan struct{}), release: make(chan struct{})}
	late := &lateArrival{}
	late.late.Store("")
	b := setup(t, options{interceptors: []interceptor.ClientInterceptor{hold, late}})
	rcvA, rcvX := newLedgerReceiver(t), newLedgerReceiver(t)
	a, x := b.createEndpoint(rcvA.URL()), b.createEndpoint(rcvX.URL())
	rcvA.secret, rcvX.secret = a.Secret, x.Secret
	corr := b.id("resync-race")
	ten, eleven := corr+"-10", corr+"-11"
	b.postSequence(corr, a.ID, 1, 9)
	b.waitState(corr+"-9", contract.StateDelivered, 60*time.Second)

	strt, err := starter.New(starter.Config{TaskQueue: b.cfg.TaskQueue, RecoveryWindow: b.cfg.RecoveryWindow, DeliveryTimeout: b.cfg.DeliveryTimeout}, b.store, b.client, b.logger)
	require.NoError(t, err)
	resync := func() chan error {
		done := make(chan error, 1)
		go func() { done <- strt.Resync(context.Background(), store.DefaultTenant, corr) }()
		return done
	}
	// A first resync reads the ledger, and its task is held open.
	hold.armed.Store(true)
	first := resync()
	select {
	case <-hold.started:
	case <-time.After(60 * time.Second):
		t.Fatal("the first resync did not load the correlation")
	}
	// 10 is stored, its arrival late.
	late.late.Store(ten)
	code, _ := b.postEvent(ten, corr, 10, x.ID, map[string]any{"n": 10})
	require.Equal(t, http.StatusAccepted, code)
	// The resync that races, then 11's arrival (the API's start gives up
	// while the task is held; 11 is started here, as the queued sweep
	// would, so its start does not wait behind 10's failing one in the
	// sweep's line). The pauses only let each update reach the server
	// before the next is sent: the history check below says whether they
	// did.
	second := resync()
	time.Sleep(2 * time.Second)
	code, _ = b.postEvent(eleven, corr, 11, x.ID, map[string]any{"n": 11})
	require.Equal(t, http.StatusAccepted, code)
	ev11, err := b.store.EventGet(context.Background(), eleven)
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		started <- strt.Start(ctx, ev11)
	}()
	time.Sleep(2 * time.Second)
	close(hold.release)
	for _, done := range []chan error{first, second, started} {
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Fatal("the resyncs and 11's start did not answer")
		}
	}
	requireArrivalDuringLoad(t, b, corr, 11)
	late.late.Store("")

	b.waitDelivery(ten, x.ID, contract.StateDelivered, 90*time.Second)
	b.waitDelivery(eleven, x.ID, contract.StateDelivered, 60*time.Second)
	require.Equal(t, []int64{10, 11}, rcvX.appliedTo(corr), "X gets 10 before 11")
	require.Equal(t, 1, rcvX.requestsFor(ten), "10 is sent once")
	require.Equal(t, 1, rcvX.requestsFor(eleven), "11 is sent once")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, rcvA.appliedTo(corr))
	rcvA.requireClean(t)
	rcvX.requireClean(t)
	for seq := int64(1); seq <= 11; seq++ {
		require.Equal(t, contract.StateDelivered, b.eventState(fmt.Sprintf("%s-%d", corr, seq)).State, "sequence %d", seq)
	}
}

// requireArrivalDuringLoad checks, in the sequencer's history, that the
// test arranged its race: the first arrival of seq was accepted after a
// resync was, and before that resync completed (its load was under way).
func requireArrivalDuringLoad(t *testing.T, b *bundle, corr string, seq int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	it := b.client.GetWorkflowHistory(ctx, contract.SequencerID(store.DefaultTenant, corr), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	resyncs := map[string]bool{} // accepted resyncs: completed or not
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		if c := ev.GetWorkflowExecutionUpdateCompletedEventAttributes(); c != nil {
			delete(resyncs, c.GetMeta().GetUpdateId())
			continue
		}
		acc := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		if acc == nil {
			continue
		}
		req := acc.GetAcceptedRequest()
		switch req.GetInput().GetName() {
		case contract.UpdateResync:
			resyncs[req.GetMeta().GetUpdateId()] = true
		case contract.UpdateArrive:
			var a contract.Arrival
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(req.GetInput().GetArgs(), &a))
			if a.Sequence == seq {
				require.NotEmpty(t, resyncs, "the arrival of %d came with no resync under way: the race was not arranged", seq)
				return
			}
		}
	}
	t.Fatalf("no arrival of %d in the sequencer's history", seq)
}
