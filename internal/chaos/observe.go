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
	"github.com/hookflow/hookflow/internal/refreceiver"
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
	// stray are the open dead letters of events not dead-lettered that the
	// progress saw (event/generation).
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

// counts reads hookflow's events by state and its open dead letters.
func (o *observer) counts(ctx context.Context) (map[string]int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := o.st.hf.Query(ctx, "SELECT state, count(*) FROM events GROUP BY state")
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

// noteStrayDeadLetters reports, once each, the open dead letters whose event
// is not dead-lettered: the dead-letter queue offers an operator a replay or
// skip of an event that is delivering or finished, which its workflow will
// ignore. The ledger writes a dead letter and the event's state together,
// so this is no invariant of the checks but a lead to follow in the logs.
func (o *observer) noteStrayDeadLetters(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := o.st.hf.Query(ctx, `SELECT d.event_id, d.generation, e.state, d.replay_count, e.restarts, COALESCE(e.restart_reason, '')
		FROM dead_letters d JOIN events e ON e.id = d.event_id
		WHERE d.status = 'open' AND e.state <> 'dead_lettered'`)
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
		for _, l := range o.st.logLinesAbout(d.ID, 8) {
			o.progress.printf("note:   %s", l)
		}
	}
}

// read fills in what hookflow's ledger, the receiver's ledger and its API,
// the proxy and Temporal say once quiet: the events' states and dead
// letters, what the receiver applied, and how the heads stand of the
// correlations with an unfinished event among obs.Accepted.
func (o *observer) read(parent context.Context, obs *Observed) error {
	ctx, cancel := context.WithTimeout(parent, 2*time.Minute)
	defer cancel()
	obs.States, obs.DeadLetters, obs.Receiver = map[string]string{}, map[string]string{}, map[string]refreceiver.Correlation{}
	st := o.st

	rows, err := st.hf.Query(ctx, "SELECT id, state FROM events")
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
	rows, err = st.hf.Query(ctx, "SELECT event_id, status, generation FROM dead_letters")
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	dls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID, Status string
		Generation int32
	}])
	if err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	generation := map[string]int32{}
	for _, d := range dls {
		obs.DeadLetters[d.ID] = d.Status
		generation[d.ID] = d.Generation
	}

	readLedger := func(q string) ([]LedgerEntry, error) {
		rows, err := st.rcv.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerEntry])
	}
	// entry_no is the order of application.
	if obs.Ledger, err = readLedger("SELECT event_id, correlation_id, sequence FROM ledger_entries ORDER BY entry_no"); err != nil {
		return fmt.Errorf("read receiver ledger: %w", err)
	}
	if obs.Processed, err = readLedger("SELECT event_id, correlation_id, sequence FROM processed_events"); err != nil {
		return fmt.Errorf("read receiver processed_events: %w", err)
	}
	var downDL int
	if err := st.hf.QueryRow(ctx, "SELECT count(*) FROM dead_letters WHERE endpoint_id = $1", st.endpoints.down).Scan(&downDL); err != nil {
		return fmt.Errorf("read dead letters: %w", err)
	}
	o.mu.Lock()
	o.downDL = downDL
	o.mu.Unlock()
	if err := st.rcv.QueryRow(ctx, "SELECT count(*) FROM parked_events").Scan(&obs.Parked); err != nil {
		return fmt.Errorf("read receiver parked_events: %w", err)
	}
	for _, corr := range o.wl.Correlations {
		rc, code, err := st.recv.correlation(ctx, corr)
		if err != nil {
			return err
		}
		if code == http.StatusOK {
			obs.Receiver[corr] = rc
		}
	}
	obs.AppliedAnswers = st.proxy.AppliedAnswers()
	// Last, with a budget of its own: a Temporal call that hangs leaves
	// its head unconfirmed (so stranded), not the ledgers unread.
	hctx, hcancel := context.WithTimeout(parent, 2*time.Minute)
	defer hcancel()
	obs.Heads, err = o.heads(hctx, obs.Accepted, obs.States, generation)
	return err
}

// heads reads how the head (the event at the ledger's cursor) of every
// correlation that has an unfinished event stands: its dead letter's
// generation, its workflow's status and, when it runs, what it answers to
// QueryState.
func (o *observer) heads(ctx context.Context, accepted map[string]bool, states map[string]string, generation map[string]int32) (map[string]Head, error) {
	unfinished := map[string]bool{}
	for _, ev := range o.wl.Events {
		if st := states[ev.ID]; accepted[ev.ID] && st != stateDelivered && st != stateSkipped {
			unfinished[ev.CorrelationID] = true
		}
	}
	heads := map[string]Head{}
	if len(unfinished) == 0 {
		return heads, nil
	}
	rows, err := o.st.hf.Query(ctx, "SELECT correlation_id, next_sequence FROM correlations")
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	cursors, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID   string
		Next int64
	}])
	if err != nil {
		return nil, fmt.Errorf("read cursors: %w", err)
	}
	next := map[string]int64{}
	for _, c := range cursors {
		next[c.ID] = c.Next
	}
	for _, corr := range o.wl.Correlations {
		if !unfinished[corr] {
			continue
		}
		h := Head{Next: max(1, next[corr])}
		id := o.wl.EventID(corr, h.Next)
		h.Generation = generation[id]
		if id != "" {
			h.Workflow, h.Status, h.QueryErr = o.headWorkflow(ctx, id)
		}
		heads[corr] = h
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
