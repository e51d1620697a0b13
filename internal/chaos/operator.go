package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
)

// operator replays the open dead letters of the healthy endpoints (and of
// the down one once healed) every so often, as an on-call operator would.
func (r *run) operator(ctx context.Context, every time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		r.replayAll(ctx)
	}
}

func (r *run) replayAll(ctx context.Context) {
	eps := append([]string(nil), r.healthy...)
	if r.downHeal.Load() {
		eps = append(eps, r.downEp)
	}
	for _, ep := range eps {
		ids, err := r.replay(ctx, ep)
		if err != nil {
			r.logger.Warn("operator replay failed", "endpoint_id", ep, "error", err)
			continue
		}
		if len(ids) > 0 {
			r.noteReplayed(ids)
			r.logger.Info("operator replayed dead letters", "endpoint_id", ep, "count", len(ids))
		}
	}
}

func (r *run) noteReplayed(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.replayed[id]++
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
func (r *run) doubleClick(ctx context.Context, a Action) (outcome, string) {
	corrs, err := r.candidates(ctx, `SELECT DISTINCT correlation_id FROM events
		WHERE state IN ('queued', 'waiting', 'delivering') ORDER BY correlation_id`)
	if err != nil {
		return skipped, err.Error()
	}
	var healthy []string
	for _, c := range corrs {
		if !r.wl.Down[c] {
			healthy = append(healthy, c)
		}
	}
	if len(healthy) == 0 {
		return skipped, "no correlation has events still to deliver"
	}
	corr := healthy[a.Pick%uint64(len(healthy))]
	refused := r.proxy.RefuseNext(corr)
	defer r.proxy.Disarm(corr)
	var id string
	select {
	case id = <-refused:
	case <-time.After(30 * time.Second):
		return skipped, "no new delivery of " + corr + " came within 30s"
	case <-ctx.Done():
		return skipped, "the run ended first"
	}
	if err := r.waitOpen(ctx, id, 30*time.Second); err != nil {
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
			codes[i], errs[i] = r.press(ctx, id, buttons[i])
		}()
	}
	close(start)
	wg.Wait()

	answers := fmt.Sprintf("%s %s: %s, %s %s: %s", buttons[0], id, answer(codes[0], errs[0]), buttons[1], id, answer(codes[1], errs[1]))
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if skipAsked {
		r.skipped[id] = true
	}
	switch {
	case won == 2:
		r.clicks.bothWon++
		r.doubleClaims = append(r.doubleClaims, fmt.Sprintf("%s (%s)", id, answers))
	case won == 1 && lost == 1:
		r.clicks.oneWon++
	default:
		// Another replay came first (both 409), or Temporal could not take
		// the signal (503, the claim undone): no double click was tested.
		return skipped, "inconclusive: " + answers
	}
	if a.WithSkip {
		r.clicks.withSkip++
	}
	if skipWon {
		r.clicks.skipsWon++
	}
	return injected, answers
}

func answer(code int, err error) string {
	if err != nil {
		return "no answer (" + err.Error() + ")"
	}
	return fmt.Sprint(code)
}

// waitOpen waits until the event's dead letter is open.
func (r *run) waitOpen(ctx context.Context, eventID string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		d, err := r.api1.DeadLetterGet(ctx, eventID)
		code, err := answered(err, http.StatusOK)
		if err == nil && code == http.StatusOK && d.Status == "open" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the dead letter of %s was not open within %s (last: %d %s %v)", eventID, timeout, code, d.Status, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pickEvent picks an unfinished event, whose workflow an operator could
// terminate or reset: for an even pick among the released ones (delivering
// or dead-lettered, where the repair has most to do), else among all.
func (r *run) pickEvent(ctx context.Context, pick uint64) (string, error) {
	q := `SELECT id FROM events WHERE state IN ('waiting', 'delivering', 'dead_lettered') ORDER BY id`
	if pick%2 == 0 {
		q = `SELECT id FROM events WHERE state IN ('delivering', 'dead_lettered') ORDER BY id`
	}
	ids, err := r.candidates(ctx, q)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", errors.New("no unfinished event")
	}
	return ids[(pick>>1)%uint64(len(ids))], nil
}

// pickSequencer picks the sequencer of a correlation with unfinished events.
func (r *run) pickSequencer(ctx context.Context, pick uint64) (string, error) {
	corrs, err := r.candidates(ctx, `SELECT DISTINCT correlation_id FROM events
		WHERE state NOT IN ('delivered', 'skipped') ORDER BY correlation_id`)
	if err != nil {
		return "", err
	}
	if len(corrs) == 0 {
		return "", errors.New("no correlation has unfinished events")
	}
	return contract.SequencerID(corrs[pick%uint64(len(corrs))]), nil
}

// candidates reads one column of ids from hookflow's ledger.
func (r *run) candidates(ctx context.Context, query string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := r.hf.Query(ctx, query)
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
func (r *run) terminate(ctx context.Context, workflowID string) (outcome, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := r.tc.TerminateWorkflow(ctx, workflowID, "", "chaos: an operator pressed Terminate")
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
func (r *run) reset(ctx context.Context, workflowID string, pick uint64) (outcome, string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	desc, err := r.tc.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		return skipped, fmt.Sprintf("describe %s: %v", workflowID, err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return skipped, fmt.Sprintf("%s is %s", workflowID, workflowStatus(info.GetStatus()))
	}
	runID := info.GetExecution().GetRunId()
	var tasks []int64
	it := r.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return skipped, fmt.Sprintf("history of %s: %v", workflowID, err)
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			tasks = append(tasks, ev.GetEventId())
		}
	}
	if len(tasks) == 0 {
		return skipped, workflowID + " has completed no workflow task yet"
	}
	n := len(tasks)
	if n > 1 {
		n--
	}
	to := tasks[(pick>>8)%uint64(n)]
	_, err = r.tc.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
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

// workflowStatus is a workflow's status in lower case ("running",
// "terminated", …).
func workflowStatus(s enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// deadLetters lists the dead letters of an endpoint (every status).
func (r *run) deadLetters(ctx context.Context, endpointID string) ([]hfclient.DeadLetter, error) {
	return r.api1.DeadLetterListAll(ctx, hfclient.DeadLetterFilter{EndpointID: endpointID, Status: hfclient.DeadLetterAll, Limit: 1000})
}

// replay replays every open dead letter of an endpoint, the way an operator
// would after fixing it, and returns the replayed event ids.
func (r *run) replay(ctx context.Context, endpointID string) ([]string, error) {
	res, err := r.api1.DeadLetterReplayBatch(ctx, hfclient.DeadLetterFilter{EndpointID: endpointID})
	if err != nil {
		return nil, fmt.Errorf("replay dead letters of %s: %w", endpointID, err)
	}
	return res.EventIDs, nil
}

// press presses an operator's button (replay or skip) on one event's dead
// letter, and returns the API's answer: 202 when it took it, 409 when the
// dead letter was replayed or skipped already; the error when none came.
func (r *run) press(ctx context.Context, eventID, button string) (int, error) {
	note := hfclient.OperatorRequest{Note: "chaos: " + button + " pressed twice at once"}
	var err error
	if button == "skip" {
		_, err = r.api1.DeadLetterSkip(ctx, eventID, note)
	} else {
		_, err = r.api1.DeadLetterReplay(ctx, eventID, note)
	}
	return answered(err, http.StatusAccepted)
}
