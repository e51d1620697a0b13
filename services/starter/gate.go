package starter

import (
	"context"
	"sync"
)

// SequencerUpdatesInFlight bounds the updates one Starter (the API's, a
// worker's, the relay's) has in flight to one correlation's sequencer.
// Temporal refuses more than 10 in flight to a workflow by default
// (history.maxInFlightUpdates), and the refused ones, retried by every
// producer of a burst at once, kept the sequencer so busy in the history
// service that its workflow tasks were not started for minutes: the
// correlation stalled. Four keeps the API and a worker under the default
// together (hookflow dev, the bench); a deployment with more processes
// raises the limit to match (docker-compose.yml sets 50). A sequencer task
// still takes every update that waits for it.
const SequencerUpdatesInFlight = 4

// gate bounds the work in flight per key. A key's slots are dropped when
// nobody holds or waits for them, so idle correlations cost nothing.
type gate struct {
	size  int
	mu    sync.Mutex
	slots map[string]*slots
}

type slots struct {
	ch    chan struct{}
	users int
}

func newGate(size int) *gate {
	return &gate{size: size, slots: map[string]*slots{}}
}

// enter waits for one of key's slots, or for ctx; the caller calls the
// returned func when it is done.
func (g *gate) enter(ctx context.Context, key string) (func(), error) {
	g.mu.Lock()
	s := g.slots[key]
	if s == nil {
		s = &slots{ch: make(chan struct{}, g.size)}
		g.slots[key] = s
	}
	s.users++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if s.users--; s.users == 0 {
			delete(g.slots, key)
		}
		g.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
