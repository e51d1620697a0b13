package chaos

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
)

// Event is one event of the workload. ID and CorrelationID are keys of the
// run (Key): the tenant's own IDs prefixed with the tenant, because the
// tenants reuse each other's event and correlation IDs on purpose; the API,
// the receivers and Temporal see the tenant's own (Split).
type Event struct {
	Tenant        string
	ID            string
	CorrelationID string
	Sequence      int64
	// Type routes it: every endpoint subscribed to it gets a delivery.
	Type   string
	Amount int64
}

// Subscriber is one endpoint of a run: a name for the summary and the
// event type patterns it is created with (as POST /v1/endpoints takes
// them: an exact type, "prefix.*", or "*"), the tenant it belongs to ("":
// the default tenant), and the receiver it points at (ForTenants): each
// tenant has an endpoint of each kind, and the tenants' endpoints of one
// kind share its receiver, which keeps their lanes apart by the envelope's
// endpoint_id. Filter, when set, is the endpoint's filter: it takes only
// the events of its types that the filter takes (with one tenant's
// amounts: ForTenants moves MinAmount into each tenant's range).
type Subscriber struct {
	Name       string
	EventTypes []string
	Tenant     string
	Receiver   int
	Filter     *EventFilter
}

// tenant is s's tenant.
func (s Subscriber) tenant() string { return cmp.Or(s.Tenant, contract.DefaultTenant) }

// ForTenants gives each tenant an endpoint of each of subs, tenant by
// tenant in order (so the first tenant's keep subs' indexes), each
// pointing at the receiver of its kind. With one tenant the names stay
// as they are; with more each says its tenant ("A@tenant-2").
func ForTenants(subs []Subscriber, tenants []string) []Subscriber {
	var out []Subscriber
	for ti, t := range tenants {
		for i, s := range subs {
			s.Tenant, s.Receiver = t, i
			if len(tenants) > 1 {
				s.Name += "@" + t
			}
			if s.Filter != nil {
				f := *s.Filter
				if f.MinAmount > 0 {
					f.MinAmount += int64(ti) * tenantAmounts
				}
				s.Filter = &f
			}
			out = append(out, s)
		}
	}
	return out
}

// ChaosTenants names n tenants of a run (at least one).
func ChaosTenants(n int) []string {
	out := make([]string, max(n, 1))
	for i := range out {
		out[i] = fmt.Sprintf("tenant-%d", i+1)
	}
	return out
}

// Key names a tenant's event or correlation inside the run: the form of
// its workflow ID (contract.EventWorkflowID) for the short IDs a run
// uses, written out so that Split stays its inverse whatever the length
// (a workflow ID too long for Temporal is abbreviated).
func Key(tenant, id string) string { return tenant + "/" + id }

// Split is Key's inverse: the tenant and the tenant's own ID. Neither
// tenant IDs nor event IDs hold a "/".
func Split(key string) (tenant, id string) {
	tenant, id, _ = strings.Cut(key, "/")
	return tenant, id
}

// tenantAmounts spaces the tenants' amounts apart: tenant i's are
// i*tenantAmounts+1 … i*tenantAmounts+1000, so an entry in one tenant's
// receiver ledger with another's amount tells a crossed delivery from a
// wrong one (checkReceiver).
const tenantAmounts = 10000

// Wants reports whether s subscribes to typ. It is the checks' own reading
// of the patterns, written apart from hookflow's routing so that the checks
// hold hookflow's routing to it.
func (s Subscriber) Wants(typ string) bool {
	if s.EventTypes == nil {
		return true
	}
	for _, p := range s.EventTypes {
		prefix, wild := strings.CutSuffix(p, "*")
		switch {
		case p == "*", p == typ:
			return true
		case wild && strings.HasSuffix(prefix, ".") && strings.HasPrefix(typ, prefix) && len(typ) > len(prefix):
			return true
		}
	}
	return false
}

// ChaosSubscribers are the chaos run's endpoints: A takes every type, B
// every order, C paid orders and invoices, so that each sees its own subset
// of every correlation (C is the one that goes down for a while, B the one
// that flaps).
func ChaosSubscribers() []Subscriber {
	return []Subscriber{
		{Name: "A", EventTypes: []string{"*"}},
		{Name: "B", EventTypes: []string{"order.*"}},
		{Name: "C", EventTypes: []string{"order.paid", "invoice.*"}},
	}
}

// SituationSubscribers are the endpoints the chaos run adds to
// ChaosSubscribers for its situations (Situations): S, slow, takes customer
// updates, and D, deleted mid-run, shipped orders; each a narrow subset, so
// that S's small max_in_flight does not hold the run long. S has a filter
// too, on the amount in the event's data, which leaves out the 30 % of its
// events below 301: its lanes skip them, and each event it takes names the
// one it took before as previous_sequence (checkFiltered).
func SituationSubscribers() []Subscriber {
	return []Subscriber{
		{Name: "S", EventTypes: []string{"customer.updated"}, Filter: &EventFilter{MinAmount: 301}},
		{Name: "D", EventTypes: []string{"order.shipped"}},
	}
}

// chaosTypes are the workload's event types and their weights: A gets
// every event, B 60 % (created, paid, shipped), C 40 % (paid, issued).
func chaosTypes() []weightedType {
	return []weightedType{{"order.created", 25}, {"order.paid", 20}, {"order.shipped", 15}, {"invoice.issued", 20}, {"customer.updated", 20}}
}

type weightedType struct {
	typ    string
	weight int
}

// Workload is the seeded set of events, the endpoints they are routed to,
// and the order they are posted in.
type Workload struct {
	Events []Event
	// Subscribers are the run's endpoints, by index.
	Subscribers []Subscriber
	// Posts lists indexes into Events in posting order; an index appears
	// twice for an event posted twice.
	Posts []int
	// Correlations in creation order (keys: Key).
	Correlations []string
	// Tenants are the tenants the correlations are spread over, in order.
	Tenants    []string
	Duplicates int
	// Voided maps the correlations whose producer lost one sequence to that
	// sequence: its event is in Events (so that Lane and EventID know it)
	// but never in Posts, and the run's operator voids it. Nil when
	// WorkloadConfig.Voids is 0.
	Voided map[string]int64
}

// create is ev's POST /v1/events body, with the tenant's own IDs (the
// tenant comes from the key it is posted with). No endpoint_id: hookflow
// routes it to every endpoint of the tenant subscribed to its type.
func (ev Event) create() hfclient.EventCreate {
	_, id := Split(ev.ID)
	_, corr := Split(ev.CorrelationID)
	return hfclient.EventCreate{ID: id, CorrelationID: corr, Sequence: ev.Sequence,
		Type: ev.Type, Data: map[string]any{"amount": ev.Amount}}
}

// IsVoided reports whether ev is an event the producer lost, which the
// run voids instead of posting.
func (w *Workload) IsVoided(ev Event) bool {
	seq, ok := w.Voided[ev.CorrelationID]
	return ok && seq == ev.Sequence
}

// WorkloadConfig shapes a workload.
type WorkloadConfig struct {
	Seed          uint64
	Events        int
	Correlations  int
	DuplicateRate float64
	// Reorder is how many places an event may arrive ahead of its
	// predecessors (about); 0 posts every correlation in order.
	Reorder int
	// Voids is how many correlations lose one sequence (Workload.Voided):
	// one between the first and the last, so that it has predecessors and
	// successors in most lanes.
	Voids int
	// Tenants the correlations are dealt out to, in turn; each tenant
	// numbers its own from corr-0000, so the tenants share correlation and
	// event IDs. None: the default tenant alone.
	Tenants []string
}

// NewWorkload spreads cfg.Events over cfg.Correlations (as evenly as the
// numbers allow, each correlation numbered 1..k), gives each event a type
// (seeded, by chaosTypes' weights), shuffles the posting order (see
// Reorder) and adds the duplicate posts at random places. Its endpoints are
// ChaosSubscribers, one of each per tenant (ForTenants).
func NewWorkload(cfg WorkloadConfig) (*Workload, error) {
	switch {
	case cfg.Correlations < 1 || cfg.Events < cfg.Correlations:
		return nil, fmt.Errorf("workload: need at least one correlation and one event per correlation (events=%d correlations=%d)", cfg.Events, cfg.Correlations)
	case cfg.DuplicateRate < 0 || cfg.DuplicateRate > 1:
		return nil, fmt.Errorf("workload: duplicate rate must be between 0 and 1")
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x776b6c64))
	w := &Workload{Tenants: cfg.Tenants}
	if len(w.Tenants) == 0 {
		w.Tenants = []string{contract.DefaultTenant}
	}
	w.Subscribers = ForTenants(ChaosSubscribers(), w.Tenants)
	nt := len(w.Tenants)
	for c := 0; c < cfg.Correlations; c++ {
		w.Correlations = append(w.Correlations, Key(w.Tenants[c%nt], fmt.Sprintf("corr-%04d", c/nt)))
	}
	types := chaosTypes()
	total := 0
	for _, t := range types {
		total += t.weight
	}
	pickType := func() string {
		r := rng.IntN(total)
		for _, t := range types {
			if r < t.weight {
				return t.typ
			}
			r -= t.weight
		}
		return types[0].typ
	}
	for c, corr := range w.Correlations {
		n := cfg.Events / cfg.Correlations
		if c < cfg.Events%cfg.Correlations {
			n++
		}
		tenant, own := Split(corr)
		for s := 1; s <= n; s++ {
			w.Events = append(w.Events, Event{
				Tenant: tenant, ID: Key(tenant, fmt.Sprintf("ev-%s-%d", own, s)),
				CorrelationID: corr, Sequence: int64(s), Type: pickType(),
				Amount: 1 + rng.Int64N(1000) + int64(c%nt)*tenantAmounts,
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
	w.Duplicates = int(float64(len(w.Events))*cfg.DuplicateRate + 0.5)
	for _, ev := range rng.Perm(len(w.Events))[:w.Duplicates] {
		// A duplicate goes in after a random place; which copy counts as
		// "the duplicate" is up to the race between posters.
		at := rng.IntN(len(w.Posts) + 1)
		w.Posts = append(w.Posts[:at], append([]int{ev}, w.Posts[at:]...)...)
	}
	w.loseSequences(cfg)
	return w, nil
}

// loseSequences picks the sequences the producer loses and takes them out
// of Posts. It draws from a stream of its own, so that a workload without
// voids is the one it was before voids existed.
func (w *Workload) loseSequences(cfg WorkloadConfig) {
	if cfg.Voids <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x766f6964))
	perCorr := w.PerCorrelation()
	lost := map[int]bool{}
	w.Voided = map[string]int64{}
	for _, c := range rng.Perm(len(w.Correlations)) {
		if len(w.Voided) == cfg.Voids {
			break
		}
		corr := w.Correlations[c]
		n := perCorr[corr]
		if n < 3 {
			continue // no sequence between the first and the last
		}
		seq := 2 + rng.Int64N(n-2)
		w.Voided[corr] = seq
		lost[slices.IndexFunc(w.Events, func(ev Event) bool { return ev.CorrelationID == corr && ev.Sequence == seq })] = true
	}
	w.Posts = slices.DeleteFunc(w.Posts, func(k int) bool { return lost[k] })
	// A lost event may have been one of the duplicates.
	w.Duplicates = len(w.Posts) - (len(w.Events) - len(lost))
}

// Routes reports whether ev is meant for endpoint ep: an endpoint of its
// tenant that subscribes to its type and whose filter, if any, takes it.
func (w *Workload) Routes(ev Event, ep int) bool {
	return w.Subscribes(ev, ep) && w.Subscribers[ep].Filter.Takes(ev.Amount, "")
}

// Subscribes reports whether endpoint ep is of ev's tenant and subscribes
// to its type, whatever its filter says.
func (w *Workload) Subscribes(ev Event, ep int) bool {
	s := w.Subscribers[ep]
	return s.tenant() == cmp.Or(ev.Tenant, contract.DefaultTenant) && s.Wants(ev.Type)
}

// Lane returns the events of correlation meant for endpoint ep, in
// sequence order: what that endpoint's receiver must apply.
func (w *Workload) Lane(correlation string, ep int) []Event {
	var out []Event
	for _, ev := range w.Events {
		if ev.CorrelationID == correlation && w.Routes(ev, ep) {
			out = append(out, ev)
		}
	}
	return out
}

// Deliveries counts the (event, endpoint) deliveries the workload routes.
func (w *Workload) Deliveries() int {
	n := 0
	for _, ev := range w.Events {
		for ep := range w.Subscribers {
			if w.Routes(ev, ep) {
				n++
			}
		}
	}
	return n
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

// producer posts the workload to hookflow's API as a producer would, each
// post retried until the API answers, and keeps what the API answered: the
// events it accepted (the ones hookflow then owes the receiver) and the
// posts it refused for good.
type producer struct {
	api     func(tenant string) *hfclient.Client // the tenant's own key
	wl      *Workload
	posters int // goroutines posting at once
	logger  *slog.Logger

	posted      atomic.Int64 // posts done with, answered or given up
	tries       atomic.Int64
	unanswered  atomic.Int64 // no answer within the producer's 10 s timeout, or a connection error
	answered5xx atomic.Int64

	mu       sync.Mutex
	accepted map[string]bool // event ids answered 2xx
	rejected []string        // the posts answered 4xx, with the answer
	// firstTry is when each event's first post (of either copy) began:
	// one that began after the deleted endpoint's delete was answered is
	// accepted after it, so routed past that endpoint.
	firstTry map[string]time.Time
}

func newProducer(api func(tenant string) *hfclient.Client, wl *Workload, posters int, logger *slog.Logger) *producer {
	return &producer{api: api, wl: wl, posters: posters, logger: logger, accepted: map[string]bool{}, firstTry: map[string]time.Time{}}
}

// postAll posts the workload in its shuffled order, paced over spread, from
// several goroutines, each post retried (as a producer would) until the API
// answers or the deadline passes.
func (p *producer) postAll(ctx context.Context, spread time.Duration, deadline time.Time) {
	posts := p.wl.Posts
	interval := spread / time.Duration(len(posts))
	items := make(chan int)
	var wg sync.WaitGroup
	for i := 0; i < p.posters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range items {
				p.post(ctx, p.wl.Events[posts[k]], deadline)
				p.posted.Add(1)
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

func (p *producer) post(ctx context.Context, ev Event, deadline time.Time) {
	body := ev.create()
	backoff := 200 * time.Millisecond
	p.mu.Lock()
	if _, ok := p.firstTry[ev.ID]; !ok {
		p.firstTry[ev.ID] = time.Now()
	}
	p.mu.Unlock()
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, answer := p.api(ev.Tenant).Send(pctx, body)
		cancel()
		code, err := answered(answer, http.StatusAccepted)
		p.tries.Add(1)
		if err != nil {
			p.unanswered.Add(1)
			p.logger.Warn("post unanswered", "event_id", ev.ID, "error", err)
		} else if code >= 500 {
			p.answered5xx.Add(1)
		}
		switch {
		case err == nil && (code == http.StatusOK || code == http.StatusAccepted):
			p.mu.Lock()
			p.accepted[ev.ID] = true
			p.mu.Unlock()
			return
		case err == nil && code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
			p.mu.Lock()
			p.rejected = append(p.rejected, fmt.Sprintf("%s: %v", ev.ID, answer))
			p.mu.Unlock()
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			p.logger.Error("post gave up", "event_id", ev.ID, "code", code, "error", err)
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

func (p *producer) acceptedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.accepted)
}

// acceptedSoFar returns a copy of the event ids answered 2xx so far.
func (p *producer) acceptedSoFar() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.accepted)
}

// firstTriedAfter returns the events whose first post began after t.
func (p *producer) firstTriedAfter(t time.Time) map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for id, at := range p.firstTry {
		if at.After(t) {
			out[id] = true
		}
	}
	return out
}

// results returns copies of the accepted event ids and the rejected posts.
func (p *producer) results() (accepted map[string]bool, rejected []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.accepted), slices.Clone(p.rejected)
}
