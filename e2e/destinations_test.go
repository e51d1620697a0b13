package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/destcheck"
	"github.com/hookflow/hookflow/lab/testenv/natstest"
	"github.com/hookflow/hookflow/lab/testenv/rabbittest"
	"github.com/hookflow/hookflow/lab/testenv/redistest"
)

// broker is a real broker a destination test delivers into: started for
// the test, killed (SIGKILL) and restarted with its data, and prepared as
// its user would (the stream or exchange hookflow writes to is the user's).
type broker struct {
	kill    func() error
	restart func(context.Context) error
	// endpoint is the body that creates an endpoint on it, names under
	// prefix.
	endpoint func(prefix string) map[string]any
	// atLeastOnce: the broker cannot refuse a repeat (a publish whose
	// confirm was lost is published again), so a lane may hold an event
	// twice; its first copies are still in order.
	atLeastOnce bool
	// drains: reading the destination back consumes it (a queue), so it
	// is read once, at the end.
	drains bool
}

func natsBroker(t *testing.T) broker {
	s := natstest.ForTest(t)
	return broker{kill: s.Kill, restart: s.Restart, endpoint: func(prefix string) map[string]any {
		require.NoError(t, natstest.CreateStream(context.Background(), s.URL(), "hf_"+prefix, []string{prefix + ".>"}))
		return map[string]any{"type": "nats", "config": map[string]any{"url": s.URL(), "subject": prefix},
			"credentials": map[string]string{"username": natstest.Username, "password": s.Password()}}
	}}
}

func redisBroker(t *testing.T) broker {
	s := redistest.ForTest(t)
	return broker{kill: s.Kill, restart: s.Restart, endpoint: func(prefix string) map[string]any {
		require.NoError(t, s.CreateStream(context.Background(), prefix, "consumers"))
		return map[string]any{"type": "redis", "config": map[string]any{"addr": s.Addr(), "stream": prefix, "tls": false},
			"credentials": s.Credentials()}
	}}
}

// TestRedisDestination: the same of a Redis Streams destination.
func TestRedisDestination(t *testing.T) { testDestination(t, redisBroker(t)) }

func rabbitBroker(t *testing.T) broker {
	s := rabbittest.ForTest(t)
	return broker{kill: s.Kill, restart: s.Restart, atLeastOnce: true, drains: true, endpoint: func(prefix string) map[string]any {
		// The exchange is the user's; the audit queue bound to every
		// routing key is what the test reads back.
		require.NoError(t, s.Declare(context.Background(), prefix, prefix+".audit"))
		return map[string]any{"type": "rabbitmq", "config": map[string]any{"url": s.URL(), "exchange": prefix, "audit_queue": prefix + ".audit"},
			"credentials": s.Credentials()}
	}}
}

// TestRabbitMQDestination: the same of a RabbitMQ destination, at least
// once: every event in order, a repeat (after a lost confirm) allowed.
func TestRabbitMQDestination(t *testing.T) { testDestination(t, rabbitBroker(t)) }

// TestNATSDestination: a NATS JetStream destination holds each lane's
// events once each and in order, through posts out of order, a broker
// killed and restarted mid-run, and a dead letter while it was down that
// a replay delivers in its place.
func TestNATSDestination(t *testing.T) { testDestination(t, natsBroker(t)) }

func testDestination(t *testing.T, br broker) {
	t.Parallel()
	b := setup(t, options{})
	prefix := "hf" + b.prefix
	ep := b.createEndpointWith(br.endpoint(prefix))
	lanes := []string{b.id("c0"), b.id("c1"), b.id("c2")}
	eventID := func(lane string, seq int64) string { return fmt.Sprintf("%s-%d", lane, seq) }
	// post sends sequences from..to of every lane, shuffled: the lanes'
	// order is hookflow's to restore.
	post := func(from, to int64) {
		type ev struct {
			lane string
			seq  int64
		}
		var evs []ev
		for _, l := range lanes {
			for s := from; s <= to; s++ {
				evs = append(evs, ev{l, s})
			}
		}
		rand.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		for _, e := range evs {
			code, _ := b.postEvent(eventID(e.lane, e.seq), e.lane, e.seq, ep.ID, map[string]any{"n": e.seq})
			require.Equal(t, http.StatusAccepted, code)
		}
	}
	delivered := func(lane string, seq int64) bool {
		return b.eventState(eventID(lane, seq)).State == contract.StateDelivered
	}
	waitDelivered := func(to int64) {
		for _, l := range lanes {
			waitFor(t, time.Minute, eventID(l, to)+" delivered", func() bool { return delivered(l, to) })
		}
	}
	// check reads the broker back and holds it to the promise: every lane
	// once each and in order, sequences 1..want.
	check := func(want map[string]int64, last bool) {
		t.Helper()
		if br.drains && !last {
			return
		}
		r := readDestination(t, b, ep.ID)
		var out strings.Builder
		require.NoError(t, r.Print(&out, true))
		require.True(t, r.OK(), "the destination breaks its promise:\n%s", out.String())
		for _, l := range r.Lanes {
			require.EqualValues(t, want[l.Lane], l.Delivered, "lane %s:\n%s", l.Lane, out.String())
			if br.atLeastOnce {
				require.GreaterOrEqual(t, l.Stored, l.Delivered, "lane %s holds each delivered event:\n%s", l.Lane, out.String())
			} else {
				require.Equal(t, l.Delivered, l.Stored, "lane %s holds each delivered event once:\n%s", l.Lane, out.String())
			}
		}
	}
	upTo := func(n int64) map[string]int64 {
		m := map[string]int64{}
		for _, l := range lanes {
			m[l] = n
		}
		return m
	}

	// Three lanes of ten, posted out of order.
	post(1, 10)
	waitDelivered(10)
	check(upTo(10), false)

	// Killed mid-run and restarted: nothing lost, nothing repeated.
	post(11, 20)
	waitFor(t, time.Minute, "a first delivery of the second batch", func() bool { return delivered(lanes[0], 11) })
	require.NoError(t, br.kill())
	time.Sleep(2 * time.Second)
	require.NoError(t, br.restart(context.Background()))
	waitDelivered(20)
	check(upTo(20), false)

	// Down past the recovery window: a dead letter, its successor held;
	// the broker back and the dead letter replayed, both follow in order.
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"recovery_window": "3s"}, nil))
	require.NoError(t, br.kill())
	lane := lanes[1]
	code, _ := b.postEvent(eventID(lane, 21), lane, 21, ep.ID, map[string]any{"n": 21})
	require.Equal(t, http.StatusAccepted, code)
	b.waitState(eventID(lane, 21), contract.StateDeadLettered, time.Minute)
	code, _ = b.postEvent(eventID(lane, 22), lane, 22, ep.ID, map[string]any{"n": 22})
	require.Equal(t, http.StatusAccepted, code)
	require.NoError(t, br.restart(context.Background()))
	require.Equal(t, http.StatusOK, b.call(http.MethodPatch, "/v1/endpoints/"+ep.ID, map[string]any{"recovery_window": "5m"}, nil))
	require.Equal(t, http.StatusAccepted, b.call(http.MethodPost, "/v1/dead-letters/"+eventID(lane, 21)+"/replay", nil, nil))
	b.waitState(eventID(lane, 22), contract.StateDelivered, time.Minute)
	want := upTo(20)
	want[lane] = 22
	check(want, true)
}

// readDestination reads endpoint id's destination back and checks it
// against the ledger, as `hookflow conformance --destination` does.
func readDestination(t *testing.T, b *bundle, id string) destcheck.Report {
	t.Helper()
	r, err := app.CheckDestination(context.Background(), b.cfg, id)
	require.NoError(t, err)
	return r
}
