package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"time"

	hfclient "github.com/hookflow/hookflow/kit/client"
)

// Event is one event of the workload.
type Event struct {
	ID            string
	CorrelationID string
	Sequence      int64
	Amount        int64
	// Down: the event goes to the endpoint that is down for a while.
	Down bool
	// Endpoint is the index of its healthy endpoint (ignored when Down).
	Endpoint int
}

// Workload is the seeded set of events and the order they are posted in.
type Workload struct {
	Events []Event
	// Posts lists indexes into Events in posting order; an index appears
	// twice for an event posted twice.
	Posts []int
	// Correlations in creation order, and which ones go to the down endpoint.
	Correlations []string
	Down         map[string]bool
	Duplicates   int
}

// WorkloadConfig shapes a workload.
type WorkloadConfig struct {
	Seed             uint64
	Events           int
	Correlations     int
	DownCorrelations int
	HealthyEndpoints int
	DuplicateRate    float64
	// Reorder is how many places an event may arrive ahead of its
	// predecessors (about); 0 posts every correlation in order.
	Reorder int
}

// NewWorkload spreads cfg.Events over cfg.Correlations (as evenly as the
// numbers allow, each correlation numbered 1..k), picks the correlations
// that go to the down endpoint, shuffles the posting order (see Reorder; the
// down correlations' first events go within the first tenth) and adds the
// duplicate posts at random places.
func NewWorkload(cfg WorkloadConfig) (*Workload, error) {
	switch {
	case cfg.Correlations < 1 || cfg.Events < cfg.Correlations:
		return nil, fmt.Errorf("workload: need at least one correlation and one event per correlation (events=%d correlations=%d)", cfg.Events, cfg.Correlations)
	case cfg.DownCorrelations < 0 || cfg.DownCorrelations >= cfg.Correlations:
		return nil, fmt.Errorf("workload: down correlations must be fewer than correlations")
	case cfg.HealthyEndpoints < 1:
		return nil, fmt.Errorf("workload: need at least one healthy endpoint")
	case cfg.DuplicateRate < 0 || cfg.DuplicateRate > 1:
		return nil, fmt.Errorf("workload: duplicate rate must be between 0 and 1")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x776b6c64))
	w := &Workload{Down: map[string]bool{}}
	for c := 0; c < cfg.Correlations; c++ {
		w.Correlations = append(w.Correlations, fmt.Sprintf("corr-%04d", c))
	}
	for _, i := range rng.Perm(cfg.Correlations)[:cfg.DownCorrelations] {
		w.Down[w.Correlations[i]] = true
	}
	healthy := 0
	for c, corr := range w.Correlations {
		n := cfg.Events / cfg.Correlations
		if c < cfg.Events%cfg.Correlations {
			n++
		}
		ep := 0
		if !w.Down[corr] {
			ep = healthy % cfg.HealthyEndpoints
			healthy++
		}
		for s := 1; s <= n; s++ {
			w.Events = append(w.Events, Event{
				ID:            fmt.Sprintf("ev-%s-%d", corr, s),
				CorrelationID: corr, Sequence: int64(s),
				Amount: 1 + rng.Int64N(1000),
				Down:   w.Down[corr], Endpoint: ep,
			})
		}
	}
	// Each event gets a place in its correlation's timeline, pushed back by
	// a random amount of up to Reorder events, and all correlations are
	// interleaved by that place: arrival order is shuffled (an event often
	// arrives before several of its predecessors) while every correlation
	// keeps flowing through the whole posting phase.
	perCorr := w.PerCorrelation()
	keys := make([]float64, len(w.Events))
	for i, ev := range w.Events {
		keys[i] = (float64(ev.Sequence-1) + rng.Float64()*float64(cfg.Reorder)) / float64(perCorr[ev.CorrelationID])
	}
	w.Posts = rng.Perm(len(w.Events))
	sort.SliceStable(w.Posts, func(a, b int) bool { return keys[w.Posts[a]] < keys[w.Posts[b]] })
	// The down endpoint's heads go out in the first tenth, so they are
	// released, fail for a whole recovery window and dead-letter while the
	// run is still injecting faults.
	for i, ev := range w.Events {
		if !ev.Down || ev.Sequence != 1 {
			continue
		}
		for at, k := range w.Posts {
			if k == i {
				w.Posts = append(w.Posts[:at], w.Posts[at+1:]...)
				break
			}
		}
		to := rng.IntN(len(w.Posts)/10 + 1)
		w.Posts = append(w.Posts[:to], append([]int{i}, w.Posts[to:]...)...)
	}
	w.Duplicates = int(float64(len(w.Events))*cfg.DuplicateRate + 0.5)
	for _, ev := range rng.Perm(len(w.Events))[:w.Duplicates] {
		// A duplicate goes in after a random place; which copy counts as
		// "the duplicate" is up to the race between posters.
		at := rng.IntN(len(w.Posts) + 1)
		w.Posts = append(w.Posts[:at], append([]int{ev}, w.Posts[at:]...)...)
	}
	return w, nil
}

// EventID returns the id of a correlation's event at sequence seq, or ""
// when the workload has none.
func (w *Workload) EventID(correlation string, seq int64) string {
	for _, ev := range w.Events {
		if ev.CorrelationID == correlation && ev.Sequence == seq {
			return ev.ID
		}
	}
	return ""
}

// PerCorrelation returns the number of events of each correlation.
func (w *Workload) PerCorrelation() map[string]int64 {
	out := map[string]int64{}
	for _, ev := range w.Events {
		out[ev.CorrelationID]++
	}
	return out
}

// postAll posts the workload in its shuffled order, paced over spread, from
// several goroutines, each post retried (as a producer would) until the API
// answers or the deadline passes.
func (r *run) postAll(ctx context.Context, spread time.Duration, deadline time.Time) {
	posts := r.wl.Posts
	interval := spread / time.Duration(len(posts))
	items := make(chan int)
	var wg sync.WaitGroup
	for i := 0; i < r.cfg.Posters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range items {
				r.postOne(ctx, r.wl.Events[posts[k]], deadline)
				r.posted.Add(1)
			}
		}()
	}
	start := time.Now()
	for k := range posts {
		if d := time.Until(start.Add(time.Duration(k) * interval)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		items <- k
	}
	close(items)
	wg.Wait()
}

func (r *run) postOne(ctx context.Context, ev Event, deadline time.Time) {
	ep := r.downEp
	if !ev.Down {
		ep = r.healthy[ev.Endpoint]
	}
	body := hfclient.EventCreateRequest{ID: ev.ID, CorrelationID: ev.CorrelationID, Sequence: ev.Sequence, EndpointID: ep,
		Type: "chaos.amount", Data: map[string]any{"amount": ev.Amount}}
	backoff := 200 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, answer := r.api1.EventCreate(pctx, body)
		cancel()
		code, err := answered(answer, http.StatusAccepted)
		r.postTries.Add(1)
		if err != nil {
			r.postErrs.Add(1)
			r.logger.Warn("post unanswered", "event_id", ev.ID, "error", err)
		} else if code >= 500 {
			r.post5xx.Add(1)
		}
		switch {
		case err == nil && (code == http.StatusOK || code == http.StatusAccepted):
			r.mu.Lock()
			r.accepted[ev.ID] = true
			r.mu.Unlock()
			return
		case err == nil && code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
			r.mu.Lock()
			r.rejected = append(r.rejected, fmt.Sprintf("%s: %v", ev.ID, answer))
			r.mu.Unlock()
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			r.logger.Error("post gave up", "event_id", ev.ID, "code", code, "error", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}
