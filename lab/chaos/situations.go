package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
)

// The operator's part in the run's situations (Situations, and the
// workload's voided sequences): it pauses an endpoint and enables it
// again, deletes one, voids the sequences the producer lost and posts
// each once more, and keeps what the checks need of that
// (SituationsObserved). A request the API did not answer, or answered
// 5xx, is sent again, as an operator would; a 4xx is what it is.

// pauseFor is how long the paused endpoint stays disabled: a few seconds,
// in which every head of its lanes that comes to an attempt dead-letters
// (the attempt refused) and the rest wait in their lanes.
const pauseFor = 8 * time.Second

// untilAnswered sends a request (what) again while the API does not answer
// it or answers 5xx (or 408, 429), for at most budget, and returns the last
// status (0: never answered). Each try goes to the run's log with how long
// it took.
func (o *operator) untilAnswered(ctx context.Context, what string, budget time.Duration, send func(context.Context) error) int {
	deadline := time.Now().Add(budget)
	for {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		t0 := time.Now()
		code, err := answered(send(rctx), http.StatusOK)
		cancel()
		o.logger.Info("situation request", "what", what, "status", code, "error", err, "took", time.Since(t0).Round(time.Millisecond).String())
		retry := err != nil || code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
		if !retry || ctx.Err() != nil || time.Now().After(deadline) {
			return code
		}
		select {
		case <-ctx.Done():
			return code
		case <-time.After(time.Second):
		}
	}
}

// pause disables endpoint ep, waits d, and enables it again, which
// replays the dead letters the disabling wrote (contract.EndpointEnabledBy).
// Meanwhile the operator's replays leave those to it (replayPaused).
func (o *operator) pause(ctx context.Context, ep int, d time.Duration) {
	id := o.st.endpoints.ids[ep]
	o.pausing.Store(true)
	disabled := true
	code := o.untilAnswered(ctx, "disable "+id, 2*time.Minute, func(ctx context.Context) error {
		_, err := o.st.apiOf(ep).EndpointUpdateWithResponse(ctx, id, nil, hfclient.EndpointUpdate{Disabled: &disabled})
		return err
	})
	if code != http.StatusOK {
		o.pausing.Store(false)
		o.noteSituation("pause: disabling %s was answered %d", o.wl.Subscribers[ep].Name, code)
		return
	}
	began := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	// Enabled again whatever the run's context says: a paused endpoint
	// left disabled would strand its lanes, which is no finding of the run.
	enabled, resumed := false, 0
	code = o.untilAnswered(context.WithoutCancel(ctx), "enable "+id, 5*time.Minute, func(ctx context.Context) error {
		r, err := o.st.apiOf(ep).EndpointUpdateWithResponse(ctx, id, nil, hfclient.EndpointUpdate{Disabled: &enabled})
		if err == nil {
			resumed += int(r.JSON200.ResumedDeadLetters) // a repeat finishes what a lost answer began
		}
		return err
	})
	o.mu.Lock()
	o.sit.PauseDone = code == http.StatusOK
	o.sit.PausedFor = time.Since(began)
	o.sit.PauseResumedAnswer = resumed
	o.mu.Unlock()
	o.resumedAt.Store(time.Now().UnixNano())
	o.pausing.Store(false)
	if code != http.StatusOK {
		o.noteSituation("pause: enabling %s again was answered %d", o.wl.Subscribers[ep].Name, code)
		return
	}
	o.progress.printf("paused endpoint %s: disabled for %s, enabled again (it replayed %d dead letters of its pause)",
		o.wl.Subscribers[ep].Name, time.Since(began).Round(100*time.Millisecond), resumed)
}

// replayPaused replays the paused endpoint's open dead letters as replay
// does every endpoint's, but for those its disabling wrote
// (contract.DisablingCaused), which enabling it replays: while it is
// disabled, and for autoReplayGrace after it is enabled, it leaves them;
// one still open after that was missed, and it replays it and keeps it for
// the checks (SituationsObserved.PauseLeftOpen).
func (o *operator) replayPaused(ctx context.Context, endpointID string) ([]string, error) {
	return o.replayLeftOver(ctx, endpointID,
		func(d hfclient.DeadLetter) (bool, bool) {
			resumedAt := o.resumedAt.Load()
			return contract.DisablingCaused(d.Reason), o.pausing.Load() || resumedAt == 0 ||
				time.Since(time.Unix(0, resumedAt)) < autoReplayGrace || time.Since(d.DeadLetteredAt) < autoReplayGrace
		},
		func(d hfclient.DeadLetter) {
			o.sit.PauseLeftOpen = append(o.sit.PauseLeftOpen, fmt.Sprintf("%s (generation %d, %q, written %s)", d.EventID, d.Generation, d.Reason, d.DeadLetteredAt.Format(time.TimeOnly)))
		})
}

// deleteEndpoint deletes endpoint ep mid-run. routedBefore are the events
// the API had accepted before the delete was sent: each has a delivery to
// it. Once the delete is answered, the deliveries the proxy has had a
// request for are kept (an attempt in flight at the delete may still land
// and be applied), and the endpoint must answer 404.
func (o *operator) deleteEndpoint(ctx context.Context, ep int, routedBefore map[string]bool) {
	id := o.st.endpoints.ids[ep]
	o.deleting.Store(true)
	var skippedDL int
	tries := 0
	code := o.untilAnswered(ctx, "delete "+id, 2*time.Minute, func(ctx context.Context) error {
		tries++
		r, err := o.st.apiOf(ep).EndpointDeleteWithResponse(ctx, id, nil)
		if err == nil {
			skippedDL += int(r.JSON200.SkippedDeadLetters)
		}
		if c, _ := answered(err, http.StatusOK); c == http.StatusNotFound && tries > 1 {
			return nil // a repeat of a delete whose answer was lost
		}
		return err
	})
	at := time.Now()
	sent := o.st.proxy.SeenOf(ep)
	gone := o.untilAnswered(ctx, "get deleted "+id, time.Minute, func(ctx context.Context) error {
		_, err := o.st.apiOf(ep).EndpointGetWithResponse(ctx, id, nil)
		return err
	})
	o.mu.Lock()
	o.sit.DeleteDone, o.sit.DeletedAt = code == http.StatusOK, at
	o.sit.RoutedBefore, o.sit.SentBefore, o.sit.GoneStatus, o.sit.DeleteSkippedDeadLetters = routedBefore, sent, gone, skippedDL
	o.mu.Unlock()
	if code != http.StatusOK {
		o.noteSituation("delete: deleting %s was answered %d", o.wl.Subscribers[ep].Name, code)
		return
	}
	o.progress.printf("deleted endpoint %s: %d of its deliveries had been sent, %d open dead letters skipped by the delete; GET answers %d",
		o.wl.Subscribers[ep].Name, len(sent), skippedDL, gone)
}

// void voids the sequence the producer lost of a correlation, then posts
// that sequence once more as the producer would if it found it again:
// the post must be refused as taken (409) and delivered nowhere. A 503
// from the void says the sequencer was not told: it is sent again.
func (o *operator) void(ctx context.Context, corr string, seq int64) {
	tenant, own := Split(corr)
	code := o.untilAnswered(ctx, "void "+corr, 2*time.Minute, func(ctx context.Context) error {
		_, err := o.st.tenantAPI(tenant).CorrelationSkipWithResponse(ctx, own, nil, hfclient.CorrelationSkip{Sequences: []int64{seq}, Note: "chaos: the producer lost it"})
		return err
	})
	ev := o.wl.Events[slices.IndexFunc(o.wl.Events, func(ev Event) bool { return ev.CorrelationID == corr && ev.Sequence == seq })]
	post := 0
	if code == http.StatusOK {
		body := ev.create()
		post = o.untilAnswered(ctx, "post voided "+ev.ID, 2*time.Minute, func(ctx context.Context) error {
			_, err := o.st.tenantAPI(ev.Tenant).Send(ctx, body)
			return err
		})
	}
	o.mu.Lock()
	o.sit.VoidAnswers[corr], o.sit.VoidPosts[corr] = code, post
	o.mu.Unlock()
	o.progress.printf("voided %s sequence %d (answered %d); posting it again was answered %d", corr, seq, code, post)
}

// noteSituation keeps a situation the run could not carry out, for the
// checks.
func (o *operator) noteSituation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	o.logger.Error("situation not carried out", "what", msg)
	o.progress.printf("%s", msg)
	o.mu.Lock()
	o.sit.NotCarriedOut = append(o.sit.NotCarriedOut, msg)
	o.mu.Unlock()
}

// situations returns a copy of what the operator did of the situations.
func (o *operator) situations() SituationsObserved {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.sit
	s.PauseLeftOpen, s.NotCarriedOut = slices.Clone(s.PauseLeftOpen), slices.Clone(s.NotCarriedOut)
	s.VoidAnswers, s.VoidPosts = maps.Clone(s.VoidAnswers), maps.Clone(s.VoidPosts)
	return s
}
