package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
)

// The operator model: a seeded generator of operator action sequences
// (this file), carried out one after another on one stack, each on fresh
// correlations (modelrun.go), each brought to quiescence and held against
// the model (modelcheck.go).
//
// A Scenario is a pure function of its seed: the same seed gives the same
// correlations, the same receiver modes and the same actions, whatever the
// stack does; only the timing differs from run to run. The generator
// steers by an abstract model of where each event stands (held, in
// flight, dead-lettered, delivered, skipped) so that most actions land
// where they matter: on a dead-lettered head, on its successor just
// released after a skip, on a head still delivering, on a skipped event
// once the receiver heals.

// StepKind names an action of a scenario.
type StepKind string

// The actions.
const (
	// StepMode sets how the receiver answers a correlation (heals it,
	// rejects with 400, is unavailable with 503, loses acks).
	StepMode StepKind = "mode"
	// StepPost posts a correlation's events, in Step.Order.
	StepPost StepKind = "post"
	// StepAwait waits, bounded, until an event is in Step.State in
	// hookflow's ledger; the scenario goes on either way.
	StepAwait StepKind = "await"
	// StepPress presses one button: replay or skip, from the API or as a
	// raw Web UI signal.
	StepPress StepKind = "press"
	// StepDouble presses two buttons at once (a double click; an API call
	// racing a raw signal).
	StepDouble StepKind = "double"
	// StepTerminate presses Terminate on an event's workflow (Seq > 0) or
	// on the correlation's sequencer (Seq == 0).
	StepTerminate StepKind = "terminate"
	// StepCancel presses Request Cancellation on an event's workflow
	// (Seq > 0) or on the correlation's sequencer (Seq == 0).
	StepCancel StepKind = "cancel"
	// StepReset presses Reset on an event's workflow or the sequencer,
	// back to one of its completed workflow tasks (Step.Task).
	StepReset StepKind = "reset"
	// StepPause waits Step.For.
	StepPause StepKind = "pause"
	// StepDisable pauses endpoint Step.Endpoint (PATCH disabled: true),
	// StepEnable enables it again; StepDelete deletes it for good. The
	// endpoints are the scenario's own, so nothing else runs through them.
	StepDisable StepKind = "disable"
	StepEnable  StepKind = "enable"
	StepDelete  StepKind = "delete"
	// StepVoid voids Step.Order of correlation Step.Corr (POST
	// /v1/correlations/{id}/skip): a sequence the producer lost, or, with
	// Step.Arrived, a list that holds one that has arrived, which must be
	// refused (422) with nothing voided.
	StepVoid StepKind = "void"
	// StepCreate creates endpoint Step.Endpoint, subscribed to its types,
	// in the middle of the correlations: the events posted before it are
	// not routed to it, the ones posted after are, while earlier ones are
	// held behind a dead letter or a lost sequence.
	StepCreate StepKind = "create"
	// StepVoidRace voids Step.Order of correlation Step.Corr (sequences the
	// producer lost) while the producer posts Step.Posts after all (one of
	// them, and the sequences after it), all at once: the void answers 200
	// and the post of a voided sequence 409, or the post is accepted and
	// the void refused 422, never both accepted.
	StepVoidRace StepKind = "void_race"
	// StepOutage stops the Temporal server for Step.For while the producer
	// posts Step.Order of correlation Step.Corr, out of order and all at
	// once: the API accepts them queued and its sweep starts them once the
	// server is back, which the step waits for.
	StepOutage StepKind = "outage"
	// StepThrottle sets endpoint Step.Endpoint's max_in_flight to Step.Cap
	// (0: back to the default), so that its lanes wait their turn.
	StepThrottle StepKind = "throttle"
	// StepKillWorkers SIGKILLs every worker (each is started again at
	// once): an attempt in flight never gives its place under
	// max_in_flight back, which stays taken until its lease runs out, past
	// the attempt's timeout.
	StepKillWorkers StepKind = "kill_workers"
	// StepFilter sets endpoint Step.Endpoint's filter to Step.Filter
	// (PATCH): the events posted after it are routed by the new filter,
	// those posted before it keep the routing they were accepted with.
	StepFilter StepKind = "filter"
)

// The states StepAwait waits for.
const (
	awaitDeadLettered = "dead_lettered" // dead-lettered, with its dead letter open
	awaitDelivering   = "delivering"
	awaitFinal        = "final" // delivered or skipped
)

// SignalInput is what a raw Web UI signal carries.
type SignalInput int

// The inputs of a raw signal.
const (
	// InputNone: no payload at all (the Web UI's empty input).
	InputNone SignalInput = iota
	// InputEmpty: {}.
	InputEmpty
	// InputGeneration: {"generation": g}, g the dead letter's current
	// generation (read when the signal is sent).
	InputGeneration
	// InputStale: {"generation": g-1}, a signal meant for an earlier dead
	// letter.
	InputStale
)

func (in SignalInput) String() string {
	switch in {
	case InputNone:
		return "no input"
	case InputEmpty:
		return "{}"
	case InputGeneration:
		return `{"generation": current}`
	case InputStale:
		return `{"generation": current-1}`
	}
	return fmt.Sprintf("input %d", int(in))
}

// Press is one operator's button.
type Press struct {
	// Button is "replay" or "skip".
	Button string
	// UI: a raw signal to the event's workflow, as sent by hand from the
	// Temporal Web UI, with Input; else the API's POST
	// /v1/dead-letters/{id}/replay (or skip).
	UI    bool
	Input SignalInput
	// Named: the press names the delivery's endpoint (the API's
	// endpoint_id, the signal's {"endpoint_id": …}). Unnamed, it is for the
	// event's one open dead letter: with two open the API answers 422
	// naming them, and the workflow ignores the signal.
	Named bool
}

func (p Press) String() string {
	name := ", endpoint named"
	if !p.Named {
		name = ", no endpoint_id"
	}
	if p.UI {
		return fmt.Sprintf("%s signal %s%s (Web UI)", p.Button, p.Input, name)
	}
	return p.Button + name + " (API)"
}

// Step is one action of a scenario.
type Step struct {
	Kind StepKind
	// Corr is the index of the correlation in the scenario; Seq the event
	// (for Terminate and Reset, 0 is the correlation's sequencer);
	// Endpoint the index of the endpoint whose lane a mode, an await or a
	// press is for (ModelSubscribers).
	Corr     int
	Seq      int64
	Endpoint int
	// Mode is the receiver's mode (StepMode).
	Mode ReceiverMode
	// State is the state awaited (StepAwait).
	State string
	// Press is the button (StepPress), the first of two (StepDouble).
	Press, Second Press
	// Task is the workflow task a Reset goes back to: the Task-th among
	// the WORKFLOW_TASK_COMPLETED events of the history (1 = the first),
	// taken modulo how many there are when it is pressed; a negative one
	// counts from the last (-1 = the last, -2 = the one before it, or the
	// first when there are fewer). NoReapply: the Reset does not reapply
	// the signals and updates that came after that point (the Web UI's
	// option; Temporal reapplies them by default).
	Task      int
	NoReapply bool
	// Release, on a Reset of the sequencer, puts Task differently: the
	// Reset goes back to the workflow task whose update released event
	// Release's delivery to Endpoint (found in the sequencer's history when
	// it is pressed; 1 = that task, 2 = the one before it, …), never to the
	// first task, which would reload the ledger. A Reset to a task undoes
	// that task and everything after it, so the sequencer forgets that it
	// released the delivery, and nothing else it has learnt since the task
	// before.
	Release int64
	// Order is the posting order of the events (StepPost).
	Order []int64
	// For is how long StepPause waits.
	For time.Duration
	// Arrived, on a StepVoid, is the sequence in Order that has arrived
	// (the void must be refused); Voided, on a StepPost, says the producer
	// posts a sequence voided before (it must be refused, 409).
	Arrived int64
	Voided  bool
	// Posts are the sequences a StepVoidRace posts while it voids Order.
	Posts []int64
	// Cap is the max_in_flight a StepThrottle sets (0: the default).
	Cap int
	// Filter is the filter a StepFilter gives the endpoint.
	Filter *EventFilter
}

// seqList writes sequences as the lines do: 1,2,3.
func seqList(seqs []int64) string {
	out := make([]string, len(seqs))
	for i, q := range seqs {
		out[i] = fmt.Sprint(q)
	}
	return strings.Join(out, ",")
}

// Line is the step as one readable line, events named c<corr>/<seq>, a
// delivery c<corr>/<seq>@e<endpoint>.
func (s Step) Line() string {
	target := fmt.Sprintf("c%d/%d", s.Corr, s.Seq)
	if s.Seq == 0 {
		target = fmt.Sprintf("sequencer c%d", s.Corr)
	}
	delivery := fmt.Sprintf("c%d/%d@e%d", s.Corr, s.Seq, s.Endpoint)
	switch s.Kind {
	case StepMode:
		return fmt.Sprintf("receiver e%d of c%d %s", s.Endpoint, s.Corr, s.Mode)
	case StepPost:
		order := make([]string, len(s.Order))
		for i, q := range s.Order {
			order[i] = fmt.Sprint(q)
		}
		if s.Voided {
			return fmt.Sprintf("post c%d event %s, voided before", s.Corr, strings.Join(order, ","))
		}
		return fmt.Sprintf("post c%d events %s", s.Corr, strings.Join(order, ","))
	case StepAwait:
		return fmt.Sprintf("await %s %s", delivery, s.State)
	case StepPress:
		return fmt.Sprintf("%s: %s", delivery, s.Press)
	case StepDouble:
		return fmt.Sprintf("%s: %s and %s at once", delivery, s.Press, s.Second)
	case StepTerminate:
		return "terminate " + target
	case StepCancel:
		return "request cancellation of " + target
	case StepReset:
		task := fmt.Sprintf("workflow task #%d", s.Task)
		switch {
		case s.Release > 0 && s.Task <= 1:
			task = fmt.Sprintf("the workflow task that released c%d/%d@e%d", s.Corr, s.Release, s.Endpoint)
		case s.Release > 0:
			task = fmt.Sprintf("workflow task #%d before the one that released c%d/%d@e%d", s.Task-1, s.Corr, s.Release, s.Endpoint)
		case s.Task < 0:
			task = fmt.Sprintf("workflow task #%d from the last", -s.Task)
		}
		if s.NoReapply {
			return fmt.Sprintf("reset %s to %s, signals and updates not reapplied", target, task)
		}
		return fmt.Sprintf("reset %s to %s", target, task)
	case StepPause:
		return fmt.Sprintf("pause %s", s.For)
	case StepDisable:
		return fmt.Sprintf("disable endpoint e%d", s.Endpoint)
	case StepEnable:
		return fmt.Sprintf("enable endpoint e%d", s.Endpoint)
	case StepDelete:
		return fmt.Sprintf("delete endpoint e%d", s.Endpoint)
	case StepVoid:
		seqs := make([]string, len(s.Order))
		for i, q := range s.Order {
			seqs[i] = fmt.Sprint(q)
		}
		if s.Arrived > 0 {
			return fmt.Sprintf("void c%d sequences %s (%d has arrived)", s.Corr, strings.Join(seqs, ","), s.Arrived)
		}
		return fmt.Sprintf("void c%d sequences %s, lost by the producer", s.Corr, strings.Join(seqs, ","))
	case StepCreate:
		return fmt.Sprintf("create endpoint e%d", s.Endpoint)
	case StepVoidRace:
		return fmt.Sprintf("void c%d sequences %s while the producer posts %s", s.Corr, seqList(s.Order), seqList(s.Posts))
	case StepOutage:
		return fmt.Sprintf("Temporal down for %s while c%d events %s are posted at once", s.For, s.Corr, seqList(s.Order))
	case StepKillWorkers:
		return "kill every worker"
	case StepFilter:
		return fmt.Sprintf("endpoint e%d's filter becomes %s, for the events posted from now on", s.Endpoint, s.Filter)
	case StepThrottle:
		if s.Cap == 0 {
			return fmt.Sprintf("endpoint e%d max_in_flight back to the default", s.Endpoint)
		}
		return fmt.Sprintf("endpoint e%d max_in_flight %d", s.Endpoint, s.Cap)
	}
	return string(s.Kind)
}

// ModelSubscribers are the operator model's two endpoints: e0 and e1 both
// take model.shared, and each one type of its own, so that an event goes to
// one endpoint or to both and each lane is its own subset of the
// correlation.
func ModelSubscribers() []Subscriber {
	return []Subscriber{
		{Name: "e0", EventTypes: []string{"model.shared", "model.first"}},
		{Name: "e1", EventTypes: []string{"model.shared", "model.second"}},
	}
}

// modelEndpoints is how many endpoints the model's scenarios route to.
const modelEndpoints = 2

// Subscribers are the scenario's own two endpoints, ModelSubscribers with
// every type made the scenario's (EventType), so that no other scenario's
// events reach them and a scenario may pause or delete them.
func (sc *Scenario) Subscribers() []Subscriber {
	subs := ModelSubscribers()
	for i := range subs {
		types := make([]string, len(subs[i].EventTypes))
		for j, t := range subs[i].EventTypes {
			types[j] = sc.EventType(t)
		}
		subs[i].EventTypes = types
	}
	return subs
}

// EventType is the type an event of model type t is posted with: t with
// the seed, one of this scenario's own.
func (sc *Scenario) EventType(t string) string { return fmt.Sprintf("%s.s%d", t, sc.Seed) }

// Scenario is one generated sequence of operator actions on fresh
// correlations.
type Scenario struct {
	Seed uint64
	// Tenant is the tenant the scenario runs in, and Block numbers its
	// IDs (CorrelationID): by default the default tenant and its seed;
	// InTenant deals scenarios out to tenants so that several share IDs.
	Tenant string
	Block  uint64
	// Events is how many events each correlation has (sequences 1..n), and
	// Types their types, by correlation and sequence-1.
	Events []int
	Types  [][]string
	// Lost is, by correlation, the sequence its producer lost (never
	// posted, voided by a StepVoid), or 0; Late how many of its last
	// sequences are posted later, by a second StepPost among the actions.
	Lost []int64
	Late []int
	// CreatedLate are the endpoints created by a StepCreate rather than
	// with the scenario.
	CreatedLate [modelEndpoints]bool
	// Filters are the endpoints' filters when created (nil: none), and
	// Refilter the one a StepFilter gives each mid-scenario (nil: none).
	// Amounts and Regions are, by correlation and sequence-1, the amount
	// in each event's data and the region in its metadata; Refiltered
	// whether it is posted after the StepFilter, so held to Refilter.
	// All nil in a scenario without filters: its events' amount is their
	// sequence, and they have no metadata.
	Filters, Refilter [modelEndpoints]*EventFilter
	Amounts           [][]int64
	Regions           [][]string
	Refiltered        [][]bool
	Steps             []Step
	// Closing says what the closing operator does with a delivery whose
	// dead letter is still open once the receivers are healed: "replay" or
	// "skip", by correlation, endpoint and sequence-1.
	Closing [][][]string
}

// CorrelationID is correlation k's ID: fresh for every block of seeds
// within a tenant.
func (sc *Scenario) CorrelationID(k int) string { return fmt.Sprintf("om-%d-c%d", sc.Block, k) }

// InTenant puts the scenario in tenants[Seed % n] and numbers its IDs
// by Seed / n: seeds next to each other run in different tenants with the
// same correlation and event IDs, so that anything of one tenant reaching
// another (an answer, a delivery, a release, a ledger entry) breaks a
// check of one of them. Each scenario's IDs stay fresh within its tenant.
func (sc *Scenario) InTenant(tenants []string) {
	n := uint64(len(tenants))
	sc.Tenant, sc.Block = tenants[sc.Seed%n], sc.Seed/n
}

// EventID is the ID (idempotency key) of correlation k's event seq.
func (sc *Scenario) EventID(k int, seq int64) string {
	return fmt.Sprintf("%s-%d", sc.CorrelationID(k), seq)
}

// Lane returns the sequences of correlation k routed to endpoint ep, in
// order: those of a type it takes that its filter, as it stands when each
// is posted, takes. An event a filter leaves out is never in the lane.
func (sc *Scenario) Lane(k, ep int) []int64 {
	var out []int64
	for i := range sc.Types[k] {
		if sc.Takes(k, int64(i+1), ep) {
			out = append(out, int64(i+1))
		}
	}
	return out
}

// Takes reports whether endpoint ep takes correlation k's event seq, as
// the scenario means it: of a type it subscribes to, and taken by its
// filter as it stands when the event is posted (FilterAt).
func (sc *Scenario) Takes(k int, seq int64, ep int) bool {
	return ModelSubscribers()[ep].Wants(sc.Types[k][seq-1]) && sc.FilterAt(k, seq, ep).Takes(sc.Amount(k, seq), sc.Region(k, seq))
}

// FilterAt is endpoint ep's filter when correlation k's event seq is
// posted: Refilter once a StepFilter changed it, else Filters.
func (sc *Scenario) FilterAt(k int, seq int64, ep int) *EventFilter {
	if sc.Refiltered != nil && sc.Refiltered[k][seq-1] && sc.Refilter[ep] != nil {
		return sc.Refilter[ep]
	}
	return sc.Filters[ep]
}

// Amount is the amount in the data of correlation k's event seq.
func (sc *Scenario) Amount(k int, seq int64) int64 {
	if sc.Amounts == nil {
		return seq
	}
	return sc.Amounts[k][seq-1]
}

// Region is the region in the metadata of correlation k's event seq, ""
// when it has no metadata.
func (sc *Scenario) Region(k int, seq int64) string {
	if sc.Regions == nil {
		return ""
	}
	return sc.Regions[k][seq-1]
}

// Lines are the scenario's actions, one a line, with the correlations it
// names and what the closing operator does.
func (sc *Scenario) Lines() []string {
	var out []string
	for k, n := range sc.Events {
		line := fmt.Sprintf("c%d = %s, events 1..%d (ids %s-<seq>), types %v: e0 gets %v, e1 gets %v",
			k, sc.CorrelationID(k), n, sc.CorrelationID(k), sc.Types[k], sc.Lane(k, 0), sc.Lane(k, 1))
		if sc.Lost[k] > 0 {
			line += fmt.Sprintf("; the producer loses %d", sc.Lost[k])
		}
		if sc.Late[k] > 0 {
			line += fmt.Sprintf("; the last %d posted later", sc.Late[k])
		}
		if sc.Amounts != nil {
			line += fmt.Sprintf("; amounts %v, regions %v", sc.Amounts[k], sc.Regions[k])
		}
		out = append(out, line)
	}
	for ep, f := range sc.Filters {
		if f != nil {
			out = append(out, fmt.Sprintf("e%d has a filter: %s", ep, f))
		}
	}
	for ep, late := range sc.CreatedLate {
		if late {
			out = append(out, fmt.Sprintf("e%d is created by a step: the events posted before it do not go to it", ep))
		}
	}
	for i, s := range sc.Steps {
		out = append(out, fmt.Sprintf("%2d. %s", i+1, s.Line()))
	}
	var closing []string
	for k := range sc.Closing {
		for ep := range sc.Closing[k] {
			for _, q := range sc.Lane(k, ep) {
				closing = append(closing, fmt.Sprintf("c%d/%d@e%d %s", k, q, ep, sc.Closing[k][ep][q-1]))
			}
		}
	}
	out = append(out, "closing: heal every receiver; whatever dead letter stays open: "+strings.Join(closing, ", "))
	return out
}

// absState is where the generator believes a delivery stands.
type absState int

const (
	absHeld absState = iota
	// absAbsent: not posted (yet, or ever: lost).
	absAbsent
	absInFlight
	absDead
	absDelivered
	absSkipped
	// absGone: no delivery, and none owed: voided, or posted after its
	// endpoint's delete.
	absGone
)

func (s absState) final() bool { return s == absDelivered || s == absSkipped || s == absGone }

// absLane is the generator's picture of one (correlation, endpoint) lane:
// its receiver's mode, its sequences and where each delivery stands.
type absLane struct {
	mode   ReceiverMode
	seqs   []int64
	events []absState // by index into seqs
	// ep is its endpoint, shared by the endpoint's lanes.
	ep *absEndpoint
}

// absEndpoint is the generator's picture of one of the scenario's
// endpoints: paused (disabled) or deleted.
type absEndpoint struct {
	paused, deleted bool
}

// move is one of the moves a scenario may have besides the operator's
// buttons, drawn from a stream of its own so that a scenario without one
// is the one its seed gave before there were moves.
type move int

const (
	moveNone move = iota
	// moveCreate: e1 is created between two posts of c0.
	moveCreate
	// moveVoidRace: c0 loses a sequence, whose void races its post and
	// the posts after it.
	moveVoidRace
	// moveOutage: c0's events are posted out of order while Temporal is
	// down.
	moveOutage
	// moveThrottle: two correlations of events that all go to both
	// endpoints, one of them slow and capped at one attempt in flight,
	// and every worker killed while one holds that place: the lanes wait
	// their turn until its lease runs out, while their events continue as
	// new (the model's stack runs with a low EventMaxHistory).
	moveThrottle
)

// pickMove picks a scenario's move: one in four has one.
func pickMove(mv *rand.Rand) move {
	if mv.IntN(4) != 0 {
		return moveNone
	}
	return move(1 + mv.IntN(4))
}

// absCorr is the generator's picture of a correlation's producer: the
// sequence it lost and whether it is voided, and the sequences it posts
// later and whether it has.
type absCorr struct {
	lost       int64
	voided     bool
	late       []int64
	latePosted bool
}

// failing: the head's attempts fail, the receiver's or the endpoint's
// doing (a paused endpoint's attempt dead-letters until it is enabled).
func (c *absLane) failing() bool { return c.receiverFailing() || c.ep.paused }

// receiverFailing: the lane's receiver fails its deliveries (a mode).
func (c *absLane) receiverFailing() bool { return c.mode == ModeReject || c.mode == ModeUnavailable }

// set puts the lane's delivery of seq, if it has one, in state s.
func (c *absLane) set(seq int64, s absState) {
	for i, q := range c.seqs {
		if q == seq {
			c.events[i] = s
		}
	}
}

// head returns the index of the first unfinished delivery, or -1.
func (c *absLane) head() int {
	for i, s := range c.events {
		if !s.final() {
			return i
		}
	}
	return -1
}

// posted returns the index of the first unfinished delivery when it has
// been posted, or -1: a head waiting for its post has nothing an operator
// can press.
func (c *absLane) posted() int {
	if h := c.head(); h >= 0 && c.events[h] != absAbsent {
		return h
	}
	return -1
}

// state returns the state of the lane's delivery of seq, and whether the
// lane has one.
func (c *absLane) state(seq int64) (absState, bool) {
	for i, q := range c.seqs {
		if q == seq {
			return c.events[i], true
		}
	}
	return 0, false
}

// advance lets the lane run from its head as the receiver's mode decides:
// with the receiver failing the head goes in flight (it will dead-letter),
// else it and its successors are delivered.
func (c *absLane) advance() {
	for h := c.head(); h >= 0; h = c.head() {
		switch c.events[h] {
		case absHeld:
			c.events[h] = absInFlight
		case absInFlight:
			if c.failing() {
				return
			}
			c.events[h] = absDelivered
		default: // dead-lettered: waits for an operator; absent: for its post
			return
		}
	}
}

// with returns the indexes of the deliveries with state s.
func (c *absLane) with(s absState) []int {
	var out []int
	for i, e := range c.events {
		if e == s {
			out = append(out, i)
		}
	}
	return out
}

// choice is a candidate action with its weight; apply updates the
// abstract model and returns the steps it emits.
type choice struct {
	weight int
	apply  func() []Step
}

// modelTypes are the event types a scenario draws from, weighted: most go
// to both endpoints.
func modelTypes(rng *rand.Rand) string {
	switch rng.IntN(5) {
	case 0:
		return "model.first"
	case 1:
		return "model.second"
	}
	return "model.shared"
}

// Generate returns the scenario of seed: 1–2 correlations of 3–4 events,
// each of a type that routes it to e0, e1 or both, now and then one
// sequence the producer loses and the last ones posted later, a receiver
// mode for each lane, the posts, then 6–10 operator actions chosen by
// weight from where the abstract model says the deliveries stand (the
// buttons of a dead letter, Terminate and Reset, receivers that fail or
// slow down, an endpoint paused and enabled or deleted, a lost sequence
// voided), and the closing operator's choices.
func Generate(seed uint64) *Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x6f706d6f64656c))
	mv := rand.New(rand.NewPCG(seed, 0x6d6f766573))
	mov := pickMove(mv)
	sc := &Scenario{Seed: seed, Tenant: contract.DefaultTenant, Block: seed}
	ncorr := 1
	if rng.IntN(5) < 2 || mov == moveThrottle {
		ncorr = 2
	}
	w := &absWorld{sc: sc, lanes: make([][modelEndpoints]*absLane, ncorr)}
	for ep := range w.eps {
		w.eps[ep] = &absEndpoint{}
	}
	// The throttled endpoint, capped before the posts and lifted after a
	// wait (moveThrottle).
	throttled := mv.IntN(modelEndpoints)
	if mov == moveThrottle {
		sc.Steps = append(sc.Steps, Step{Kind: StepThrottle, Endpoint: throttled, Cap: 1})
	}
	sc.CreatedLate[1] = mov == moveCreate
	// Filters, from a stream of their own (a scenario without them is the
	// one its seed gave before filters): in one scenario in four e0 takes
	// only amounts of 34 and more (of 1..100), and in half of those an
	// operator changes its filter to the region eu in the events' metadata
	// between two posts of c0. The throttle wants every lane busy, so has
	// none.
	fl := rand.New(rand.NewPCG(seed, 0x66696c746572))
	filtered := mov != moveThrottle && fl.IntN(4) == 0
	refilter := filtered && mov != moveCreate && mov != moveOutage && fl.IntN(2) == 0
	if filtered {
		sc.Filters[0] = &EventFilter{MinAmount: 34}
	}
	if refilter {
		sc.Refilter[0] = &EventFilter{Region: "eu"}
	}
	for k := range w.lanes {
		n := 3 + rng.IntN(2)
		sc.Events = append(sc.Events, n)
		types := make([]string, n)
		for i := range types {
			types[i] = modelTypes(rng)
			if mov == moveThrottle {
				types[i] = "model.shared" // every lane at the capped endpoint busy
			}
		}
		sc.Types = append(sc.Types, types)
		if filtered {
			amounts, regions := make([]int64, n), make([]string, n)
			for i := range amounts {
				amounts[i] = 1 + fl.Int64N(100)
				regions[i] = []string{"eu", "us"}[fl.IntN(2)]
			}
			// Every event is posted after the change but the ones c0
			// posts before it (below).
			sc.Amounts, sc.Regions = append(sc.Amounts, amounts), append(sc.Regions, regions)
			sc.Refiltered = append(sc.Refiltered, slices.Repeat([]bool{refilter}, n))
		}
		// A lost sequence now and then (not the first, so that something
		// dead-letters before it), and the last one or two posted later
		// (into a paused endpoint, past a deleted one).
		c := &absCorr{}
		if rng.IntN(6) == 0 {
			c.lost = 2 + rng.Int64N(int64(n-1))
		}
		if mov == moveVoidRace && k == 0 && c.lost == 0 {
			c.lost = 2 + mv.Int64N(int64(n-1))
		}
		late := 0
		if rng.IntN(3) == 0 {
			late = 1 + rng.IntN(2)
		}
		if mov == moveThrottle {
			c.lost, late = 0, 0 // nothing holds the lanes but their turn
		}
		for q := int64(n - late + 1); q <= int64(n); q++ {
			if q != c.lost {
				c.late = append(c.late, q)
			}
		}
		sc.Lost, sc.Late = append(sc.Lost, c.lost), append(sc.Late, late)
		w.corrs = append(w.corrs, c)
		for ep := range w.lanes[k] {
			seqs := sc.Lane(k, ep)
			l := &absLane{seqs: seqs, events: make([]absState, len(seqs)), ep: w.eps[ep]}
			w.lanes[k][ep] = l
			for _, q := range append(slices.Clone(c.late), c.lost) {
				l.set(q, absAbsent)
			}
			// e0's receiver mostly fails from the start, e1's half the
			// time: dead letters at one endpoint or at both; either may
			// be slow.
			weights := []int{1, 4, 3, 1, 0} // pass, reject, unavailable, lose acks, slow
			if ep == 1 {
				weights = []int{4, 3, 2, 1, 1}
			}
			mode := pickMode(rng, weights)
			if mov == moveThrottle && ep == throttled {
				mode = ModeSlow // its attempts hold the one slot a while
			}
			if mode != ModePass {
				l.mode = mode
				sc.Steps = append(sc.Steps, Step{Kind: StepMode, Corr: k, Endpoint: ep, Mode: mode})
			}
		}
		var order []int64
		for q := int64(1); q <= int64(n-late); q++ {
			if q != c.lost {
				order = append(order, q)
			}
		}
		if rng.IntN(3) == 0 {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		switch {
		case k == 0 && mov == moveOutage:
			mv.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			sc.Steps = append(sc.Steps, Step{Kind: StepOutage, Corr: k, Order: order, For: time.Duration(3+mv.IntN(4)) * time.Second})
		case k == 0 && mov == moveCreate:
			// e1 comes in the middle: what is posted before it is not
			// routed to it.
			i := max(1, len(order)/2)
			for _, q := range order[:i] {
				w.lanes[k][1].set(q, absGone)
			}
			sc.Steps = append(sc.Steps, Step{Kind: StepPost, Corr: k, Order: order[:i]}, Step{Kind: StepCreate, Endpoint: 1})
			if i < len(order) {
				sc.Steps = append(sc.Steps, Step{Kind: StepPost, Corr: k, Order: order[i:]})
			}
		case k == 0 && refilter:
			// e0's filter changes between two posts: what is posted
			// before it is held to the filter it had.
			i := max(1, len(order)/2)
			for _, q := range order[:i] {
				sc.Refiltered[k][q-1] = false
			}
			sc.Steps = append(sc.Steps, Step{Kind: StepPost, Corr: k, Order: order[:i]}, Step{Kind: StepFilter, Endpoint: 0, Filter: sc.Refilter[0]})
			if i < len(order) {
				sc.Steps = append(sc.Steps, Step{Kind: StepPost, Corr: k, Order: order[i:]})
			}
			// The lanes were drawn before the posting order: draw them
			// again, each held to the filter of its events' posts.
			for ep, l := range w.lanes[k] {
				l.seqs = sc.Lane(k, ep)
				l.events = make([]absState, len(l.seqs))
				for _, q := range append(slices.Clone(c.late), c.lost) {
					l.set(q, absAbsent)
				}
			}
		default:
			sc.Steps = append(sc.Steps, Step{Kind: StepPost, Corr: k, Order: order})
		}
		for _, l := range w.lanes[k] {
			l.advance()
		}
	}
	switch mov {
	case moveVoidRace:
		sc.Steps = append(sc.Steps, w.voidRace(mv, 0)...)
	case moveThrottle:
		// The lease of the attempt the kill cuts short holds the one place
		// for the attempt's timeout and 10 s more.
		sc.Steps = append(sc.Steps, Step{Kind: StepPause, For: time.Duration(500+mv.IntN(1000)) * time.Millisecond}, Step{Kind: StepKillWorkers},
			Step{Kind: StepPause, For: time.Duration(12+mv.IntN(4)) * time.Second}, Step{Kind: StepThrottle, Endpoint: throttled})
	}

	actions := 6 + rng.IntN(5)
	for a := 0; a < actions; a++ {
		k := rng.IntN(ncorr)
		ep := rng.IntN(modelEndpoints)
		// Prefer a lane whose head is dead-lettered or in flight.
		for try := 0; try < 2*ncorr*modelEndpoints && (w.lanes[k][ep].posted() < 0 || w.eps[ep].deleted); try++ {
			k, ep = rng.IntN(ncorr), rng.IntN(modelEndpoints)
		}
		// One action in six is on an endpoint or a producer (a delete
		// only in the second half), the rest on the lane.
		cs := candidates(rng, k, ep, w.lanes[k])
		if rng.IntN(6) == 0 {
			if ws := w.candidates(rng, k, ep, 2*a >= actions); len(ws) > 0 {
				cs = ws
			}
		}
		sc.Steps = append(sc.Steps, pickWeighted(rng, cs)...)
	}
	// What the operator and the producer still owe: enabling what is
	// paused, the late posts, and the void of what was lost.
	for ep, e := range w.eps {
		if e.paused {
			sc.Steps = append(sc.Steps, w.enable(ep)...)
		}
	}
	for k, c := range w.corrs {
		if !c.latePosted && len(c.late) > 0 {
			sc.Steps = append(sc.Steps, w.postLate(k)...)
		}
		if c.lost > 0 && !c.voided {
			sc.Steps = append(sc.Steps, w.void(k)...)
		}
	}

	for _, n := range sc.Events {
		per := make([][]string, modelEndpoints)
		for ep := range per {
			per[ep] = make([]string, n)
			for i := range per[ep] {
				per[ep][i] = "replay"
				if rng.IntN(4) == 0 {
					per[ep][i] = "skip"
				}
			}
		}
		sc.Closing = append(sc.Closing, per)
	}
	return sc
}

// absWorld is the generator's picture of the whole scenario: the lanes by
// correlation and endpoint, the endpoints, the producers.
type absWorld struct {
	sc    *Scenario
	lanes [][modelEndpoints]*absLane
	eps   [modelEndpoints]*absEndpoint
	corrs []*absCorr
}

// postLate posts correlation k's late sequences: to every subscribed
// endpoint but a deleted one.
func (w *absWorld) postLate(k int) []Step {
	c := w.corrs[k]
	c.latePosted = true
	for _, l := range w.lanes[k] {
		for _, q := range c.late {
			if l.ep.deleted {
				l.set(q, absGone) // not routed to it: nothing to wait for
			} else {
				l.set(q, absHeld)
			}
		}
		l.advance()
	}
	return []Step{{Kind: StepPost, Corr: k, Order: slices.Clone(c.late)}}
}

// void voids correlation k's lost sequence: every lane moves past it.
func (w *absWorld) void(k int) []Step {
	c := w.corrs[k]
	c.voided = true
	for _, l := range w.lanes[k] {
		l.set(c.lost, absGone)
		l.advance()
	}
	return []Step{{Kind: StepVoid, Corr: k, Order: []int64{c.lost}}}
}

// voidRace voids correlation k's lost sequence while the producer posts
// it after all, with the late sequences not posted yet. Which of the void
// and the post wins is the stack's to decide; the generator takes the
// void's side (the lanes move past it either way).
func (w *absWorld) voidRace(mv *rand.Rand, k int) []Step {
	c := w.corrs[k]
	posts := []int64{c.lost}
	if !c.latePosted {
		posts = append(posts, c.late...)
		c.latePosted = true
	}
	mv.Shuffle(len(posts), func(i, j int) { posts[i], posts[j] = posts[j], posts[i] })
	c.voided = true
	for _, l := range w.lanes[k] {
		for _, q := range c.late {
			if st, _ := l.state(q); st == absAbsent {
				l.set(q, absHeld)
			}
		}
		l.set(c.lost, absGone)
		l.advance()
	}
	return []Step{{Kind: StepVoidRace, Corr: k, Order: []int64{c.lost}, Posts: posts}}
}

// enable enables endpoint ep again, which replays the dead letters its
// pause wrote.
func (w *absWorld) enable(ep int) []Step {
	w.eps[ep].paused = false
	for _, lanes := range w.lanes {
		l := lanes[ep]
		if h := l.head(); h >= 0 && l.events[h] == absDead {
			l.events[h] = absInFlight
		}
		l.advance()
	}
	return []Step{{Kind: StepEnable, Endpoint: ep}}
}

// candidates are the actions on the endpoints and the producers that
// matter as the abstract model has them, for lane ep of correlation k:
// pause ep (and post into it while paused), enable it, delete it (when
// mayDelete), post the late sequences, void the lost one (or try to void
// one that arrived, or post the voided one after all).
func (w *absWorld) candidates(rng *rand.Rand, k, ep int, mayDelete bool) []choice {
	var cs []choice
	add := func(wt int, f func() []Step) { cs = append(cs, choice{wt, f}) }
	e, c := w.eps[ep], w.corrs[k]
	switch {
	case e.deleted:
	case e.paused:
		add(4, func() []Step { return w.enable(ep) })
	default:
		add(3, func() []Step {
			e.paused = true
			steps := []Step{{Kind: StepDisable, Endpoint: ep}}
			if !c.latePosted && len(c.late) > 0 && rng.IntN(2) == 0 {
				steps = append(steps, w.postLate(k)...)
			}
			return steps
		})
	}
	if !e.deleted && mayDelete {
		add(1, func() []Step {
			e.deleted, e.paused = true, false
			for _, lanes := range w.lanes {
				l := lanes[ep]
				for i, st := range l.events {
					if !st.final() && st != absAbsent {
						l.events[i] = absSkipped
					}
				}
			}
			return []Step{{Kind: StepDelete, Endpoint: ep}}
		})
	}
	if !c.latePosted && len(c.late) > 0 {
		wt := 2
		if e.paused || e.deleted {
			wt = 8
		}
		add(wt, func() []Step { return w.postLate(k) })
	}
	if c.lost > 0 && !c.voided {
		add(3, func() []Step {
			steps := w.void(k)
			if rng.IntN(2) == 0 {
				steps = append(steps, Step{Kind: StepPost, Corr: k, Order: []int64{c.lost}, Voided: true})
			}
			return steps
		})
		var arrived []int64
		for q := int64(1); q <= int64(w.sc.Events[k]); q++ {
			if q != c.lost && (!slices.Contains(c.late, q) || c.latePosted) {
				arrived = append(arrived, q)
			}
		}
		if len(arrived) > 0 {
			add(3, func() []Step {
				a := arrived[rng.IntN(len(arrived))]
				order := []int64{c.lost, a}
				slices.Sort(order)
				return []Step{{Kind: StepVoid, Corr: k, Order: order, Arrived: a}}
			})
		}
	}
	if c.voided {
		add(1, func() []Step { return []Step{{Kind: StepPost, Corr: k, Order: []int64{c.lost}, Voided: true}} })
	}
	return cs
}

func pickMode(rng *rand.Rand, weights []int) ReceiverMode {
	total := 0
	for _, w := range weights {
		total += w
	}
	r := rng.IntN(total)
	for i, w := range weights {
		if r < w {
			return ReceiverMode(i)
		}
		r -= w
	}
	return ModePass
}

func pickWeighted(rng *rand.Rand, cs []choice) []Step {
	total := 0
	for _, c := range cs {
		total += c.weight
	}
	if total == 0 {
		return nil
	}
	r := rng.IntN(total)
	for _, c := range cs {
		if r < c.weight {
			return c.apply()
		}
		r -= c.weight
	}
	return nil
}

// stopButton picks which of the Web UI's two buttons that stop a workflow
// an operator presses: Terminate, or a third of the time Request
// Cancellation.
func stopButton(rng *rand.Rand) StepKind {
	if rng.IntN(3) == 0 {
		return StepCancel
	}
	return StepTerminate
}

// pickTask picks the workflow task a Reset goes back to: the first one
// half the time (back to before the release or the first delivery), else
// any of the first six.
func pickTask(rng *rand.Rand) int {
	if rng.IntN(2) == 0 {
		return 1
	}
	return 1 + rng.IntN(6)
}

// pickInput picks a raw Web UI signal's input.
func pickInput(rng *rand.Rand) SignalInput {
	switch r := rng.IntN(20); {
	case r < 4:
		return InputNone
	case r < 12:
		return InputEmpty
	case r < 17:
		return InputGeneration
	default:
		return InputStale
	}
}

// candidates are the actions that matter for lane ep of correlation k as
// the abstract model has it, weighted; lanes are the correlation's lanes,
// for what an unnamed press does (it is ambiguous when the other lane's
// delivery of the same event is dead-lettered too).
func candidates(rng *rand.Rand, k, ep int, lanes [modelEndpoints]*absLane) []choice {
	c := lanes[ep]
	other := lanes[1-ep]
	h := c.posted()
	var seq int64
	if h >= 0 {
		seq = c.seqs[h]
	}
	var cs []choice
	add := func(w int, f func() []Step) { cs = append(cs, choice{w, f}) }
	mode := func(m ReceiverMode) []Step {
		c.mode = m
		c.advance()
		return []Step{{Kind: StepMode, Corr: k, Endpoint: ep, Mode: m}}
	}
	// bothDead: the event's other delivery waits on a dead letter too, so
	// a press that names no endpoint is refused (API: 422) or ignored (a
	// signal).
	bothDead := func() bool {
		s, ok := other.state(seq)
		return ok && s == absDead
	}
	// takes reports whether a press would act on this lane.
	takes := func(p Press) bool { return p.Named || !bothDead() }
	named := func() bool { return rng.IntN(2) == 0 }
	replayed := func() {
		c.events[h] = absInFlight
		c.advance()
	}
	skippedHead := func() {
		c.events[h] = absSkipped
		c.advance()
	}
	press := func(p Press) {
		if !takes(p) || (p.UI && p.Input == InputStale) {
			return
		}
		if p.Button == "skip" {
			skippedHead()
		} else {
			replayed()
		}
	}
	at := func(kind StepKind, p, second Press) Step {
		return Step{Kind: kind, Corr: k, Seq: seq, Endpoint: ep, Press: p, Second: second}
	}

	add(1, func() []Step {
		return []Step{{Kind: StepPause, For: time.Duration(500+rng.IntN(1500)) * time.Millisecond}}
	})
	add(1, func() []Step { return []Step{{Kind: stopButton(rng), Corr: k}} })
	add(1, func() []Step {
		return []Step{{Kind: StepReset, Corr: k, Task: pickTask(rng), NoReapply: rng.IntN(4) == 0}}
	})
	if c.ep.deleted {
		return cs // its skips were the delete's: nothing to press
	}
	if c.receiverFailing() {
		add(2, func() []Step { return mode(ModePass) })
	} else if h >= 0 {
		add(1, func() []Step { return mode(pickMode(rng, []int{0, 2, 2, 1, 1})) })
	}
	// The receiver healed after a skip: a Reset of the skipped event must
	// not send it.
	if skipped := c.with(absSkipped); len(skipped) > 0 {
		if c.receiverFailing() {
			add(4, func() []Step { return mode(ModePass) })
		} else {
			add(15, func() []Step {
				i := skipped[rng.IntN(len(skipped))]
				return []Step{{Kind: StepReset, Corr: k, Seq: c.seqs[i], Task: pickTask(rng)}}
			})
		}
	}
	if delivered := c.with(absDelivered); len(delivered) > 0 {
		add(1, func() []Step {
			i := delivered[rng.IntN(len(delivered))]
			return []Step{{Kind: StepReset, Corr: k, Seq: c.seqs[i], Task: pickTask(rng)}}
		})
	}
	// Request Cancellation of an event held behind the head: it must still
	// be delivered in its turn. Twice, as a double click.
	if held := c.with(absHeld); len(held) > 0 {
		add(1, func() []Step {
			i := held[rng.IntN(len(held))]
			steps := []Step{{Kind: StepCancel, Corr: k, Seq: c.seqs[i]}}
			if rng.IntN(3) == 0 {
				steps = append(steps, steps[0])
			}
			return steps
		})
	}
	if h < 0 {
		return cs
	}
	if h > 0 && (c.events[h] == absInFlight || c.events[h] == absDead) {
		// Released by its predecessor's hand-over (a signal): a Reset to
		// before it that does not reapply signals loses the release.
		add(4, func() []Step { return []Step{{Kind: StepReset, Corr: k, Seq: seq, Task: 1, NoReapply: true}} })
	}
	switch c.events[h] {
	case absInFlight:
		if c.failing() {
			add(10, func() []Step {
				c.events[h] = absDead
				return []Step{{Kind: StepAwait, Corr: k, Seq: seq, Endpoint: ep, State: awaitDeadLettered}}
			})
		}
		// A sequencer reset to an early task while its head delivers,
		// then the head terminated: the restart must not strand it.
		// The sequencer has a release to forget once an earlier event
		// finished.
		forget := 2
		if h > 0 {
			forget = 6
		}
		add(forget, func() []Step {
			// The task before the last: most likely before the hand-over
			// that released the head.
			task := pickTask(rng)
			if rng.IntN(2) == 0 {
				task = -2
			}
			return []Step{{Kind: StepReset, Corr: k, Task: task, NoReapply: rng.IntN(4) == 0}, {Kind: StepTerminate, Corr: k, Seq: seq}}
		})
		add(2, func() []Step { return []Step{{Kind: stopButton(rng), Corr: k, Seq: seq}} })
		add(2, func() []Step {
			return []Step{{Kind: StepReset, Corr: k, Seq: seq, Task: pickTask(rng), NoReapply: rng.IntN(3) == 0}}
		})
	case absDead:
		add(3, func() []Step {
			p := Press{Button: "replay", Named: named()}
			press(p)
			return []Step{at(StepPress, p, Press{})}
		})
		add(6, func() []Step {
			p := Press{Button: "skip", Named: named()}
			press(p)
			return []Step{at(StepPress, p, Press{})}
		})
		add(4, func() []Step {
			p := Press{Button: "replay", UI: true, Input: pickInput(rng), Named: named()}
			if rng.IntN(2) == 0 {
				p.Button = "skip"
			}
			press(p)
			return []Step{at(StepPress, p, Press{})}
		})
		if bothDead() {
			// Two dead letters open on one event: a press without
			// endpoint_id is refused (422 naming both) or ignored (a
			// signal {}), then the operator names the endpoint.
			add(14, func() []Step {
				first := Press{Button: "skip", UI: rng.IntN(3) == 0, Input: InputEmpty}
				if rng.IntN(2) == 0 {
					first.Button = "replay"
				}
				then := Press{Button: "replay", UI: rng.IntN(3) == 0, Input: InputEmpty, Named: true}
				if rng.IntN(2) == 0 {
					then.Button = "skip"
				}
				press(then)
				return []Step{at(StepPress, first, Press{}), at(StepPress, then, Press{})}
			})
		}
		add(5, func() []Step {
			pairs := [][2]Press{
				{{Button: "replay"}, {Button: "replay"}},
				{{Button: "replay"}, {Button: "skip"}},
				{{Button: "replay"}, {Button: "skip", UI: true, Input: InputEmpty}},
				{{Button: "replay"}, {Button: "skip", UI: true, Input: InputEmpty}},
				{{Button: "skip"}, {Button: "replay", UI: true, Input: InputEmpty}},
				{{Button: "skip"}, {Button: "replay", UI: true, Input: InputNone}},
			}
			p := pairs[rng.IntN(len(pairs))]
			// Both name the endpoint, or neither does (an API call without
			// endpoint_id, a signal {}): with the other lane dead-lettered
			// too, the unnamed pair does nothing.
			n := named()
			p[0].Named, p[1].Named = n, n
			switch {
			case !takes(p[0]):
			case p[0].Button == "skip" || rng.IntN(2) == 0 && p[1].Button == "skip":
				skippedHead()
			default:
				replayed()
			}
			return []Step{at(StepDouble, p[0], p[1])}
		})
		// A head that lost its release while the ledger says delivering
		// (the sweep once never repaired a running head stuck delivering): skip the dead letter with the receiver
		// unavailable, so the successor is released and keeps retrying
		// (503) through its recovery window; while it does, Reset the
		// sequencer back to the task that released it (or a little
		// earlier), not reapplying the updates since, and Terminate it.
		// The sweep's restart then arrives at a sequencer that believes
		// the skipped delivery is still in flight: it must be released all
		// the same.
		if h+1 < len(c.events) {
			add(3, func() []Step {
				var steps []Step
				if c.mode != ModeUnavailable {
					steps = append(steps, mode(ModeUnavailable)...)
				}
				p := Press{Button: "skip", Named: true}
				if rng.IntN(4) == 0 {
					p = Press{Button: "skip", UI: true, Input: InputEmpty, Named: true}
				}
				skippedHead()
				next := c.seqs[h+1]
				task := 1
				if rng.IntN(4) == 0 {
					task = 2 + rng.IntN(2)
				}
				return append(steps,
					at(StepPress, p, Press{}),
					Step{Kind: StepAwait, Corr: k, Seq: next, Endpoint: ep, State: awaitDelivering},
					Step{Kind: StepReset, Corr: k, Endpoint: ep, Task: task, Release: next, NoReapply: true},
					Step{Kind: StepTerminate, Corr: k, Seq: next})
			})
		}
		// A successor released after a skip carries the skip in its
		// delivery: a restart of it must too.
		terminate := 4
		if h > 0 && c.events[h-1] == absSkipped {
			terminate = 9
		}
		add(terminate, func() []Step { return []Step{{Kind: StepTerminate, Corr: k, Seq: seq}} })
		add(1, func() []Step { return []Step{{Kind: StepCancel, Corr: k, Seq: seq}} })
		add(3, func() []Step {
			return []Step{{Kind: StepReset, Corr: k, Seq: seq, Task: pickTask(rng), NoReapply: rng.IntN(3) == 0}}
		})
		add(1, func() []Step {
			return []Step{{Kind: StepReset, Corr: k, Task: pickTask(rng), NoReapply: rng.IntN(4) == 0}}
		})
	}
	return cs
}
