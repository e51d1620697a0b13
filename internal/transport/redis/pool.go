package redis

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Pool bounds: a worker sends to many endpoints, and a client holds
// sockets, so clients not used for a while are closed, and the least
// recently used go beyond maxClients.
const (
	maxClients = 256
	idleClose  = 5 * time.Minute
)

// errClosed is what a Send after Close gets.
var errClosed = errors.New("redis transport is closed")

// clients caches one go-redis client per (endpoint, settings,
// private-target grant). A change of config or credentials makes a new
// key, so the new settings never reuse a connection the old ones made,
// and the old client ages out.
type clients struct {
	max  int           // clients kept, at most
	idle time.Duration // unused this long, a client is closed

	mu     sync.Mutex
	byKey  map[string]*list.Element // of *client
	lru    *list.List               // front: most recently used
	closed bool
}

type client struct {
	key      string
	rdb      *goredis.Client
	dest     *dest
	lastUsed time.Time
	users    int  // Sends holding it
	evicted  bool // out of the cache: closed once users is 0
}

func newClients(max int, idle time.Duration) *clients {
	return &clients{max: max, idle: idle, byKey: map[string]*list.Element{}, lru: list.New()}
}

// clientKey hashes what a client is made of: a new config or new
// credentials are a new client.
func clientKey(endpointID string, config []byte, credentials map[string]string, privateTargets bool) string {
	h := sha256.New()
	for _, s := range []string{endpointID, strconv.FormatBool(privateTargets), string(config)} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	for _, k := range slices.Sorted(maps.Keys(credentials)) {
		v := credentials[k]
		h.Write([]byte(strconv.Itoa(len(k)) + ":" + k + strconv.Itoa(len(v)) + ":" + v))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// get returns the client for key, made by build when there is none, and
// the release the caller must call when done with it.
func (p *clients) get(key string, build func() (*client, error)) (*client, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, errClosed
	}
	now := time.Now()
	var c *client
	if e, ok := p.byKey[key]; ok {
		c = e.Value.(*client)
		p.lru.MoveToFront(e)
	} else {
		var err error
		if c, err = build(); err != nil {
			return nil, nil, err
		}
		c.key = key
		p.byKey[key] = p.lru.PushFront(c)
	}
	c.lastUsed = now
	c.users++
	p.sweep(now)
	return c, func() { p.release(c) }, nil
}

// sweep drops the clients idle too long and those beyond the bound,
// least recently used first; one in use is closed when its last user
// releases it.
func (p *clients) sweep(now time.Time) {
	for e := p.lru.Back(); e != nil; {
		c := e.Value.(*client)
		if p.lru.Len() <= p.max && now.Sub(c.lastUsed) < p.idle {
			return
		}
		prev := e.Prev()
		p.lru.Remove(e)
		delete(p.byKey, c.key)
		c.evicted = true
		if c.users == 0 {
			_ = c.rdb.Close()
		}
		e = prev
	}
}

func (p *clients) release(c *client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.users--
	if c.users == 0 && c.evicted {
		_ = c.rdb.Close()
	}
}

// close closes every client; Sends still running fail, and later ones get
// errClosed.
func (p *clients) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for e := p.lru.Front(); e != nil; e = e.Next() {
		c := e.Value.(*client)
		c.evicted = true
		errs = append(errs, c.rdb.Close())
	}
	p.lru.Init()
	clear(p.byKey)
	return errors.Join(errs...)
}
