package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
)

// operator presses the buttons the Web UI and the API give any operator,
// through the stack's clients: it replays the open dead letters every so
// often, as an on-call operator would (but for those of the flapping
// endpoint's outages, which it leaves to hookflow's auto-replay), fixes the
// down endpoint and replays its dead letters, and, when the fault schedule
// says so, double-clicks a
// dead letter's replay (or a replay and a skip) or presses Terminate or
// Reset. It keeps what the checks need of that (the events it skipped, the
// double clicks both answered 202) and, for the faults line, how many
// replays it made and how its double clicks were answered.
type operator struct {
	st       *stack
	wl       *Workload
	logger   *slog.Logger
	progress *progress

	// healed: the down endpoint is fixed, so its dead letters are
	// replayed like the others'.
	healed atomic.Bool
	// pausing: the paused endpoint is disabled (or about to be), so the
	// dead letters its disabling writes are left to its enabling;
	// resumedAt is when it was enabled again (Unix ns, 0: not yet).
	// deleting: the deleted endpoint is gone (or going), so nothing of it
	// is replayed.
	pausing, deleting atomic.Bool
	resumedAt         atomic.Int64

	mu       sync.Mutex
	replayed map[string]int // event id → times replayed (at any endpoint)
	// skipped are the deliveries an operator asked to skip, unless the API
	// refused it (409).
	skipped map[Delivery]bool
	// clicks counts the double clicks by what the API answered them.
	clicks clickStats
	// doubleClaims are the dead letters whose two concurrent clicks were
	// both answered 202.
	doubleClaims []string
	// leftOpen are the dead letters of the flapping endpoint's outages that
	// auto-replay left open, which the operator replayed.
	leftOpen []LeftOpen
	// sit is what it did of the run's situations (situations.go).
	sit SituationsObserved
}

// LeftOpen is a dead letter of the flapping endpoint's outages that its
// auto-replay left open for longer than autoReplayGrace with its circuit
// closed, so that the operator replayed it at ReplayedAt.
type LeftOpen struct {
	EventID        string
	Generation     int
	Reason         string
	DeadLetteredAt time.Time
	ReplayedAt     time.Time
}

func newOperator(st *stack, wl *Workload, logger *slog.Logger, out *progress) *operator {
	return &operator{st: st, wl: wl, logger: logger, progress: out, replayed: map[string]int{}, skipped: map[Delivery]bool{},
		sit: SituationsObserved{VoidAnswers: map[string]int{}, VoidPosts: map[string]int{}}}
}

// replayEvery replays the open dead letters of the endpoints that are up
// (the down one too once healed) every so often, as an on-call operator
// would.
func (o *operator) replayEvery(ctx context.Context, every time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		o.replayAll(ctx)
	}
}

func (o *operator) replayAll(ctx context.Context) {
	for i, ep := range o.st.endpoints.ids {
		if i == o.st.endpoints.down && !o.healed.Load() {
			continue
		}
		if i == o.st.endpoints.deleted && o.deleting.Load() {
			continue // it answers 404; its dead letters end skipped without us
		}
		replay := o.replay
		switch i {
		case o.st.endpoints.flapping:
			replay = o.replayFlapping
		case o.st.endpoints.paused:
			replay = o.replayPaused
		}
		o.replayOf(ctx, ep, replay)
	}
	// A broker down past the recovery window dead-letters like a receiver
	// that is down: the operator replays those once it is back.
	for _, ep := range o.st.brokers.ids() {
		o.replayOf(ctx, ep, o.replay)
	}
}

// replayOf replays endpoint ep's open dead letters with replay.
func (o *operator) replayOf(ctx context.Context, ep string, replay func(context.Context, string) ([]string, error)) {
	ids, err := replay(ctx, ep)
	if err != nil {
		o.logger.Warn("operator replay failed", "endpoint_id", ep, "error", err)
		return
	}
	if len(ids) > 0 {
		o.noteReplayed(ids)
		o.logger.Info("operator replayed dead letters", "endpoint_id", ep, "count", len(ids))
	}
}

func (o *operator) noteReplayed(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		o.replayed[id]++
	}
}

// replays returns how many replays the operator's batch replays carried
// out.
func (o *operator) replays() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, k := range o.replayed {
		n += k
	}
	return n
}

// clickCounts returns the double clicks by how they were answered.
func (o *operator) clickCounts() clickStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.clicks
}

// results returns copies of the deliveries the operator skipped, of its
// double claims and of the flapping endpoint's dead letters it had to
// replay for auto-replay, for the checks.
func (o *operator) results() (skips map[Delivery]bool, doubleClaims []string, leftOpen []LeftOpen) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.skipped), slices.Clone(o.doubleClaims), slices.Clone(o.leftOpen)
}

// healDown keeps the down endpoint down until the head of each of its
// lanes has dead-lettered (so at least one recovery window after the fault
// phase began at phase0), or until deadline, then heals it. Its lanes are
// the correlations with an event of a type it subscribes to; the other
// endpoints' lanes of the same correlations go on meanwhile.
func (o *operator) healDown(ctx context.Context, phase0 time.Time, window time.Duration, deadline time.Time) {
	earliest := phase0.Add(window + 5*time.Second)
	// A lane whose head is released late (its predecessors posted late,
	// its workflow terminated) need not hold the others' replay for long.
	if cap := earliest.Add(4 * window); cap.Before(deadline) {
		deadline = cap
	}
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		if time.Now().Before(earliest) {
			continue
		}
		dls, err := o.deadLetters(ctx, o.st.endpoints.ids[o.st.endpoints.down])
		if err != nil {
			continue
		}
		lanes := map[string]bool{}
		for _, d := range dls {
			lanes[d.CorrelationID] = true
		}
		if len(lanes) >= o.downLanes() {
			break
		}
	}
	if ctx.Err() == nil {
		o.heal(ctx, phase0)
	}
}

// heal ends the down endpoint's outage and replays its dead letters, as an
// operator would once the receiver is fixed.
func (o *operator) heal(ctx context.Context, phase0 time.Time) {
	if o.healed.Swap(true) {
		return
	}
	if o.st.endpoints.down < 0 {
		return
	}
	down := o.st.endpoints.ids[o.st.endpoints.down]
	o.st.proxy.SetDown(-1)
	for try := 0; try < 10 && ctx.Err() == nil; try++ {
		dls, _ := o.deadLetters(ctx, down)
		ids, err := o.replay(ctx, down)
		if err == nil {
			o.noteReplayed(ids)
			o.progress.printf("down endpoint healed after %s: %d dead letters, %d replayed", time.Since(phase0).Round(time.Second), len(dls), len(ids))
			return
		}
		o.logger.Warn("replay of the down endpoint failed; trying again", "error", err)
		time.Sleep(2 * time.Second)
	}
}

// clickStats counts the double clicks that took place by how the API
// answered them.
type clickStats struct {
	withSkip int // a replay and a skip (the others: two replays)
	oneWon   int // one 202 and one 409, as it must be
	bothWon  int // both 202: the claim let two operators through
	skipsWon int // the skip was the one answered 202
}

// doubleClick presses replay twice at once (or replay and skip) on one open
// dead letter and holds the answers to the promise: exactly one 202, the
// other 409. The dead letter is made for it: the proxy refuses the next new
// delivery of a correlation picked among those with events still to
// deliver, which dead-letters that event at once, and the buttons are
// pressed as soon as its dead letter is open (before the operator loop's
// batch replay, which comes every RecoveryWindow, most likely gets to it).
func (o *operator) doubleClick(ctx context.Context, a Action) (outcome, string) {
	// From the deliveries, not the events: hookflow's operational events
	// about an endpoint (its breaker opening, a dead letter) are events
	// with no delivery here, so a correlation of theirs never gets one to
	// refuse.
	corrs, err := o.candidates(ctx, `SELECT DISTINCT tenant_id || '/' || correlation_id FROM deliveries
		WHERE state IN ('waiting', 'delivering') ORDER BY 1`)
	if err != nil {
		return skipped, err.Error()
	}
	if len(corrs) == 0 {
		return skipped, "no correlation has events still to deliver"
	}
	corr := corrs[a.Pick%uint64(len(corrs))]
	refused := o.st.proxy.RefuseNext(corr)
	defer o.st.proxy.Disarm(corr)
	var d Delivery
	select {
	case d = <-refused:
	case <-time.After(30 * time.Second):
		return skipped, "no new delivery of " + corr + " came within 30s"
	case <-ctx.Done():
		return skipped, "the run ended first"
	}
	id, ep := d.EventID, o.st.endpoints.ids[d.Endpoint]
	if err := o.waitOpen(ctx, id, ep, 30*time.Second); err != nil {
		return skipped, err.Error()
	}

	buttons := [2]string{"replay", "replay"}
	if a.WithSkip {
		buttons[1] = "skip"
	}
	var codes [2]int
	var errs [2]error
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buttons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i], errs[i] = o.press(ctx, id, ep, buttons[i])
		}()
	}
	close(start)
	wg.Wait()

	answers := fmt.Sprintf("%s %s at %s: %s, %s: %s", buttons[0], id, o.wl.Subscribers[d.Endpoint].Name, answer(codes[0], errs[0]), buttons[1], answer(codes[1], errs[1]))
	won, lost := 0, 0
	skipWon, skipAsked := false, false
	for i, code := range codes {
		switch {
		case errs[i] != nil:
		case code == http.StatusAccepted:
			won++
			skipWon = skipWon || buttons[i] == "skip"
		case code == http.StatusConflict:
			lost++
		}
		// A skip answered 202, or not answered at all (it may have been
		// carried out all the same), may end the event skipped; only a 409
		// says for sure that it did not.
		skipAsked = skipAsked || (buttons[i] == "skip" && (errs[i] != nil || code != http.StatusConflict))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if skipAsked {
		o.skipped[d] = true
	}
	switch {
	case won == 2:
		o.clicks.bothWon++
		o.doubleClaims = append(o.doubleClaims, fmt.Sprintf("%s (%s)", id, answers))
	case won == 1 && lost == 1:
		o.clicks.oneWon++
	default:
		// Another replay came first (both 409), or Temporal could not take
		// the signal (503, the claim undone): no double click was tested.
		return skipped, "inconclusive: " + answers
	}
	if a.WithSkip {
		o.clicks.withSkip++
	}
	if skipWon {
		o.clicks.skipsWon++
	}
	return injected, answers
}

func answer(code int, err error) string {
	if err != nil {
		return "no answer (" + err.Error() + ")"
	}
	return fmt.Sprint(code)
}

// waitOpen waits until the dead letter of the event's delivery to
// endpointID is open (the event by its Key).
func (o *operator) waitOpen(ctx context.Context, eventID, endpointID string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	_, own := Split(eventID)
	for {
		var d hfclient.DeadLetter
		r, err := o.st.apiFor(endpointID).DeadLetterGetWithResponse(ctx, own, &hfclient.DeadLetterGetParams{EndpointID: &endpointID})
		if err == nil {
			d = *r.JSON200
		}
		code, err := answered(err, http.StatusOK)
		if err == nil && code == http.StatusOK && d.Status == "open" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the dead letter of %s at %s was not open within %s (last: %d %s %v)", eventID, endpointID, timeout, code, d.Status, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// downLanes counts the down endpoint's lanes: the correlations with an
// event it subscribes to.
func (o *operator) downLanes() int {
	n := 0
	for _, corr := range o.wl.Correlations {
		if len(o.wl.Lane(corr, o.st.endpoints.down)) > 0 {
			n++
		}
	}
	return n
}

// pickEvent picks an unfinished event, whose workflow an operator could
// terminate or reset: for an even pick among the released ones (delivering
// or dead-lettered, where the repair has most to do), else among all.
func (o *operator) pickEvent(ctx context.Context, pick uint64) (string, error) {
	q := `SELECT tenant_id || '/' || id FROM events WHERE state IN ('waiting', 'delivering', 'dead_lettered') ORDER BY 1`
	if pick%2 == 0 {
		q = `SELECT tenant_id || '/' || id FROM events WHERE state IN ('delivering', 'dead_lettered') ORDER BY 1`
	}
	ids, err := o.candidates(ctx, q)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", errors.New("no unfinished event")
	}
	return ids[(pick>>1)%uint64(len(ids))], nil // a Key is its workflow ID, of any tenant
}

// pickSequencer picks the sequencer of a correlation with unfinished
// events, of any tenant.
func (o *operator) pickSequencer(ctx context.Context, pick uint64) (string, error) {
	corrs, err := o.candidates(ctx, `SELECT DISTINCT tenant_id || '/' || correlation_id FROM events
		WHERE state NOT IN ('delivered', 'skipped') ORDER BY 1`)
	if err != nil {
		return "", err
	}
	if len(corrs) == 0 {
		return "", errors.New("no correlation has unfinished events")
	}
	return contract.SequencerID(Split(corrs[pick%uint64(len(corrs))])), nil
}

// candidates reads one column of ids from hookflow's ledger.
func (o *operator) candidates(ctx context.Context, query string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := o.st.hf.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read candidates: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("read candidates: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read candidates: %w", err)
	}
	return out, nil
}

// terminate presses Terminate on a workflow.
func (o *operator) terminate(ctx context.Context, workflowID string) (outcome, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := o.st.tc.TerminateWorkflow(ctx, workflowID, "", "chaos: an operator pressed Terminate")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return skipped, workflowID + " is not running"
	case err != nil:
		return skipped, fmt.Sprintf("terminate %s: %v", workflowID, err)
	}
	return injected, "terminated " + workflowID
}

// reset presses Reset on a running workflow, back to an earlier completed
// workflow task (any but the last, picked by pick; the only one when there
// is one), with Temporal's default reapply: the signals and updates after
// that point are delivered to the new run again.
func (o *operator) reset(ctx context.Context, workflowID string, pick uint64) (outcome, string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	desc, err := o.st.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return skipped, fmt.Sprintf("describe %s: %v", workflowID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return skipped, fmt.Sprintf("%s is %s", workflowID, workflowStatus(info.GetStatus()))
	}
	runID := info.GetExecution().GetRunId()
	tasks, err := completedTasks(ctx, o.st.tc, workflowID, runID)
	if err != nil {
		return skipped, err.Error()
	}
	if len(tasks) == 0 {
		return skipped, workflowID + " has completed no workflow task yet"
	}
	n := len(tasks)
	if n > 1 {
		n--
	}
	to := tasks[(pick>>8)%uint64(n)]
	_, err = o.st.tc.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 temporalNamespace,
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: runID},
		Reason:                    "chaos: an operator pressed Reset",
		WorkflowTaskFinishEventId: to,
		RequestId:                 randomHex(16),
	})
	if err != nil {
		return skipped, fmt.Sprintf("reset %s: %v", workflowID, err)
	}
	return injected, fmt.Sprintf("reset %s to event %d (workflow task %d of %d)", workflowID, to, slices.Index(tasks, to)+1, len(tasks))
}

// completedTasks returns the event IDs of a run's WORKFLOW_TASK_COMPLETED
// events: the points a Reset can go back to.
func completedTasks(ctx context.Context, tc client.Client, workflowID, runID string) ([]int64, error) {
	var tasks []int64
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			tasks = append(tasks, ev.GetEventId())
		}
	}
	return tasks, nil
}

// workflowStatus is a workflow's status in lower case ("running",
// "terminated", …).
func workflowStatus(s enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// deadLetters lists the dead letters of an endpoint (every status).
func (o *operator) deadLetters(ctx context.Context, endpointID string) ([]hfclient.DeadLetter, error) {
	return o.st.apiFor(endpointID).DeadLetterListAll(ctx, hfclient.DeadLetterListParams{EndpointID: &endpointID, Status: new(hfclient.DeadLetterListParamsStatusAll), Limit: new(int64(500))})
}

// replay replays every open dead letter of an endpoint, the way an operator
// would after fixing it, and returns the replayed event ids.
func (o *operator) replay(ctx context.Context, endpointID string) ([]string, error) {
	r, err := o.st.apiFor(endpointID).DeadLetterReplayBatchWithResponse(ctx, &hfclient.DeadLetterReplayBatchParams{EndpointID: &endpointID})
	if err != nil {
		return nil, fmt.Errorf("replay dead letters of %s: %w", endpointID, err)
	}
	return r.JSON202.EventIDs, nil
}

// autoReplayGrace is how long the operator leaves a dead letter of the
// flapping endpoint's outages to auto-replay once the endpoint's circuit is
// closed with no auto-replay pending: its sweep runs every second, so one
// still open after that was missed.
const autoReplayGrace = 20 * time.Second

// replayFlapping replays the open dead letters of the flapping endpoint
// that its auto_replay does not take (a rejection: a double click's), as
// replay does every endpoint's, and those of its outages (contract.
// OutageCaused) that auto-replay left open: dead-lettered more than
// autoReplayGrace ago while its circuit is closed with no auto-replay
// pending. It keeps the latter for the checks. It returns the replayed
// event ids.
func (o *operator) replayFlapping(ctx context.Context, endpointID string) ([]string, error) {
	r, err := o.st.apiFor(endpointID).EndpointStatsWithResponse(ctx, endpointID, nil)
	if err != nil {
		return nil, fmt.Errorf("read the circuit of %s: %w", endpointID, err)
	}
	h := r.JSON200
	waiting := h.Circuit.State != "closed" || h.Circuit.AutoReplayPending
	return o.replayLeftOver(ctx, endpointID,
		func(d hfclient.DeadLetter) (bool, bool) {
			return contract.OutageCaused(d.Reason), waiting || time.Since(d.DeadLetteredAt) < autoReplayGrace
		},
		func(d hfclient.DeadLetter) {
			o.leftOpen = append(o.leftOpen, LeftOpen{EventID: d.EventID, Generation: int(d.Generation), Reason: d.Reason, DeadLetteredAt: d.DeadLetteredAt, ReplayedAt: time.Now()})
		})
}

// replayLeftOver replays an endpoint's open dead letters, but for those
// hookflow replays itself (owed reports it) while it may still (wait):
// one owed and replayed here was left open, and missed is told of it
// (under o.mu) for the checks. It returns the replayed event ids.
func (o *operator) replayLeftOver(ctx context.Context, endpointID string, owed func(hfclient.DeadLetter) (owed, wait bool), missed func(hfclient.DeadLetter)) ([]string, error) {
	dls, err := o.st.apiFor(endpointID).DeadLetterListAll(ctx, hfclient.DeadLetterListParams{EndpointID: &endpointID, Status: new(hfclient.DeadLetterListParamsStatusOpen), Limit: new(int64(500))})
	if err != nil {
		return nil, fmt.Errorf("list dead letters of %s: %w", endpointID, err)
	}
	var ids []string
	for _, d := range dls {
		isOwed, wait := owed(d)
		if isOwed && wait {
			continue
		}
		// A 409 says hookflow's own replay (or a double click) took it
		// meanwhile.
		_, err := o.st.apiFor(endpointID).DeadLetterReplayWithResponse(ctx, d.EventID, nil, hfclient.Operator{EndpointID: endpointID, Note: "chaos: operator's replay"})
		if code, err := answered(err, http.StatusAccepted); err != nil || code != http.StatusAccepted {
			continue
		}
		ids = append(ids, d.EventID)
		if isOwed {
			o.mu.Lock()
			missed(d)
			o.mu.Unlock()
		}
	}
	return ids, nil
}

// press presses an operator's button (replay or skip) on the dead letter
// of an event's delivery to endpointID (the event by its Key), and returns
// the API's answer: 202
// when it took it, 409 when the dead letter was replayed or skipped
// already; the error when none came.
func (o *operator) press(ctx context.Context, eventID, endpointID, button string) (int, error) {
	note := hfclient.Operator{EndpointID: endpointID, Note: "chaos: " + button + " pressed twice at once"}
	api := o.st.apiFor(endpointID)
	_, own := Split(eventID)
	var err error
	if button == "skip" {
		_, err = api.DeadLetterSkipWithResponse(ctx, own, nil, note)
	} else {
		_, err = api.DeadLetterReplayWithResponse(ctx, own, nil, note)
	}
	return answered(err, http.StatusAccepted)
}
