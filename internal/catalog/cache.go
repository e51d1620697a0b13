package catalog

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/hookflow/hookflow/kit/intake"
)

// Cache keeps compiled schemas, keyed by the schema's bytes (their
// SHA-256), so that acceptance compiles a type's schema once per process,
// not once per event. Keyed by content, an entry is never stale: a new
// version of a type is other bytes, hence another entry, and the old one
// ages out. It holds at most its size, evicting the least recently used.
type Cache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cached, most recently used first
	byKey map[[sha256.Size]byte]*list.Element
	// compiling joins the callers missing the same schema at once into
	// one compile: a type's first burst of events must not compile its
	// schema once per event.
	compiling singleflight.Group
}

type cached struct {
	key    [sha256.Size]byte
	schema *Schema
}

// NewCache returns a cache of at most size schemas (CacheSize when size
// is 0 or less).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = CacheSize
	}
	return &Cache{max: size, order: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

// Len is how many schemas the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Schema returns raw compiled, from the cache or compiled now
// (CompileStored, field naming it in a refusal): raw is a stored schema,
// judged by Compile's caps when it was sent. Callers missing at once wait
// for one compile.
func (c *Cache) Schema(field string, raw json.RawMessage) (*Schema, *intake.FieldError) {
	k := sha256.Sum256(raw)
	c.mu.Lock()
	if el, ok := c.byKey[k]; ok {
		c.order.MoveToFront(el)
		s := el.Value.(*cached).schema
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	// Compiled outside the lock: a large schema must not hold up every
	// other type's acceptance.
	v, _, _ := c.compiling.Do(string(k[:]), func() (any, error) {
		// A caller that missed just as another's compile was stored
		// finds it here.
		c.mu.Lock()
		if el, ok := c.byKey[k]; ok {
			c.mu.Unlock()
			return el.Value.(*cached).schema, nil
		}
		c.mu.Unlock()
		s, fe := CompileStored(field, raw)
		if fe != nil {
			return fe, nil
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.byKey[k] = c.order.PushFront(&cached{key: k, schema: s})
		for c.order.Len() > c.max {
			last := c.order.Back()
			c.order.Remove(last)
			delete(c.byKey, last.Value.(*cached).key)
		}
		return s, nil
	})
	if fe, ok := v.(*intake.FieldError); ok {
		return nil, fe
	}
	return v.(*Schema), nil
}
