package accept

import (
	"fmt"
	"sync"

	"github.com/hookflow/hookflow/internal/filter"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/kit/intake"
)

// filterCacheSize bounds the compiled filters an Acceptor keeps. A filter
// is compiled once, the first time an event meets it, and then serves
// every event of its endpoint; past the bound the cache starts over, which
// costs one compile per filter and never a wrong answer (a filter is keyed
// by its own JSON, so a changed filter is another entry).
const filterCacheSize = 4096

// filters applies endpoints' filters at acceptance, compiling each once.
type filters struct {
	max      int
	mu       sync.Mutex
	compiled map[string]*filter.Filter
}

func newFilters(max int) *filters {
	return &filters{max: max, compiled: make(map[string]*filter.Filter)}
}

// route splits the subscribers of ev into the endpoints that take it and
// those whose filter leaves it out, each in the subscribers' order (id
// order). The event is decoded once for all of them, and only when one has
// a filter. A stored filter that no longer compiles is an error, not a
// guess either way: the event is not accepted until the endpoint's filter
// is set again.
func (fs *filters) route(ev intake.Event, subscribers []store.Subscriber) (endpoints, filteredOut []string, err error) {
	var (
		doc     filter.Doc
		decoded bool
	)
	endpoints = make([]string, 0, len(subscribers))
	for _, sub := range subscribers {
		if len(sub.Filter) == 0 {
			endpoints = append(endpoints, sub.ID)
			continue
		}
		f, err := fs.get(sub.Filter)
		if err != nil {
			return nil, nil, fmt.Errorf("route %s: endpoint %s's filter: %w", ev.ID, sub.ID, err)
		}
		if !decoded {
			if doc, err = filter.NewDoc(ev.Data, ev.Metadata); err != nil {
				return nil, nil, fmt.Errorf("route %s: %w", ev.ID, err)
			}
			decoded = true
		}
		if f.Match(doc) {
			endpoints = append(endpoints, sub.ID)
		} else {
			filteredOut = append(filteredOut, sub.ID)
		}
	}
	return endpoints, filteredOut, nil
}

// get returns raw compiled, from the cache when it is there.
func (fs *filters) get(raw []byte) (*filter.Filter, error) {
	fs.mu.Lock()
	f, ok := fs.compiled[string(raw)]
	fs.mu.Unlock()
	if ok {
		return f, nil
	}
	f, err := filter.Compile(raw)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	if len(fs.compiled) >= fs.max {
		clear(fs.compiled)
	}
	fs.compiled[string(raw)] = f
	fs.mu.Unlock()
	return f, nil
}

// cached is how many compiled filters fs holds.
func (fs *filters) cached() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.compiled)
}
