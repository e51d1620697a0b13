package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/hookflow/hookflow/internal/contract"
)

// counts reads hookflow's events by state and its open dead letters.
func (r *run) counts(ctx context.Context) (map[string]int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.hf.Query(ctx, "SELECT state, count(*) FROM events GROUP BY state")
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
	if err := r.hf.QueryRow(ctx, "SELECT count(*) FROM dead_letters WHERE status = 'open'").Scan(&open); err != nil {
		return nil, 0, err
	}
	return states, open, nil
}

func pending(states map[string]int) int {
	return states["queued"] + states["waiting"] + states["delivering"]
}

func (r *run) progressLoop(ctx context.Context) {
	last, lastAt := -1, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		last, lastAt = r.progressLine(ctx, last, lastAt)
	}
}

// progressLine prints one line; last and lastAt are the delivered count at
// the previous line, for the rate.
func (r *run) progressLine(ctx context.Context, last int, lastAt time.Time) (int, time.Time) {
	r.mu.Lock()
	accepted := len(r.accepted)
	r.mu.Unlock()
	line := fmt.Sprintf("posted %d/%d (accepted %d/%d)", r.posted.Load(), len(r.wl.Posts), accepted, len(r.wl.Events))
	states, open, err := r.counts(ctx)
	if err != nil {
		line += " | hookflow db unavailable"
	} else {
		d := states[stateDelivered]
		rate := ""
		if last >= 0 {
			rate = fmt.Sprintf(" (%.1f/s)", float64(d-last)/time.Since(lastAt).Seconds())
		}
		line += fmt.Sprintf(" | delivered %d%s in-flight %d dead-lettered %d (open %d) skipped %d", d, rate, pending(states), states[stateDeadLettered], open, states[stateSkipped])
		last, lastAt = d, time.Now()
		if open > 0 {
			r.noteStrayDeadLetters(ctx)
		}
	}
	total, _ := r.faultTotals()
	r.progressf("%s | faults %d", line, total)
	return last, lastAt
}

// noteStrayDeadLetters reports, once each, the open dead letters whose event
// is not dead-lettered: the dead-letter queue offers an operator a replay or
// skip of an event that is delivering or finished, which its workflow will
// ignore. The ledger writes a dead letter and the event's state together,
// so this is no invariant of the checks but a lead to follow in the logs.
func (r *run) noteStrayDeadLetters(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rows, err := r.hf.Query(ctx, `SELECT d.event_id, d.generation, e.state, d.replay_count, e.restarts, COALESCE(e.restart_reason, '')
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
		r.mu.Lock()
		seen := r.stray[key]
		r.stray[key] = true
		r.mu.Unlock()
		if seen {
			continue
		}
		r.logger.Warn("open dead letter of an event that is not dead-lettered", "event_id", d.ID, "generation", d.Generation,
			"state", d.State, "replay_count", d.Replays, "restarts", d.Restarts, "restart_reason", d.Reason)
		r.progressf("note: the dead letter of %s (generation %d, replayed %d times) is open while the event is %s (restarts %d %q); what the logs say of it:",
			d.ID, d.Generation, d.Replays, d.State, d.Restarts, d.Reason)
		for _, l := range r.logLinesAbout(d.ID, 8) {
			r.progressf("note:   %s", l)
		}
	}
}

// logLinesAbout returns the last n lines of the API's and the workers' logs
// that mention id, in time order (each line begins with its JSON time),
// each prefixed with its process and cut to 400 bytes: the evidence of a
// lead, printed while the run's logs still exist.
func (r *run) logLinesAbout(id string, n int) []string {
	type line struct{ proc, text string }
	var found []line
	for _, p := range append([]*proc{r.api}, r.workers...) {
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, id) {
				found = append(found, line{p.name, l})
			}
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].text < found[j].text })
	var out []string
	for _, l := range found[max(0, len(found)-n):] {
		text := l.text
		if len(text) > 400 {
			text = text[:400] + "…"
		}
		out = append(out, l.proc+": "+text)
	}
	return out
}

// waitQuiet waits until every event is delivered or skipped (nothing in
// flight, no dead letter open, none dead-lettered with a replay or skip
// claimed but not carried out), replaying what dead-letters meanwhile, or
// until QuietTimeout. It also ends when nothing has moved for a while:
// longer than a Temporal recovery, a recovery window, and a few rounds of
// the API's repair sweep (which looks at a head after it has not moved for
// StuckAfter), so that whatever is still stuck then is what the checks
// report stranded, not a timeout.
func (r *run) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.QuietTimeout)
	stall := max(3*time.Minute, 4*r.cfg.RecoveryWindow, 4*(apiStuckAfter+apiSweepInterval))
	lastReplay, lastMove, lastSeen := time.Time{}, time.Now(), ""
	r.progressf("waiting for quiet (at most %s, or %s without progress)", r.cfg.QuietTimeout, stall)
	for {
		states, open, err := r.counts(ctx)
		if err == nil && pending(states) == 0 && open == 0 && states[stateDeadLettered] == 0 {
			r.progressf("quiet after %s: %d delivered, %d skipped", time.Since(r.began).Round(time.Second), states[stateDelivered], states[stateSkipped])
			break
		}
		if err == nil {
			if seen := fmt.Sprint(states, open); seen != lastSeen {
				lastSeen, lastMove = seen, time.Now()
			}
		}
		if err == nil && open > 0 && time.Since(lastReplay) > 5*time.Second {
			r.replayAll(ctx)
			lastReplay = time.Now()
		}
		if time.Now().After(deadline) {
			r.progressf("no quiet within %s; checking what there is", r.cfg.QuietTimeout)
			break
		}
		if time.Since(lastMove) > stall {
			r.progressf("nothing moved for %s; checking what there is", stall)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	// Requests the proxy still holds may yet reach the receiver.
	r.proxy.Wait(r.cfg.DeliveryTimeout + 15*time.Second)
	return nil
}

// The API's repair sweep, as the stack runs it (starter.Config defaults):
// a head that has not moved for apiStuckAfter is looked at on the next
// sweep.
const (
	apiStuckAfter    = 30 * time.Second
	apiSweepInterval = time.Second
)

// observe gathers hookflow's ledger, the receiver's ledger and its API
// answers, how the heads of unfinished correlations stand, and what the run
// itself saw (its skips, its double clicks, its failed restarts), and runs
// Check.
func (r *run) observe(parent context.Context) (Verdict, error) {
	ctx, cancel := context.WithTimeout(parent, 2*time.Minute)
	defer cancel()
	o := Observed{States: map[string]string{}, DeadLetters: map[string]string{}, Receiver: map[string]receiverCorrelation{},
		Skipped: map[string]bool{}, PostgresRestartFailures: r.faults.count(KindRestartPostgres, failed)}
	r.mu.Lock()
	o.Accepted = make(map[string]bool, len(r.accepted))
	for k := range r.accepted {
		o.Accepted[k] = true
	}
	for k := range r.skipped {
		o.Skipped[k] = true
	}
	o.Rejected = append(o.Rejected, r.rejected...)
	o.DoubleClaims = append(o.DoubleClaims, r.doubleClaims...)
	r.mu.Unlock()

	rows, err := r.hf.Query(ctx, "SELECT id, state FROM events")
	if err != nil {
		return Verdict{}, fmt.Errorf("read hookflow events: %w", err)
	}
	kv, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ K, V string }])
	if err != nil {
		return Verdict{}, fmt.Errorf("read hookflow events: %w", err)
	}
	for _, x := range kv {
		o.States[x.K] = x.V
	}
	rows, err = r.hf.Query(ctx, "SELECT event_id, status, generation FROM dead_letters")
	if err != nil {
		return Verdict{}, fmt.Errorf("read dead letters: %w", err)
	}
	dls, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID, Status string
		Generation int32
	}])
	if err != nil {
		return Verdict{}, fmt.Errorf("read dead letters: %w", err)
	}
	generation := map[string]int32{}
	for _, d := range dls {
		o.DeadLetters[d.ID] = d.Status
		generation[d.ID] = d.Generation
	}

	readLedger := func(q string) ([]LedgerEntry, error) {
		rows, err := r.rcv.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToStructByPos[LedgerEntry])
	}
	// entry_no is the order of application.
	if o.Ledger, err = readLedger("SELECT event_id, correlation_id, sequence FROM ledger_entries ORDER BY entry_no"); err != nil {
		return Verdict{}, fmt.Errorf("read receiver ledger: %w", err)
	}
	if o.Processed, err = readLedger("SELECT event_id, correlation_id, sequence FROM processed_events"); err != nil {
		return Verdict{}, fmt.Errorf("read receiver processed_events: %w", err)
	}
	var downDL int
	if err := r.hf.QueryRow(ctx, "SELECT count(*) FROM dead_letters WHERE endpoint_id = $1", r.downEp).Scan(&downDL); err != nil {
		return Verdict{}, fmt.Errorf("read dead letters: %w", err)
	}
	r.mu.Lock()
	r.downDL = downDL
	r.mu.Unlock()
	if downDL == 0 && !r.cfg.Calm {
		r.progressf("warning: no event of the down endpoint dead-lettered; that fault did not happen in this run")
	}
	if err := r.rcv.QueryRow(ctx, "SELECT count(*) FROM parked_events").Scan(&o.Parked); err != nil {
		return Verdict{}, fmt.Errorf("read receiver parked_events: %w", err)
	}
	for _, corr := range r.wl.Correlations {
		rc, code, err := r.recv.correlation(ctx, corr)
		if err != nil {
			return Verdict{}, err
		}
		if code == http.StatusOK {
			o.Receiver[corr] = rc
		}
	}
	o.AppliedAnswers = r.proxy.AppliedAnswers()
	// Last, with a budget of its own: a Temporal call that hangs leaves
	// its head unconfirmed (so stranded), not the ledgers unread.
	hctx, hcancel := context.WithTimeout(parent, 2*time.Minute)
	defer hcancel()
	if o.Heads, err = r.heads(hctx, o.Accepted, o.States, generation); err != nil {
		return Verdict{}, err
	}
	return Check(r.wl, o), nil
}

// heads reads how the head (the event at the ledger's cursor) of every
// correlation that has an unfinished event stands: its dead letter's
// generation, its workflow's status and, when it runs, what it answers to
// QueryState.
func (r *run) heads(ctx context.Context, accepted map[string]bool, states map[string]string, generation map[string]int32) (map[string]Head, error) {
	unfinished := map[string]bool{}
	for _, ev := range r.wl.Events {
		if st := states[ev.ID]; accepted[ev.ID] && st != stateDelivered && st != stateSkipped {
			unfinished[ev.CorrelationID] = true
		}
	}
	heads := map[string]Head{}
	if len(unfinished) == 0 {
		return heads, nil
	}
	rows, err := r.hf.Query(ctx, "SELECT correlation_id, next_sequence FROM correlations")
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
	for _, corr := range r.wl.Correlations {
		if !unfinished[corr] {
			continue
		}
		h := Head{Next: max(1, next[corr])}
		id := r.wl.EventID(corr, h.Next)
		h.Generation = generation[id]
		if id != "" {
			h.Workflow, h.Status, h.QueryErr = r.headWorkflow(ctx, id)
		}
		heads[corr] = h
	}
	return heads, nil
}

// headWorkflow describes an event's workflow and, when it runs, queries
// its state.
func (r *run) headWorkflow(ctx context.Context, id string) (string, contract.EventStatus, string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var st contract.EventStatus
	desc, err := r.tc.DescribeWorkflowExecution(ctx, id, "")
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
	v, err := r.tc.QueryWorkflow(ctx, id, "", contract.QueryState)
	if err == nil {
		err = v.Get(&st)
	}
	if err != nil {
		return "running", st, "query: " + err.Error()
	}
	return "running", st, ""
}
