package nats

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookflow/hookflow/internal/egress"
	"github.com/hookflow/hookflow/internal/transport"
)

const (
	// maxConns bounds the connections kept open: one per endpoint that
	// sent lately, the least recently used closed first.
	maxConns = 256
	// idleAfter closes a connection nothing sent through for that long,
	// so that the one of an endpoint whose settings changed (a new key)
	// goes away.
	idleAfter = 5 * time.Minute
)

// errPoolClosed answers an attempt whose connection the pool closed under
// it (the worker stops, or too many endpoints sent at once).
var errPoolClosed = errors.New("the connection was closed by hookflow's pool")

// key names a connection: the endpoint, the settings it was made with
// (a change of config or credentials makes a new one) and the egress
// rules it dials under.
type key struct {
	endpoint       string
	settings       [sha256.Size]byte
	privateTargets bool
}

func keyOf(d transport.Destination) key {
	h := sha256.New()
	h.Write(d.Config)
	// Length-prefixed, so that no two credential sets write the same bytes.
	for _, k := range slices.Sorted(maps.Keys(d.Credentials)) {
		fmt.Fprintf(h, "\x00%d:%s%d:%s", len(k), k, len(d.Credentials[k]), d.Credentials[k])
	}
	k := key{endpoint: d.EndpointID, privateTargets: d.PrivateTargets}
	h.Sum(k.settings[:0])
	return k
}

// pool holds a connection per key.
type pool struct {
	mu     sync.Mutex
	conns  map[key]*conn
	swept  time.Time
	closed bool
}

func newPool() *pool { return &pool{conns: map[key]*conn{}} }

// get returns k's connection holder, and closes those idle too long or
// past maxConns.
func (p *pool) get(k key) (*conn, error) {
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	c := p.conns[k]
	if c == nil {
		c = &conn{sem: make(chan struct{}, 1)}
		p.conns[k] = c
	}
	c.used = now
	var gone []*conn
	if now.Sub(p.swept) > time.Minute || len(p.conns) > maxConns {
		p.swept = now
		gone = p.evict(now)
	}
	p.mu.Unlock()
	for _, g := range gone {
		g.close()
	}
	return c, nil
}

// evict takes the idle connections out, and the least recently used ones
// past maxConns. p.mu is held.
func (p *pool) evict(now time.Time) []*conn {
	var gone []*conn
	for k, c := range p.conns {
		if now.Sub(c.used) > idleAfter {
			gone = append(gone, c)
			delete(p.conns, k)
		}
	}
	for len(p.conns) > maxConns {
		var oldest key
		var at time.Time
		for k, c := range p.conns {
			if at.IsZero() || c.used.Before(at) {
				oldest, at = k, c.used
			}
		}
		gone = append(gone, p.conns[oldest])
		delete(p.conns, oldest)
	}
	return gone
}

// close closes every connection; the pool answers errPoolClosed after.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	gone := slices.Collect(maps.Values(p.conns))
	clear(p.conns)
	p.mu.Unlock()
	for _, c := range gone {
		c.close()
	}
}

// conn is one endpoint's connection and its stream's handle, made on
// first use and again after the server closed it: a connection never
// reconnects by itself (dial), so it is dialled within an attempt's
// deadline or not at all.
type conn struct {
	// sem is held while the connection is made or looked at, so that
	// concurrent attempts dial once, and one waiting gives up with its
	// context.
	sem    chan struct{}
	used   time.Time // under pool.mu
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	closed bool
}

// open returns the connection's JetStream context and the stream that
// captures the destination's lanes, dialling and looking the stream up
// first where needed.
func (c *conn) open(ctx context.Context, targets egress.Policy, s settings) (jetstream.JetStream, jetstream.Stream, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	defer func() { <-c.sem }()
	if c.closed {
		return nil, nil, errPoolClosed
	}
	if c.nc == nil || c.nc.IsClosed() {
		nc, err := dial(ctx, targets, s)
		if err != nil {
			return nil, nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, fmt.Errorf("jetstream: %w", err)
		}
		c.nc, c.js, c.stream = nc, js, nil
	}
	if c.stream == nil {
		st, err := lookUpStream(ctx, c.js, s)
		if err != nil {
			err = refusedPermission(c.nc, err, `"$JS.API.STREAM.`)
			if classify(err).drop == dropConnection {
				c.nc.Close()
				c.nc, c.js = nil, nil
			}
			return nil, nil, err
		}
		c.stream = st
	}
	return c.js, c.stream, nil
}

// forget drops what open gave (js), after an answer that says it no
// longer holds: the connection (its server did not answer in time, so it
// may be half dead) or only the stream (deleted, or changed). What another
// attempt has made since is kept.
// It waits for a dial under way (bounded by its timeout) even when the
// attempt's context has ended, as it has after a timeout.
func (c *conn) forget(js jetstream.JetStream, connection bool) {
	c.sem <- struct{}{}
	defer func() { <-c.sem }()
	if c.js != js {
		return
	}
	if connection {
		c.nc.Close()
		c.nc, c.js = nil, nil
	}
	c.stream = nil
}

func (c *conn) close() {
	c.sem <- struct{}{}
	defer func() { <-c.sem }()
	c.closed = true
	if c.nc != nil {
		c.nc.Close()
	}
}

// lookUpStream finds the stream the destination names, or the one that
// captures its lanes.
func lookUpStream(ctx context.Context, js jetstream.JetStream, s settings) (jetstream.Stream, error) {
	name := s.stream
	if name == "" {
		var err error
		if name, err = js.StreamNameBySubject(ctx, s.prefix+".>"); err != nil {
			return nil, fmt.Errorf("find the stream of %s.>: %w", s.prefix, err)
		}
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", name, err)
	}
	return st, nil
}

// dial connects to s's server through the egress rules. The client never
// reconnects and buffers nothing while disconnected, so that no publish
// leaves after its attempt has answered; the pool dials again instead.
func dial(ctx context.Context, targets egress.Policy, s settings) (*nats.Conn, error) {
	timeout := transport.BrokerTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	opts := []nats.Option{
		nats.Name("hookflow"),
		nats.SetCustomDialer(dialer{targets: targets, timeout: timeout}),
		// The dialer gets the host as configured, so that the egress
		// allowlist (by host:port) and the rebinding check (on the address
		// dialled) both apply.
		nats.SkipHostLookup(),
		nats.IgnoreDiscoveredServers(),
		nats.NoReconnect(),
		nats.ReconnectBufSize(-1),
		nats.Timeout(timeout),
	}
	if s.tls() {
		opts = append(opts, nats.Secure(&tls.Config{ServerName: s.host, RootCAs: s.roots, MinVersion: tls.VersionTLS12}))
	}
	switch {
	case s.token != "":
		opts = append(opts, nats.Token(s.token))
	case s.user != "":
		opts = append(opts, nats.UserInfo(s.user, s.password))
	}
	nc, err := nats.Connect(s.server(), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", s.server(), err)
	}
	return nc, nil
}

// dialer is egress's dialer in the shape nats.go takes, which passes no
// context: the attempt's remaining time bounds it instead.
type dialer struct {
	targets egress.Policy
	timeout time.Duration
}

func (d dialer) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	return d.targets.DialContext(ctx, network, address)
}
