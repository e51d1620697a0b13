package rabbitmq

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
)

const (
	// maxConns bounds the connections kept (one per destination key);
	// the least recently used goes first.
	maxConns = 256
	// idleClose closes a connection no attempt used for this long: an
	// endpoint gone quiet, or one whose config or credentials changed
	// (its new key dials anew and the old connection ages out).
	idleClose = 5 * time.Minute
	// maxIdleChannels bounds the confirm-mode channels a connection keeps
	// for the next attempts; more are closed after use.
	maxIdleChannels = 16
)

// poolKey names a connection: an endpoint's, for its settings as they
// are now, under its tenant's egress policy.
type poolKey struct {
	endpointID     string
	settings       string
	privateTargets bool
}

func keyOf(d transport.Destination) poolKey {
	h := sha256.New()
	h.Write(d.Config)
	names := make([]string, 0, len(d.Credentials))
	for k := range d.Credentials {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		// Lengths first, so that no two maps hash alike by shifting
		// bytes between a name and a value.
		h.Write([]byte{0, byte(len(k)), byte(len(k) >> 8), 0, byte(len(d.Credentials[k])), byte(len(d.Credentials[k]) >> 8)})
		h.Write([]byte(k))
		h.Write([]byte(d.Credentials[k]))
	}
	return poolKey{endpointID: d.EndpointID, settings: hex.EncodeToString(h.Sum(nil)), privateTargets: d.PrivateTargets}
}

// pool keeps one AMQP connection per key, each with its idle channels.
type pool struct {
	targets egress.Policy
	mu      sync.Mutex
	conns   map[poolKey]*conn
	closed  bool
}

// conn is one pooled connection.
type conn struct {
	key      poolKey
	amqp     *amqp.Connection
	lastUsed time.Time
	idle     []*channel
	// blocked holds the broker's reason while it blocks the connection's
	// publishers (a memory or disk alarm), "" otherwise.
	blocked atomic.Pointer[string]
}

// watchBlocked keeps c.blocked up to date until the connection closes
// (the client then closes blocks).
func (c *conn) watchBlocked(blocks <-chan amqp.Blocking) {
	for b := range blocks {
		reason := ""
		if b.Active {
			reason = cmp.Or(b.Reason, "no reason given")
		}
		c.blocked.Store(&reason)
	}
}

// blockedReason is why the broker blocks c's publishers, "" when it does
// not.
func (c *conn) blockedReason() string {
	if r := c.blocked.Load(); r != nil {
		return *r
	}
	return ""
}

// channel is a confirm-mode channel with its own notifications. An
// attempt takes one for itself, so a basic.return or a close that comes
// before its confirm is its own.
type channel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
}

func newPool(targets egress.Policy) *pool {
	return &pool{targets: targets, conns: map[poolKey]*conn{}}
}

// errPoolClosed is returned once the transport is closed (worker stop).
var errPoolClosed = errors.New("the rabbitmq transport is closed")

// take returns a channel on d's connection, dialling it when there is
// none (or it closed), and the connection it belongs to.
func (p *pool) take(ctx context.Context, d transport.Destination, t target) (*conn, *channel, error) {
	key := keyOf(d)
	c, err := p.conn(ctx, key, d, t)
	if err != nil {
		return nil, nil, err
	}
	if reason := c.blockedReason(); reason != "" {
		return nil, nil, &blockedError{reason: reason}
	}
	p.mu.Lock()
	var ch *channel
	for len(c.idle) > 0 && ch == nil {
		ch, c.idle = c.idle[len(c.idle)-1], c.idle[:len(c.idle)-1]
		if ch.ch.IsClosed() {
			ch = nil
		}
	}
	p.mu.Unlock()
	if ch != nil {
		return c, ch, nil
	}
	// Opening a channel is a call the client does not bound: a broker
	// that stops reading the connection holds it forever. It runs aside,
	// and an attempt whose time runs out first closes the connection.
	type open struct {
		ch  *channel
		err error
	}
	opened := make(chan open, 1)
	go func() {
		ch, err := openChannel(c.amqp)
		opened <- open{ch, err}
	}()
	select {
	case o := <-opened:
		if o.err != nil {
			// A connection that cannot open a channel is of no further
			// use.
			p.drop(c)
			return nil, nil, o.err
		}
		return c, o.ch, nil
	case <-ctx.Done():
		p.drop(c)
		return nil, nil, fmt.Errorf("open a channel: %w", ctx.Err())
	}
}

// blockedError says the broker blocks the connection's publishers.
type blockedError struct{ reason string }

func (e *blockedError) Error() string {
	return "the broker blocks publishers (a resource alarm): " + e.reason
}

// give returns ch to c's idle channels after a clean attempt.
func (p *pool) give(c *conn, ch *channel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || ch.ch.IsClosed() || len(c.idle) >= maxIdleChannels {
		discard(ch)
		return
	}
	c.idle = append(c.idle, ch)
}

func (p *pool) conn(ctx context.Context, key poolKey, d transport.Destination, t target) (*conn, error) {
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	var stale []*amqp.Connection
	for k, c := range p.conns {
		if now.Sub(c.lastUsed) > idleClose || c.amqp.IsClosed() {
			stale = append(stale, c.amqp)
			delete(p.conns, k)
		}
	}
	c := p.conns[key]
	if c != nil {
		c.lastUsed = now
	}
	p.mu.Unlock()
	go closeAll(stale)
	if c != nil {
		return c, nil
	}
	// Dialled outside the lock: a slow broker must not hold up another
	// endpoint's attempts. Two attempts that race here both dial, and
	// the one that loses closes its connection.
	a, err := dial(ctx, p.targets.ForTenant(d.PrivateTargets), t)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		go closeAll([]*amqp.Connection{a})
		return nil, errPoolClosed
	}
	if won := p.conns[key]; won != nil && !won.amqp.IsClosed() {
		won.lastUsed = now
		p.mu.Unlock()
		go closeAll([]*amqp.Connection{a})
		return won, nil
	}
	c = &conn{key: key, amqp: a, lastUsed: now}
	go c.watchBlocked(a.NotifyBlocked(make(chan amqp.Blocking, 1)))
	p.conns[key] = c
	if len(p.conns) > maxConns {
		var oldest poolKey
		first := true
		for k, o := range p.conns {
			if first || o.lastUsed.Before(p.conns[oldest].lastUsed) {
				oldest, first = k, false
			}
		}
		stale = append(stale[:0], p.conns[oldest].amqp)
		delete(p.conns, oldest)
	} else {
		stale = nil
	}
	p.mu.Unlock()
	go closeAll(stale)
	return c, nil
}

// drop forgets c (a connection that failed) and closes it.
func (p *pool) drop(c *conn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
	go closeAll([]*amqp.Connection{c.amqp})
}

// close closes every connection; the pool dials no more.
func (p *pool) close() error {
	p.mu.Lock()
	p.closed = true
	conns := make([]*amqp.Connection, 0, len(p.conns))
	for k, c := range p.conns {
		conns = append(conns, c.amqp)
		delete(p.conns, k)
	}
	p.mu.Unlock()
	closeAll(conns)
	return nil
}

// closeAll closes conns at once, each within transport.BrokerTimeout: a
// broker that no longer answers must not hold up a worker's stop.
func closeAll(conns []*amqp.Connection) {
	var wg sync.WaitGroup
	deadline := time.Now().Add(transport.BrokerTimeout)
	for _, c := range conns {
		// A connection already lost answers an error: nothing to do.
		wg.Go(func() { _ = c.CloseDeadline(deadline) })
	}
	wg.Wait()
}

// discard closes a channel no attempt may use again (its confirm is
// late, or it failed) in the background: closing waits for the broker's
// answer, which a broker that stopped answering never gives, and the
// attempt's time is up. The connection's heartbeat ends that wait.
func discard(ch *channel) {
	go func() { _ = ch.ch.Close() }()
}

// dial connects to t's broker through the egress policy's dialer (so the
// address actually dialled is checked: DNS rebinding is refused), with
// t's credentials by SASL, within ctx and transport.BrokerTimeout.
func dial(ctx context.Context, policy egress.Policy, t target) (*amqp.Connection, error) {
	ctx, cancel := context.WithTimeout(ctx, transport.BrokerTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	cfg := amqp.Config{
		SASL:  []amqp.Authentication{&amqp.PlainAuth{Username: t.username, Password: t.password}},
		Vhost: t.vhost,
		// The client's own handshake: the deadline set here bounds TLS
		// and the AMQP handshake too, and the client clears it once the
		// connection is open.
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := policy.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			if err := c.SetDeadline(deadline); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
		Properties: amqp.Table{"connection_name": "hookflow"},
	}
	if t.tls() {
		// The client names the server by the URL's host.
		cfg.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return amqp.DialConfig(t.uri(), cfg)
}

// openChannel opens a confirm-mode channel watching its own returns and
// close.
func openChannel(c *amqp.Connection) (*channel, error) {
	ch, err := c.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		go func() { _ = ch.Close() }()
		return nil, err
	}
	// Buffered: the client hands a return and a close over before the
	// confirm that follows them is resolved, and never waits on a reader.
	return &channel{
		ch:      ch,
		returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}
