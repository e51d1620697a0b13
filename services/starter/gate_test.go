package starter

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGateBoundsEachKeyAlone: no more than size hold one key's slots at
// once, another key is not held up by it, a wait ends with its context,
// and a key nobody holds or waits for leaves nothing behind.
func TestGateBoundsEachKeyAlone(t *testing.T) {
	t.Parallel()
	g := newGate(2)
	ctx := context.Background()

	var inFlight, most atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			done, err := g.enter(ctx, "busy")
			if err != nil {
				t.Error(err)
				return
			}
			n := inFlight.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inFlight.Add(-1)
			done()
		})
	}
	wg.Wait()
	require.EqualValues(t, 2, most.Load(), "twenty callers, two at a time")

	first, err := g.enter(ctx, "full")
	require.NoError(t, err)
	second, err := g.enter(ctx, "full")
	require.NoError(t, err)
	other, err := g.enter(ctx, "other")
	require.NoError(t, err, "another key has its own slots")
	other()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = g.enter(short, "full")
	require.ErrorIs(t, err, context.DeadlineExceeded, "a third waits until its context ends")
	first()
	second()

	g.mu.Lock()
	defer g.mu.Unlock()
	require.Empty(t, g.slots, "no key is kept once nobody holds or waits for it")
}
