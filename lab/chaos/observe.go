package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/services/refreceiver"
)

// observer reads how the run stands, from hookflow's ledger, the
// receiver's, the receiver's API and Temporal: while the run goes on, the
// counts the progress shows (and, once each, the open dead letters of
// events not dead-lettered: leads to follow in the logs); once quiet,
// everything the checks look at.
type observer struct {
	st       *stack
	wl       *Workload
	logger   *slog.Logger
	progress *progress

	mu sync.Mutex
	// stray are the open dead letters of deliveries not dead-lettered that
	// the progress saw (event/generation).
	stray map[string]bool
	// downDL counts the dead letters of the down endpoint, read once quiet.
	downDL int
}

func newObserver(st *stack, wl *Workload, logger *slog.Logger, out *progress) *observer {
	return &observer{st: st, wl: wl, logger: logger, progress: out, stray: map[string]bool{}}
}

// strays returns how many open dead letters of events not dead-lettered
// the progress saw.
func (o *observer) strays() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.stray)
}

// downDeadLetters returns how many dead letters the down endpoint had
// once quiet.
func (o *observer) downDeadLetters() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.downDL
}

// counts reads hookflow's deliveries by state (a queued event's are
// waiting) and its open dead letters.
func (o *observer) counts(ctx context.Context) (map[string]int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := o.st.hf.Query(ctx, "SELECT state, count(*) FROM deliveries GROUP BY state")
	if err != nil {
		return nil, 0, err
	}
	states := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			rows.Close()
			return nil, 0, err
		}
		states[s] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var open int
	if err := o.st.hf.QueryRow(ctx, "SELECT count(*) FROM dead_letters WHERE status = 'open'").Scan(&open); err != nil {
		return nil, 0, err
	}
	return states, open, nil
}

func pending(states map[string]int) int {
	return states["queued"] + states["waiting"] + states["delivering"]
}

// noteStrayDeadLetters reports, once each, the open dead letters whose
// delivery is not dead-lettered: the dead-letter queue offers an operator a
// replay or skip of a delivery that is delivering or finished, which its
// workflow will ignore. The ledger writes a dead letter and the event's state together,
// so this is no invariant of the checks but a lead to follow in the logs.
func (o *observer) noteStrayDeadLetters(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := o.st.hf.Query(ctx, `SELECT d.tenant_id || '/' || d.event_id, d.generation, v.state, d.replay_count, e.restarts, COALESCE(e.restart_reason, '')
		FROM dead_letters d JOIN deliveries v ON v.tenant_id = d.tenant_id AND v.event_id = d.event_id AND v.endpoint_id = d.endpoint_id
		JOIN events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id
		WHERE d.status = 'open' AND v.state <> 'dead_lettered'`)
	if err != nil {
		return
	}
	stray, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID         string
		Generation int32
		State      string
		Replays    int32
		Restarts   int32
		Reason     string
	}])
	if err != nil {
		return
	}
	for _, d := range stray {
		key := fmt.Sprintf("%s/%d", d.ID, d.Generation)
		o.mu.Lock()
		seen := o.stray[key]
		o.stray[key] = true
		o.mu.Unlock()
		if seen {
			continue
		}
		o.logger.Warn("open dead letter of an event that is not dead-lettered", "event_id", d.ID, "generation", d.Generation,
			"state", d.State, "replay_count", d.Replays, "restarts", d.Restarts, "restart_reason", d.Reason)
		o.progress.printf("note: the dead letter of %s (generation %d, replayed %d times) is open while the event is %s (restarts %d %q); what the logs say of it:",
			d.ID, d.Generation, d.Replays, d.State, d.Restarts, d.Reason)
		_, own := Split(d.ID)
		for _, l := range o.st.logLinesAbout(own, 8) {
			o.progress.printf("note:   %s", l)
		}
	}
}

// read fills in what hookflow's ledger, the receivers' ledgers and their
// APIs, the proxy and Temporal say once quiet: the events' and deliveries'
// states and dead letters, what each receiver applied, and how the heads
// stand of the lanes with an unfinished delivery among obs.Accepted.
func (o *observer) read(parent context.Context, obs *Observed) error {
	ctx, cancel := context.WithTimeout(parent, 2*time.Minute)
	defer cancel()
	st := o.st
	obs.States, obs.Deliveries = map[string]string{}, map[Delivery]DeliveryRow{}
	obs.EndpointIDs = st.endpoints.ids

	rows, err := st.hf.Query(ctx, "SELECT tenant_id || '/' || id, state FROM events")
	if err != nil {
		return fmt.Errorf("read hookflow events: %w", err)
	}
	kv, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ K, V string }])
	if err != nil {
		return fmt.Errorf("read hookflow events: %w", err)
	}
	for _, x := range kv {
		obs.States[x.K] = x.V
	}
	rows, err = st.hf.Query(ctx, "SELECT tenant_id || '/' || id, filtered_out FROM events WHERE filtered_out IS NOT NULL")
	if err != nil {
		return fmt.Errorf("read hookflow events' filtered_out: %w", err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID  string
		Out []string
	}])
	if err != nil {
		return fmt.Errorf("read hookflow events' filtered_out: %w", err)
	}
	obs.FilteredOut = map[string][]int{}
	for _, e := range left {
		for _, id := range e.Out {
			obs.FilteredOut[e.ID] = append(obs.FilteredOut[e.ID], st.endpoints.index(id))
		}
	}
	obs.Previous = st.proxy.PreviousSeen()
	ds, err := readDeliveries(ctx, st.hf, nil)
	if err != nil {
		return err
	}
	var downDL int
	for _, d := range ds {
		if _, ok := st.brokers.dest(d.EndpointID); ok {
			continue // the broker destinations' checks are their own (readBrokers)
		}
		ep := st.endpoints.index(d.EndpointID)
		obs.Deliveries[Delivery{d.EventID, ep}] = DeliveryRow{State: d.State, DeadLetter: d.DeadLetter, Generation: d.Generation}
		if d.DeadLetter != "" && ep == st.endpoints.down && ep >= 0 {
			downDL++
		}
	}
	o.mu.Lock()
	o.downDL = downDL
	o.mu.Unlock()

	// Each endpoint's lanes at the receiver it shares with the other
	// tenants' endpoints of its kind, by its endpoint_id; the entries are
	// named by the endpoint's tenant's keys.
	for ep, pool := range st.rcv {
		endpointID, tenant := st.endpoints.ids[ep], o.wl.Subscribers[ep].tenant()
		readLedger := func(q string) ([]LedgerEntry, error) {
			rows, err := pool.Query(ctx, q, endpointID)
			if err != nil {
				return nil, err
			}
			entries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerEntry])
			for i := range entries {
				entries[i].EventID, entries[i].CorrelationID = Key(tenant, entries[i].EventID), Key(tenant, entries[i].CorrelationID)
			}
			return entries, err
		}
		// entry_no is the order of application.
		ledger, err := readLedger("SELECT event_id, correlation_id, sequence, amount::bigint FROM ledger_entries WHERE endpoint_id = $1 ORDER BY entry_no")
		if err != nil {
			return fmt.Errorf("read receiver %d's ledger: %w", ep, err)
		}
		// processed_events keep no amount.
		processed, err := readLedger("SELECT event_id, correlation_id, sequence, 0::bigint FROM processed_events WHERE endpoint_id = $1")
		if err != nil {
			return fmt.Errorf("read receiver %d's processed_events: %w", ep, err)
		}
		var parked int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM parked_events WHERE endpoint_id = $1", endpointID).Scan(&parked); err != nil {
			return fmt.Errorf("read receiver %d's parked_events: %w", ep, err)
		}
		known := map[string]refreceiver.Correlation{}
		for _, corr := range o.wl.Correlations {
			t, own := Split(corr)
			if t != tenant {
				continue
			}
			rc, code, err := st.recv[ep].correlation(ctx, own, endpointID)
			if err != nil {
				return err
			}
			if code == http.StatusOK {
				known[corr] = rc
			}
		}
		obs.Ledger, obs.Processed = append(obs.Ledger, ledger), append(obs.Processed, processed)
		obs.Parked, obs.Receiver = append(obs.Parked, parked), append(obs.Receiver, known)
	}
	obs.AppliedAnswers = st.proxy.AppliedAnswers()
	if outages := st.proxy.Outages(); st.endpoints.flapping >= 0 && len(outages) > 0 {
		if obs.Breaker, err = o.readBreaker(ctx, st.endpoints.ids[st.endpoints.flapping], outages); err != nil {
			return err
		}
	}
	if obs.Brokers, err = o.readBrokers(ctx); err != nil {
		return err
	}
	// Last, with a budget of its own: a Temporal call that hangs leaves
	// its head unconfirmed (so stranded), not the ledgers unread.
	hctx, hcancel := context.WithTimeout(parent, 2*time.Minute)
	defer hcancel()
	obs.Heads, err = o.heads(hctx, obs.Deliveries)
	return err
}

// readBreaker reads what the flapping endpoint's outages did to its
// circuit breaker: its transitions from the operational events published
// with them (their correlation is contract.OperationalCorrelation of the
// endpoint), the deliveries in flight
// as each outage began, the dead letters auto-replay replayed, and its
// circuit once quiet from GET /v1/endpoints/{id}/stats, as an operator
// sees it.
func (o *observer) readBreaker(ctx context.Context, endpointID string, outages []Outage) (*BreakerObserved, error) {
	st := o.st
	b := &BreakerObserved{Outages: outages, AttemptsWhileDown: st.proxy.Stats().FlapAnswers, Window: st.cfg.RecoveryWindow}
	opCorrelation := contract.OperationalCorrelation(endpointID)
	count := func(typ string, n *int) error {
		err := st.hf.QueryRow(ctx, `SELECT count(*) FROM events WHERE correlation_id = $1 AND type = $2`, opCorrelation, typ).Scan(n)
		if err != nil {
			return fmt.Errorf("count %s events: %w", typ, err)
		}
		return nil
	}
	if err := count(contract.OpCircuitOpened, &b.Opens); err != nil {
		return nil, err
	}
	// Every close of an open circuit has its opened_at and failing_since.
	rows, err := st.hf.Query(ctx, `SELECT (data->>'failing_since')::timestamptz, (data->>'opened_at')::timestamptz,
			(data->>'closed_at')::timestamptz
		FROM events WHERE correlation_id = $1 AND type = $2 ORDER BY sequence`, opCorrelation, contract.OpCircuitClosed)
	if err != nil {
		return nil, fmt.Errorf("read circuit closes: %w", err)
	}
	if b.Spells, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Spell]); err != nil {
		return nil, fmt.Errorf("read circuit closes: %w", err)
	}
	if err := count(contract.OpDeadLetterAutoReplayed, &b.AutoReplayed); err != nil {
		return nil, err
	}
	for _, out := range outages {
		var n int
		if err := st.hf.QueryRow(ctx, `SELECT count(*) FROM deliveries WHERE endpoint_id = $1
			AND released_at <= $2 AND (delivered_at IS NULL OR delivered_at > $2) AND state <> 'skipped'`, endpointID, out.From).Scan(&n); err != nil {
			return nil, fmt.Errorf("read deliveries in flight: %w", err)
		}
		b.HeadsAtOutage = append(b.HeadsAtOutage, n)
	}
	r, err := st.apiFor(endpointID).EndpointStatsWithResponse(ctx, endpointID, nil)
	if err != nil {
		return nil, fmt.Errorf("read the flapping endpoint's stats: %w", err)
	}
	b.FinalState = string(r.JSON200.Circuit.State)
	return b, nil
}

// pauseDeadLetters counts the paused endpoint's dead letters whose reason
// says it was disabled, and those of them hookflow replayed itself when it
// was enabled again. A row holds its last generation, so a dead letter of
// the pause that dead-lettered again later for another reason is not
// counted: these are figures, not the check.
func (o *observer) pauseDeadLetters(ctx context.Context, endpointID string) (n, resumed int, err error) {
	err = o.st.hf.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE replayed_by = $3)
		FROM dead_letters WHERE endpoint_id = $1 AND starts_with(reason, $2)`,
		endpointID, contract.EndpointDisabledPrefix, contract.EndpointEnabledBy).Scan(&n, &resumed)
	if err != nil {
		return 0, 0, fmt.Errorf("count the paused endpoint's dead letters: %w", err)
	}
	return n, resumed, nil
}

// deliveryRow is one row of hookflow's deliveries with its dead letter,
// the event and correlation named by their keys (Key).
type deliveryRow struct {
	EventID, EndpointID, CorrelationID string
	Sequence                           int64
	State, DeadLetter                  string
	Generation                         int32
}

// readDeliveries reads hookflow's deliveries, with their dead letters, of
// the correlations given by key (all when nil), in lane order.
func readDeliveries(ctx context.Context, hf interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, correlations []string) ([]deliveryRow, error) {
	rows, err := hf.Query(ctx, `SELECT v.tenant_id || '/' || v.event_id, v.endpoint_id, v.tenant_id || '/' || v.correlation_id, v.sequence, v.state,
			COALESCE(d.status, ''), COALESCE(d.generation, 0)
		FROM deliveries v LEFT JOIN dead_letters d ON d.tenant_id = v.tenant_id AND d.event_id = v.event_id AND d.endpoint_id = v.endpoint_id
		WHERE $1::text[] IS NULL OR v.tenant_id || '/' || v.correlation_id = ANY($1)
		ORDER BY v.tenant_id, v.correlation_id, v.endpoint_id, v.sequence`, correlations)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[deliveryRow])
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	return out, nil
}

// heads reads how the head (its first delivery not delivered or skipped)
// of every lane with one stands: its dead letter's generation, its event's
// workflow's status and, when it runs, what it answers to QueryState.
func (o *observer) heads(ctx context.Context, deliveries map[Delivery]DeliveryRow) (map[Lane]Head, error) {
	heads := map[Lane]Head{}
	for _, corr := range o.wl.Correlations {
		for ep := range o.wl.Subscribers {
			for _, ev := range o.wl.Lane(corr, ep) {
				row, ok := deliveries[Delivery{ev.ID, ep}]
				if !ok || row.State == stateDelivered || row.State == stateSkipped {
					continue
				}
				h := Head{Next: ev.Sequence, Generation: row.Generation}
				h.Workflow, h.Status, h.QueryErr = o.headWorkflow(ctx, ev.ID) // a Key is its workflow ID
				heads[Lane{corr, ep}] = h
				break
			}
		}
	}
	return heads, nil
}

// headWorkflow describes an event's workflow and, when it runs, queries
// its state.
func (o *observer) headWorkflow(ctx context.Context, id string) (string, contract.EventStatus, string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var st contract.EventStatus
	desc, err := o.st.tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return "not found", st, ""
	case err != nil:
		return "unknown", st, "describe: " + err.Error()
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return workflowStatus(status), st, ""
	}
	v, err := o.st.tc.QueryWorkflow(ctx, id, "", contract.QueryState)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return "running", st, "query: " + err.Error()
	}
	return "running", st, ""
}
