package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oapi-codegen/nullable"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/workflows"
)

// ModelConfig is a run of the operator model: scenarios generated from
// seeds, carried out one after another (or a few at once) on one stack.
type ModelConfig struct {
	// Binary is the hookflow executable; DataDir as in Config.
	Binary, DataDir string
	// Seeds are the scenarios' seeds; when empty, Sequences seeds from
	// Seed on (Seed, Seed+1, …).
	Seeds     []uint64
	Seed      uint64
	Sequences int
	// Parallel is how many scenarios run at once (each on its own
	// correlations).
	Parallel int
	Workers  int
	// Tenants is how many tenants the scenarios are dealt out to
	// (Scenario.InTenant), each with endpoints of its own.
	Tenants int
	// RecoveryWindow, DeliveryTimeout and RepairAfter go to the API and
	// the workers: short, so dead letters come fast and the repair sweep
	// acts within a scenario.
	RecoveryWindow, DeliveryTimeout, RepairAfter time.Duration
	// EventMaxHistory is the API's and the workers' HOOKFLOW_EVENT_MAX_HISTORY: low, so
	// that events waiting their turn (StepThrottle) or on a dead letter
	// continue as new within a scenario.
	EventMaxHistory int
	// Settle bounds the closing operator's wait for quiet in a scenario.
	Settle time.Duration
	// Stdout gets the failures and the summary line; Stderr the progress.
	Stdout, Stderr io.Writer
}

// ModelShort is the short run of make test: a fixed list of seeds, about a
// minute on a 2-core machine. The seeds are those that found an earlier
// review's defects with the generator before fan-out (9 and 128 a restart that drops
// skipped_sequences, 25, 31 and 52 a head stranded delivering behind a
// sequencer reset to before its release, 23, 44 and 52 an API replay and a
// raw skip {} that both act, 33 and 51 a Reset that sends a skipped event;
// 3, 5, 6 and 7 passed there), and 69, which dead-letters one event at
// both endpoints and presses without endpoint_id (422) before naming one,
// and 1557 (found after fan-out), a Reset that takes a dead-lettered
// delivery back to before its release, then a replay of it.
// The fan-out generator draws each event's type from the same stream, so
// these seeds now give other scenarios than the ones that found those
// defects; they stay as a fixed, varied set. 114 and 96 join them for the
// actions on endpoints and producers that the others lack (a void refused
// for a sequence that arrived, a voided sequence posted after all, and
// Request Cancellation of an event); 10 and 29 for the moves beside the
// buttons that no other has (an endpoint created between two posts of a
// correlation whose first sequence is missing; two slow lanes through an
// endpoint capped at one attempt in flight, waiting their turns while the
// events continue as new), where 25 already races a void with the posts,
// and 69 and 96 post out of order through a Temporal outage; 41 and 141
// for an endpoint's filter changed between two posts of a correlation, each
// with an event the old filter would have routed otherwise and one left out
// with a later one taken (3 and 7 drew a filter at e0 too when filters
// joined, so their scenarios changed again). With them
// the set presses every button the generator has
// (TestModelShortPressesEveryButton). In three tenants (Scenario.InTenant),
// 3 and 5, 6 and 7, 51 and 52 share their IDs.
func ModelShort() ModelConfig {
	return ModelConfig{
		Seeds: []uint64{9, 128, 25, 31, 52, 23, 44, 33, 51, 3, 5, 6, 7, 69, 1557, 114, 96, 10, 29, 41, 141}, Parallel: 2, Workers: 2, Tenants: 3,
		RecoveryWindow: 2 * time.Second, DeliveryTimeout: 2 * time.Second, RepairAfter: 2 * time.Second,
		EventMaxHistory: 24, Settle: 20 * time.Second,
	}
}

// ModelLong is the long run's default: 200 scenarios from seed 1.
func ModelLong() ModelConfig {
	c := ModelShort()
	c.Seeds, c.Seed, c.Sequences, c.Parallel = nil, 1, 200, 3
	return c
}

// ModelResult is what a run of the operator model found.
type ModelResult struct {
	Sequences int
	// Failed lists the seeds whose scenario broke a check.
	Failed []uint64
	// Actions counts the scenarios' actions by kind; Violations the failed
	// checks by check.
	Actions, Violations map[string]int
	// Tenants counts the scenarios run in each tenant, and Passed those
	// that passed every check.
	Tenants, Passed map[string]int
	// Unverified counts the deliveries the receivers refused to verify
	// (Observed.Unverified): the scenarios refuse deliveries at the proxy,
	// never by a signature, so each is a fault of the run's wiring.
	Unverified int
	Summary    string
	Wall       time.Duration
}

// OK reports whether every scenario passed every check and every delivery
// that reached a receiver was verified.
func (r ModelResult) OK() bool { return len(r.Failed) == 0 && r.Unverified == 0 }

// RunOperatorModel starts the stack once, runs every scenario on it,
// checks each once quiet, and prints each failure (its seed, its
// violations, its actions with what became of each) and one summary line.
// The error is for a run that could not be carried out.
func RunOperatorModel(ctx context.Context, cfg ModelConfig) (ModelResult, error) {
	def := ModelShort()
	cfg.Parallel = max(1, cfg.Parallel)
	cfg.Workers = cmp.Or(cfg.Workers, def.Workers)
	cfg.RecoveryWindow = cmp.Or(cfg.RecoveryWindow, def.RecoveryWindow)
	cfg.DeliveryTimeout = cmp.Or(cfg.DeliveryTimeout, def.DeliveryTimeout)
	cfg.RepairAfter = cmp.Or(cfg.RepairAfter, def.RepairAfter)
	cfg.Settle = cmp.Or(cfg.Settle, def.Settle)
	cfg.EventMaxHistory = cmp.Or(cfg.EventMaxHistory, def.EventMaxHistory)
	cfg.Tenants = cmp.Or(cfg.Tenants, def.Tenants)
	tenants := ChaosTenants(cfg.Tenants)
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	seeds := cfg.Seeds
	if len(seeds) == 0 {
		for i := 0; i < cfg.Sequences; i++ {
			seeds = append(seeds, cfg.Seed+uint64(i))
		}
	}
	switch {
	case cfg.Binary == "" || cfg.DataDir == "":
		return ModelResult{}, errors.New("operator model: the hookflow binary and a data folder are required")
	case len(seeds) == 0:
		return ModelResult{}, errors.New("operator model: no sequence to run")
	}

	out := &progress{w: cfg.Stderr, began: time.Now()}
	dir, logs, logger, closeLog, err := openRunDir(cfg.DataDir)
	if err != nil {
		return ModelResult{}, err
	}
	defer closeLog()
	st := newStack(Config{
		Binary: cfg.Binary, Seed: seeds[0], Workers: cfg.Workers,
		RecoveryWindow: cfg.RecoveryWindow, DeliveryTimeout: cfg.DeliveryTimeout, RepairAfter: cfg.RepairAfter,
		EventMaxHistory: cfg.EventMaxHistory, Subscribers: ForTenants(ModelSubscribers(), tenants), Down: -1, Flapping: -1,
	}, dir, logs, logger, out)
	var torn sync.Once
	tearDown := func() { torn.Do(st.stop) }
	defer tearDown()
	if err := st.start(ctx); err != nil {
		return ModelResult{}, err
	}
	st.proxy.SetFaults(false) // the scenarios set the receiver's modes themselves
	out.printf("operator model: stack up in %s (recovery window %s, repair after %s, %d workers); %d sequences, %d at once, seeds %s; logs in %s",
		time.Since(out.began).Round(100*time.Millisecond), cfg.RecoveryWindow, cfg.RepairAfter, cfg.Workers, len(seeds), cfg.Parallel, seedList(seeds), logs)

	res := ModelResult{Actions: map[string]int{}, Violations: map[string]int{}, Tenants: map[string]int{}, Passed: map[string]int{}}
	var mu sync.Mutex
	work := make(chan uint64)
	var wg sync.WaitGroup
	for i := 0; i < cfg.Parallel; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range work {
				sc := Generate(seed)
				sc.InTenant(tenants)
				x := &modelExec{st: st, sc: sc, cfg: cfg, logger: logger.With("seed", seed, "tenant", sc.Tenant), rec: newModelRecord(),
					api: st.tenantAPI(sc.Tenant), base: slices.Index(tenants, sc.Tenant) * len(ModelSubscribers())}
				began := time.Now()
				vs, err := x.run(ctx)
				took := time.Since(began).Round(100 * time.Millisecond)
				mu.Lock()
				res.Sequences++
				res.Tenants[sc.Tenant]++
				for _, s := range sc.Steps {
					res.Actions[actionLabel(s)]++
				}
				res.Actions["closing_replay"] += sumCounts(x.rec.ClosingReplays)
				res.Actions["closing_skip"] += sumCounts(x.rec.ClosingSkips)
				if err != nil {
					vs = append(vs, ModelViolation{"not_carried_out", err.Error()})
				}
				if len(vs) == 0 {
					res.Passed[sc.Tenant]++
					out.printf("operator model: seed %d ok (%s, %d actions, %s) [%d/%d]", seed, sc.Tenant, len(sc.Steps), took, res.Sequences, len(seeds))
				} else {
					res.Failed = append(res.Failed, seed)
					seen := map[string]bool{}
					for _, v := range vs {
						if !seen[v.Check] {
							res.Violations[v.Check]++
							seen[v.Check] = true
						}
					}
					out.printf("operator model: seed %d FAILED (%s, %d actions, %s) [%d/%d]", seed, sc.Tenant, len(sc.Steps), took, res.Sequences, len(seeds))
					fmt.Fprint(cfg.Stdout, x.report(vs, took))
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range seeds {
		select {
		case work <- s:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return ModelResult{}, ctx.Err()
	}
	tearDown()
	for name, n := range st.unverified() {
		res.Unverified += n
		if n > 0 {
			out.printf("operator model: %s refused to verify %d deliveries (its log says why)", name, n)
		}
	}
	res.Wall = time.Since(out.began).Round(time.Second)
	slices.Sort(res.Failed)
	res.Summary = modelSummary(res, seeds)
	out.printf("%s", st.cpuLine(res.Sequences))
	fmt.Fprintln(cfg.Stdout, res.Summary)
	return res, nil
}

func sumCounts[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// seedList writes seeds compactly: "1..200", or "3,17,42".
func seedList(seeds []uint64) string {
	contiguous := true
	for i := 1; i < len(seeds); i++ {
		contiguous = contiguous && seeds[i] == seeds[i-1]+1
	}
	if contiguous && len(seeds) > 2 {
		return fmt.Sprintf("%d..%d", seeds[0], seeds[len(seeds)-1])
	}
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ",")
}

// actionLabels are the action kinds in the order the summary lists them.
var actionLabels = []string{"mode", "slow", "post", "await", "replay_api", "skip_api", "replay_ui", "skip_ui", "double_click",
	"terminate_event", "terminate_sequencer", "cancel_event", "cancel_sequencer", "reset_event", "reset_sequencer", "pause", "disable", "enable", "delete",
	"void", "void_arrived", "post_voided", "create", "void_race", "outage", "throttle", "kill_workers", "filter", "closing_replay", "closing_skip"}

// actionLabel is the kind a step is counted under in the summary.
func actionLabel(s Step) string {
	switch s.Kind {
	case StepPress:
		if s.Press.UI {
			return s.Press.Button + "_ui"
		}
		return s.Press.Button + "_api"
	case StepDouble:
		return "double_click"
	case StepMode:
		if s.Mode == ModeSlow {
			return "slow"
		}
	case StepVoid:
		if s.Arrived > 0 {
			return "void_arrived"
		}
	case StepPost:
		if s.Voided {
			return "post_voided"
		}
	case StepTerminate, StepReset, StepCancel:
		if s.Seq == 0 {
			return string(s.Kind) + "_sequencer"
		}
		return string(s.Kind) + "_event"
	}
	return string(s.Kind)
}

// stopAnswer is what a press of Terminate or Request Cancellation answered:
// done, or why not.
func stopAnswer(err error, done string) string {
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return "not running"
	case err != nil:
		return "error: " + err.Error()
	}
	return done
}

// modelSummary is the run's one summary line: sequences, actions by kind,
// violations by check, the failed seeds.
func modelSummary(r ModelResult, seeds []uint64) string {
	total := 0
	var acts []string
	for _, l := range actionLabels {
		total += r.Actions[l]
		acts = append(acts, fmt.Sprintf("%s=%d", l, r.Actions[l]))
	}
	var viol []string
	for _, c := range append(slices.Clone(modelChecks), "not_carried_out") {
		if n := r.Violations[c]; n > 0 || c != "not_carried_out" {
			viol = append(viol, fmt.Sprintf("%s=%d", c, n))
		}
	}
	failed := "none"
	if len(r.Failed) > 0 {
		failed = seedList(r.Failed)
	}
	var tenants []string
	for _, t := range slices.Sorted(maps.Keys(r.Tenants)) {
		tenants = append(tenants, fmt.Sprintf("%s:%d/%d", t, r.Passed[t], r.Tenants[t]))
	}
	return fmt.Sprintf("operator_model sequences=%d failed=%d unverified=%d tenants=%d passed_per_tenant=%s actions=%d (%s) violations (sequences failing each check): %s failed_seeds=%s seeds=%s wall=%s",
		r.Sequences, len(r.Failed), r.Unverified, len(r.Tenants), strings.Join(tenants, ","), total, strings.Join(acts, " "), strings.Join(viol, " "), failed, seedList(seeds), r.Wall)
}

// modelExec carries out one scenario on the stack and keeps what the
// operator did and what became of each action.
type modelExec struct {
	st     *stack
	sc     *Scenario
	cfg    ModelConfig
	logger *slog.Logger

	mu  sync.Mutex
	rec ModelRecord
	// api is the client of the scenario's tenant's key; base is the index
	// of its tenant's first endpoint of the stack: the scenario's endpoint
	// ep points at the stack's endpoint base+ep's path (its receiver, its
	// secret), where the proxy knows its tenant.
	api  *hfclient.Client
	base int
	// endpoints are the scenario's own endpoints' ids, by index; deleted
	// those it deleted, paused those it disabled and has not enabled.
	endpoints       []string
	deleted, paused [modelEndpoints]bool
	// filters are the endpoints' filters as hookflow last answered them
	// set: each post records them, and is held to them.
	filters [modelEndpoints]*EventFilter
	// done are the action lines with what became of each.
	done []string
	// obs is what the checks read once quiet.
	obs ModelObserved
}

func (x *modelExec) note(line string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.done = append(x.done, line)
}

func (x *modelExec) skipAsked(ds ...Delivery) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range ds {
		x.rec.SkipAsked[d] = true
	}
}

// namingFailed records an unnamed press the API answered wrongly.
func (x *modelExec) namingFailed(format string, args ...any) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.rec.Naming = append(x.rec.Naming, fmt.Sprintf(format, args...))
}

// run carries out the steps, brings the scenario to quiescence as the
// closing operator, and checks it.
func (x *modelExec) run(ctx context.Context) ([]ModelViolation, error) {
	if err := x.createEndpoints(ctx); err != nil {
		return nil, err
	}
	for i, s := range x.sc.Steps {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		began := time.Now()
		what := x.step(ctx, s)
		x.note(fmt.Sprintf("%2d. %s → %s (%s)", i+1, s.Line(), what, time.Since(began).Round(10*time.Millisecond)))
		x.logger.Info("operator model action", "step", i+1, "action", s.Line(), "outcome", what)
	}
	x.st.disrupt.RLock()
	x.closing(ctx)
	obs, err := x.observe(ctx)
	x.st.disrupt.RUnlock()
	if err != nil {
		return nil, err
	}
	x.obs = obs
	vs := CheckModel(x.sc, x.rec, obs)
	if len(vs) == 0 {
		x.deleteEndpoints(ctx)
	}
	return vs, nil
}

// createEndpoints creates the scenario's own endpoints, each at the path
// of the stack's endpoint of its index (its receiver) and with that one's
// secret, which the receiver verifies with; they take only the scenario's
// types, so a pause or a delete touches nothing of another scenario.
// An endpoint the scenario creates later (CreatedLate) has no ID until its
// StepCreate.
func (x *modelExec) createEndpoints(ctx context.Context) error {
	x.endpoints = make([]string, modelEndpoints)
	x.filters = x.sc.Filters
	for ep, late := range x.sc.CreatedLate {
		if late {
			x.rec.Uncreated[ep] = true
			continue
		}
		if err := x.createEndpoint(ctx, ep); err != nil {
			return err
		}
	}
	return nil
}

// createEndpoint creates the scenario's endpoint ep.
func (x *modelExec) createEndpoint(ctx context.Context, ep int) error {
	sub := x.sc.Subscribers()[ep]
	req := hfclient.EndpointCreate{
		URL: x.st.endpoints.proxyBase + Path(x.base+ep), EventTypes: eventTypes(sub.EventTypes), Secret: new(x.st.endpoints.secrets[x.base+ep]),
	}
	if f := x.sc.Filters[ep]; f != nil {
		req.Filter = nullable.NewNullableWithValue(f.JSON())
	}
	r, err := x.api.EndpointCreateWithResponse(ctx, req)
	if err != nil {
		return fmt.Errorf("create the scenario's endpoint %s: %w", sub.Name, err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.endpoints[ep] = r.JSON201.ID
	x.rec.Uncreated[ep] = false
	return nil
}

// deleteEndpoints deletes the endpoints of a scenario that passed, so that
// the stack's sweeps do not walk hundreds of idle ones.
func (x *modelExec) deleteEndpoints(ctx context.Context) {
	for ep, id := range x.endpoints {
		if x.deleted[ep] || id == "" {
			continue
		}
		if _, err := x.api.EndpointDeleteWithResponse(ctx, id, nil); err != nil {
			x.logger.Warn("delete the scenario's endpoint", "endpoint_id", id, "error", err)
		}
	}
}

// report is a failed scenario as printed: the seed and how to replay it,
// the violations, then the actions with what became of each.
func (x *modelExec) report(vs []ModelViolation, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "operator model: FAILED seed=%d in %s (%s; again: hookflow chaos --operator-model --seed %d --sequences 1)\n", x.sc.Seed, x.sc.Tenant, took, x.sc.Seed)
	for _, v := range vs {
		fmt.Fprintf(&b, "  violation %s\n", v)
	}
	fmt.Fprintf(&b, "  scenario:\n")
	for _, l := range x.sc.Lines() {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	fmt.Fprintf(&b, "  what happened:\n")
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, l := range x.done {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	fmt.Fprintf(&b, "  how it ended:\n")
	for _, l := range endLines(x.sc, x.obs) {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}

// workflowID is the Temporal workflow s acts on: its event's, or its
// correlation's sequencer's when it names no sequence.
func (x *modelExec) workflowID(s Step) string {
	if s.Seq == 0 {
		return contract.SequencerID(x.sc.Tenant, x.sc.CorrelationID(s.Corr))
	}
	return x.wf(x.sc.EventID(s.Corr, s.Seq))
}

// wf is the workflow ID of the scenario's event id.
func (x *modelExec) wf(id string) string { return contract.EventWorkflowID(x.sc.Tenant, id) }

// path is the proxy's name of the scenario's delivery d (Delivery): the
// event by its Key, the endpoint by its stack index.
func (x *modelExec) path(d Delivery) Delivery {
	return Delivery{Key(x.sc.Tenant, d.EventID), x.base + d.Endpoint}
}

// step carries out one action and says what became of it.
func (x *modelExec) step(ctx context.Context, s Step) string {
	timeout := 30 * time.Second
	switch {
	case s.Kind == StepOutage:
		timeout = 4 * time.Minute // the Temporal server's restart, after another scenario's outage
	case s.Kind == StepThrottle && s.Cap == 0:
		// The lifting waits for the cap's effect first (throttleEffectWait),
		// which a worker kill or an outage just before can delay by tens of
		// seconds: the step's own 30 s would cut that wait short.
		timeout = throttleEffectWait + 30*time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	id := x.workflowID(s)
	ev := x.sc.EventID(s.Corr, s.Seq)
	switch s.Kind {
	case StepMode:
		x.st.proxy.SetMode(Key(x.sc.Tenant, x.sc.CorrelationID(s.Corr)), x.base+s.Endpoint, s.Mode)
		return "set"
	case StepPost:
		var answers []string
		for _, q := range s.Order {
			answers = append(answers, x.post(ctx, s.Corr, q))
		}
		return strings.Join(answers, ", ")
	case StepAwait:
		return x.await(ctx, Delivery{ev, s.Endpoint}, s.State, x.cfg.RecoveryWindow+6*time.Second)
	case StepPress:
		return x.press(ctx, Delivery{ev, s.Endpoint}, s.Press)
	case StepDouble:
		var answers [2]string
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, p := range [2]Press{s.Press, s.Second} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				answers[i] = x.press(ctx, Delivery{ev, s.Endpoint}, p)
			}()
		}
		close(start)
		wg.Wait()
		return answers[0] + "; " + answers[1]
	case StepTerminate:
		return stopAnswer(x.st.tc.TerminateWorkflow(ctx, id, "", "operator model: Terminate"), "terminated")
	case StepCancel:
		return stopAnswer(x.st.tc.CancelWorkflow(ctx, id, ""), "cancellation requested")
	case StepReset:
		if s.Release > 0 {
			return x.reset(ctx, id, s, Delivery{x.sc.EventID(s.Corr, s.Release), s.Endpoint})
		}
		return x.reset(ctx, id, s, Delivery{})
	case StepPause:
		select {
		case <-ctx.Done():
		case <-time.After(s.For):
		}
		return "done"
	case StepDisable, StepEnable:
		return x.setDisabled(ctx, s.Endpoint, s.Kind == StepDisable)
	case StepDelete:
		return x.deleteEndpoint(ctx, s.Endpoint)
	case StepVoid:
		return x.void(ctx, s)
	case StepCreate:
		return x.createLate(ctx, s.Endpoint)
	case StepVoidRace:
		return x.voidRace(ctx, s)
	case StepOutage:
		return x.outage(ctx, s)
	case StepThrottle:
		return x.throttle(ctx, s)
	case StepFilter:
		return x.setFilter(ctx, s.Endpoint, s.Filter)
	case StepKillWorkers:
		defer x.st.disrupting()()
		killed := 0
		for _, w := range x.st.workers {
			if w.kill() {
				killed++
			}
		}
		return fmt.Sprintf("%d of %d killed", killed, len(x.st.workers))
	}
	return "unknown action"
}

// throttle sets the endpoint's max_in_flight (s.Cap, or null for the
// default), retrying what goes unanswered or 5xx. Before it lifts the cap
// it waits (up to throttleEffectWait) for an event of the scenario to have
// continued as new: how soon a waiting lane's history passes the low
// maximum depends on how often its head asks for its turn, which a loaded
// machine slows, so lifting the cap at a fixed moment would make the
// move's effect, checked after, a matter of the machine's load.
func (x *modelExec) throttle(ctx context.Context, s Step) string {
	if s.Cap == 0 {
		deadline := time.Now().Add(throttleEffectWait)
		// The step's own time bounds the wait too, leaving the lifting its
		// share: a cap left on would hold the lanes past the scenario.
		if d, ok := ctx.Deadline(); ok && d.Add(-10*time.Second).Before(deadline) {
			deadline = d.Add(-10 * time.Second)
		}
		for x.continuedAsNew(ctx) == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	limit := nullable.NewNullNullable[int64]()
	if s.Cap > 0 {
		limit = nullable.NewNullableWithValue(int64(s.Cap))
	}
	code, _, err := untilAnswered(http.StatusOK, func() error {
		_, err := x.api.EndpointUpdateWithResponse(ctx, x.endpoints[s.Endpoint], nil, hfclient.EndpointUpdate{MaxInFlight: limit})
		return err
	})
	_, err = answered(err, http.StatusOK)
	if s.Cap > 0 {
		return answer(code, err)
	}
	n := x.continuedAsNew(ctx)
	x.mu.Lock()
	x.rec.ContinuedAsNew = append(x.rec.ContinuedAsNew, n)
	x.mu.Unlock()
	return fmt.Sprintf("%s; %d of the scenario's events have continued as new", answer(code, err), n)
}

// createLate creates endpoint ep mid-scenario (StepCreate), retrying what
// goes unanswered or 5xx. One it could not create is a violation: the
// posts after it would owe it nothing, and the move would check nothing.
func (x *modelExec) createLate(ctx context.Context, ep int) string {
	var err error
	_, tries, _ := untilAnswered(http.StatusCreated, func() error {
		err = x.createEndpoint(ctx, ep)
		return err
	})
	if err != nil {
		x.mu.Lock()
		defer x.mu.Unlock()
		x.rec.CreateFailed = append(x.rec.CreateFailed, fmt.Sprintf("e%d was not created (%d tries): %v", ep, tries, err))
		return err.Error()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return fmt.Sprintf("created %s (try %d)", x.endpoints[ep], tries)
}

// throttleEffectWait bounds how long the throttle move keeps its cap
// waiting for an event to continue as new: far past the few seconds a
// lane's head takes to pass the stack's low maximum history, so only a lane
// that stopped asking for its turn reaches it.
const throttleEffectWait = 90 * time.Second

// continuedAsNew counts the scenario's events whose workflow's latest run
// was started by a continue-as-new: a lane waiting its turn at a capped
// endpoint is parked, and so lets its event continue as new.
func (x *modelExec) continuedAsNew(ctx context.Context) int {
	n := 0
	for k, events := range x.sc.Events {
		for q := int64(1); q <= int64(events); q++ {
			it := x.st.tc.GetWorkflowHistory(ctx, x.wf(x.sc.EventID(k, q)), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			if !it.HasNext() {
				continue
			}
			ev, err := it.Next()
			if err == nil && ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != "" {
				n++
			}
		}
	}
	return n
}

// outage stops the Temporal server for s.For (alone: no other scenario's
// closing or disruption meanwhile, stack.disrupt) and, while it is down, posts s.Order
// all at once in that order, a little apart; then waits for the server to
// be back. The API accepts each post queued, past its start's timeout,
// and its sweep starts them.
func (x *modelExec) outage(ctx context.Context, s Step) string {
	defer x.st.disrupting()()
	t := x.st.temporal
	starts := t.startCount()
	down := t.killFor(s.For)
	answers := make([]string, len(s.Order))
	queued := make([]bool, len(s.Order))
	var wg sync.WaitGroup
	for i, q := range s.Order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 100 * time.Millisecond)
			var o postOutcome
			answers[i], o = x.send(ctx, s.Corr, q)
			queued[i] = o.queued
		}()
	}
	wg.Wait()
	move := OutageMove{Stopped: down, Posts: len(s.Order)}
	for _, q := range queued {
		if q {
			move.Queued++
		}
	}
	x.mu.Lock()
	x.rec.Outages = append(x.rec.Outages, move)
	x.mu.Unlock()
	what := fmt.Sprintf("%s (%d queued)", strings.Join(answers, ", "), move.Queued)
	if !down {
		return "Temporal was not running (restarting); posted " + what
	}
	if err := t.waitNextStart(ctx, starts, "temporal server running", 3*time.Minute); err != nil {
		return fmt.Sprintf("posted %s; Temporal not back: %v", what, err)
	}
	return "posted " + what + "; Temporal back"
}

// voidRace voids s.Order while it posts s.Posts, all at once, and holds
// the answers to the rule: a sequence is voided (200, and its post 409) or
// has arrived (its post 202, and the void 422 naming it), never both, never
// neither.
func (x *modelExec) voidRace(ctx context.Context, s Step) string {
	corr := x.sc.CorrelationID(s.Corr)
	start := make(chan struct{})
	var wg sync.WaitGroup
	var res hfclient.CorrelationVoided
	var voidCode int
	var voidErr error
	var void5xx []int
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		voidCode, _, voidErr = untilAnswered(http.StatusOK, noting5xx(http.StatusOK, &void5xx, func() (err error) {
			r, err := x.api.CorrelationSkipWithResponse(ctx, corr, nil, hfclient.CorrelationSkip{Sequences: s.Order, Note: "operator model: the producer lost it"})
			if err == nil {
				res = *r.JSON200
			}
			return err
		}))
	}()
	answers := make([]string, len(s.Posts))
	outcomes := make([]postOutcome, len(s.Posts))
	for i, q := range s.Posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i], outcomes[i] = x.send(ctx, s.Corr, q)
		}()
	}
	close(start)
	wg.Wait()
	posts5xx := map[int64][]int{}
	for i, q := range s.Posts {
		posts5xx[q] = append(posts5xx[q], outcomes[i].serverErrors...)
	}
	_, voidErr = answered(voidErr, http.StatusOK)
	x.mu.Lock()
	defer x.mu.Unlock()
	var voided []int64
	if voidCode == http.StatusOK {
		voided = append(slices.Clone(res.Voided), res.AlreadyVoided...)
		for _, q := range voided {
			x.rec.Voided[x.sc.EventID(s.Corr, q)] = true
		}
	}
	posts := map[int64]int{}
	for _, q := range s.Order {
		if p, ok := x.rec.Posted[x.sc.EventID(s.Corr, q)]; ok {
			posts[q] = p.Code
		}
	}
	for _, v := range voidRaceViolations(s.Order, voidCode, voidErr, voided, posts) {
		x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d: %s", s.Corr, v))
	}
	for _, v := range voidRace5xx(s.Order, void5xx, posts5xx) {
		x.rec.VoidRace5xx = append(x.rec.VoidRace5xx, fmt.Sprintf("c%d: %s", s.Corr, v))
	}
	return fmt.Sprintf("void %s; posts %s", answer(voidCode, voidErr), strings.Join(answers, ", "))
}

// voidRace5xx names the 5xx answers a void of order racing posts got, at
// any try (void: the void's; posts: each post's, by sequence). The race is
// between the void's and the posts' transactions: a 5xx between them (a
// deadlock) is the race gone wrong even when a retry is answered by the
// rule, so it counts however the last answer went.
func voidRace5xx(order []int64, void []int, posts map[int64][]int) []string {
	var out []string
	if len(void) > 0 {
		out = append(out, fmt.Sprintf("the void of %v racing posts was answered %v at a try", order, void))
	}
	for _, q := range slices.Sorted(maps.Keys(posts)) {
		if len(posts[q]) > 0 {
			out = append(out, fmt.Sprintf("the post of %d racing the void of %v was answered %v at a try", q, order, posts[q]))
		}
	}
	return out
}

// voidRaceViolations holds the answers to a void of order that raced the
// posts of its sequences to the rule: the void answered 200 with every one
// of them voided and each post 409, or 422 with each post accepted (202);
// voidErr is the void's problem, voided the sequences its 200 names (as
// voided or already voided), posts the posts' answers by sequence.
func voidRaceViolations(order []int64, voidCode int, voidErr error, voided []int64, posts map[int64]int) []string {
	var out []string
	switch voidCode {
	case http.StatusOK, http.StatusUnprocessableEntity:
	default:
		return []string{fmt.Sprintf("the void of %v racing posts was answered %d (%v)", order, voidCode, voidErr)}
	}
	for _, q := range order {
		code, posted := posts[q]
		switch {
		case voidCode == http.StatusOK && !slices.Contains(voided, q):
			out = append(out, fmt.Sprintf("the void of %v answered 200 without %d (voided %v)", order, q, voided))
		case voidCode == http.StatusOK && code == http.StatusAccepted:
			out = append(out, fmt.Sprintf("%d was both voided (200) and accepted (202) when its void raced its post", q))
		case voidCode == http.StatusOK && posted && code != http.StatusConflict:
			out = append(out, fmt.Sprintf("%d, voided, was posted at once and answered %d, not 409", q, code))
		case voidCode == http.StatusUnprocessableEntity && code != http.StatusAccepted:
			out = append(out, fmt.Sprintf("the void of %v was refused 422 (%v), yet the post of %d was answered %d", order, voidErr, q, code))
		}
	}
	return out
}

// setDisabled disables or enables endpoint ep (PATCH), retrying what goes
// unanswered or 5xx.
func (x *modelExec) setDisabled(ctx context.Context, ep int, disabled bool) string {
	code, _, err := untilAnswered(http.StatusOK, func() error {
		_, err := x.api.EndpointUpdateWithResponse(ctx, x.endpoints[ep], nil, hfclient.EndpointUpdate{Disabled: &disabled})
		return err
	})
	if code == http.StatusOK {
		x.mu.Lock()
		x.paused[ep] = disabled
		x.mu.Unlock()
	}
	_, err = answered(err, http.StatusOK)
	return answer(code, err)
}

// setFilter sets endpoint ep's filter (PATCH), retrying what goes
// unanswered or 5xx. The posts after it are held to the new filter once it
// is answered 200; one not set is a violation, since those posts would
// check nothing of the change.
func (x *modelExec) setFilter(ctx context.Context, ep int, f *EventFilter) string {
	code, tries, err := untilAnswered(http.StatusOK, func() error {
		_, err := x.api.EndpointUpdateWithResponse(ctx, x.endpoints[ep], nil, hfclient.EndpointUpdate{Filter: nullable.NewNullableWithValue(f.JSON())})
		return err
	})
	_, err = answered(err, http.StatusOK)
	x.mu.Lock()
	defer x.mu.Unlock()
	if code == http.StatusOK {
		x.filters[ep] = f
	} else {
		x.rec.FilterFailed = append(x.rec.FilterFailed, fmt.Sprintf("e%d's filter was not set to %s (%d tries): %s", ep, f, tries, answer(code, err)))
	}
	return answer(code, err)
}

// untilAnswered calls call until it is answered below 500, at most five
// times 300 ms apart, and returns the last answer: its status (ok when call
// returned no error, 0 when no answer came), how many tries it took, and
// call's error as it returned it (a *hfclient.Error carries the problem).
func untilAnswered(ok int, call func() error) (code, tries int, err error) {
	for tries = 1; ; tries++ {
		err = call()
		var transport error
		code, transport = answered(err, ok)
		if transport == nil && code < 500 || tries == 5 {
			return code, tries, err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// noting5xx wraps call for untilAnswered so that each 5xx answer it gets
// is appended to got: untilAnswered retries them, and a rule that must
// see them all the same reads got.
func noting5xx(ok int, got *[]int, call func() error) func() error {
	return func() error {
		err := call()
		if code, _ := answered(err, ok); code >= 500 {
			*got = append(*got, code)
		}
		return err
	}
}

// deleteEndpoint deletes endpoint ep, retrying what goes unanswered or 5xx;
// from the first try on, each of its deliveries may end skipped, and an
// event posted after it must not be routed to it.
func (x *modelExec) deleteEndpoint(ctx context.Context, ep int) string {
	x.mu.Lock()
	x.rec.Deleted[ep] = true
	x.mu.Unlock()
	var res hfclient.EndpointDeleted
	code, tries, err := untilAnswered(http.StatusOK, func() (err error) {
		r, err := x.api.EndpointDeleteWithResponse(ctx, x.endpoints[ep], nil)
		if err == nil {
			res = *r.JSON200
		}
		return err
	})
	deleted := code == http.StatusOK || code == http.StatusNotFound && tries > 1
	if deleted {
		seen := x.st.proxy.SeenOf(x.base + ep)
		x.mu.Lock()
		x.deleted[ep], x.paused[ep] = true, false
		for _, d := range x.eventDeliveries(ep) {
			if seen[x.path(d).EventID] {
				x.rec.SentBeforeDelete[d] = true
			}
		}
		x.mu.Unlock()
	}
	switch {
	case code == http.StatusOK:
		return fmt.Sprintf("200 (%d dead letters skipped)", res.SkippedDeadLetters)
	case deleted:
		return "404 after an unanswered try: deleted"
	}
	_, err = answered(err, http.StatusOK)
	return answer(code, err)
}

// void sends POST /v1/correlations/{id}/skip for s.Order (retrying a 503,
// which asks for the same request again) and holds the answer to the rule:
// 200 when none of them has arrived, 422 naming the one that has.
func (x *modelExec) void(ctx context.Context, s Step) string {
	corr := x.sc.CorrelationID(s.Corr)
	x.mu.Lock()
	var arrived []int64
	for _, q := range s.Order {
		if p, ok := x.rec.Posted[x.sc.EventID(s.Corr, q)]; ok && p.Code == http.StatusAccepted {
			arrived = append(arrived, q)
		}
	}
	x.mu.Unlock()
	var res hfclient.CorrelationVoided
	code, _, err := untilAnswered(http.StatusOK, func() (err error) {
		r, err := x.api.CorrelationSkipWithResponse(ctx, corr, nil, hfclient.CorrelationSkip{Sequences: s.Order, Note: "operator model: the producer lost it"})
		if err == nil {
			res = *r.JSON200
		}
		return err
	})
	if code == 0 {
		return answer(code, err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case code == http.StatusOK && len(arrived) > 0:
		x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d: the void of %v, of which %v arrived, was answered 200 (voided %v)", s.Corr, s.Order, arrived, res.Voided))
	case code == http.StatusOK:
		for _, q := range append(res.Voided, res.AlreadyVoided...) {
			x.rec.Voided[x.sc.EventID(s.Corr, q)] = true
		}
		if got := len(res.Voided) + len(res.AlreadyVoided); got != len(s.Order) {
			x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d: the void of %v answered voided %v and already voided %v", s.Corr, s.Order, res.Voided, res.AlreadyVoided))
		}
	case code == http.StatusUnprocessableEntity && len(arrived) == 0:
		x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d: the void of %v, none of which arrived, was refused 422 (%v)", s.Corr, s.Order, err))
	case code == http.StatusUnprocessableEntity:
		var e *hfclient.Error
		if errors.As(err, &e) {
			for _, q := range arrived {
				if !strings.Contains(e.Detail, fmt.Sprint(q)) {
					x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d: the 422 refusing the void of %v (%s) does not name %d, which arrived", s.Corr, s.Order, e.Detail, q))
				}
			}
		}
	default:
		x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d: the void of %v was answered %d (%v)", s.Corr, s.Order, code, err))
	}
	return answer(code, nil)
}

// post posts one event (retrying what goes unanswered or 5xx), without
// endpoint_id, so hookflow routes it by its type, and returns the API's
// answer.
func (x *modelExec) post(ctx context.Context, k int, seq int64) string {
	line, _ := x.send(ctx, k, seq)
	return line
}

// postOutcome is what became of a post beside its last answer: the 5xx
// answers its retries went past, and whether it was accepted queued (its
// workflow not started, left to the starter's sweep).
type postOutcome struct {
	serverErrors []int
	queued       bool
}

// send is post, with the post's outcome.
func (x *modelExec) send(ctx context.Context, k int, seq int64) (string, postOutcome) {
	id := x.sc.EventID(k, seq)
	body := hfclient.EventCreate{
		ID: id, CorrelationID: x.sc.CorrelationID(k), Sequence: seq,
		Type: x.sc.EventType(x.sc.Types[k][seq-1]), Data: map[string]any{"amount": x.sc.Amount(k, seq)},
	}
	if r := x.sc.Region(k, seq); r != "" {
		body.Metadata = map[string]any{"region": r}
	}
	x.mu.Lock()
	p := Post{DeletedBefore: x.rec.Deleted, Uncreated: x.rec.Uncreated, Filters: x.filters}
	voided := x.rec.Voided[id]
	x.mu.Unlock()
	var out postOutcome
	var acc hfclient.Accepted
	code, _, err := untilAnswered(http.StatusAccepted, noting5xx(http.StatusAccepted, &out.serverErrors, func() (err error) {
		acc, err = x.api.Send(ctx, body)
		return err
	}))
	out.queued = err == nil && acc.State == hfclient.AcceptedStateQueued
	p.Code = code
	_, err = answered(err, http.StatusAccepted)
	last := answer(code, err)
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case voided && p.Code != http.StatusConflict:
		x.rec.Void = append(x.rec.Void, fmt.Sprintf("c%d/%d (%s), voided, was posted again and answered %s, not 409", k, seq, id, last))
	case !voided:
		x.rec.Posted[id] = p
	}
	if out.queued {
		last += " queued"
	}
	return fmt.Sprintf("%d:%s", seq, last), out
}

// ledgerRow is a delivery's row in hookflow's ledger with its dead letter.
type ledgerRow struct {
	State, DeadLetter string
	Generation        int32
}

// rows reads the scenario's deliveries from hookflow's ledger; a delivery
// to an endpoint not of the stack has endpoint index -1.
func (x *modelExec) rows(ctx context.Context) (map[Delivery]ledgerRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var corrs []string
	for k := range x.sc.Events {
		corrs = append(corrs, Key(x.sc.Tenant, x.sc.CorrelationID(k)))
	}
	ds, err := readDeliveries(ctx, x.st.hf, corrs)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	out := make(map[Delivery]ledgerRow, len(ds))
	for _, d := range ds {
		_, id := Split(d.EventID)
		out[Delivery{id, slices.Index(x.endpoints, d.EndpointID)}] = ledgerRow{State: d.State, DeadLetter: d.DeadLetter, Generation: d.Generation}
	}
	return out, nil
}

// filteredOut reads, from hookflow's ledger, the endpoints (indexes; -1
// for one not the scenario's) each of the scenario's events lists as left
// out by their filter.
func (x *modelExec) filteredOut(ctx context.Context) (map[string][]int, error) {
	var corrs []string
	for k := range x.sc.Events {
		corrs = append(corrs, x.sc.CorrelationID(k))
	}
	rows, err := x.st.hf.Query(ctx, "SELECT id, filtered_out FROM events WHERE tenant_id = $1 AND correlation_id = ANY($2) AND filtered_out IS NOT NULL", x.sc.Tenant, corrs)
	if err != nil {
		return nil, fmt.Errorf("read the events' filtered_out: %w", err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID  string
		Out []string
	}])
	if err != nil {
		return nil, fmt.Errorf("read the events' filtered_out: %w", err)
	}
	out := map[string][]int{}
	for _, e := range left {
		for _, id := range e.Out {
			out[e.ID] = append(out[e.ID], slices.Index(x.endpoints, id))
		}
	}
	return out, nil
}

// await waits until delivery d is in state (see the await states), or
// timeout.
func (x *modelExec) await(ctx context.Context, d Delivery, state string, timeout time.Duration) string {
	began := time.Now()
	last := "unknown"
	for {
		rows, err := x.rows(ctx)
		if err == nil {
			r, ok := rows[d]
			last = r.State
			if !ok {
				last = "no such delivery"
			}
			if r.DeadLetter != "" {
				last += ", dead letter " + r.DeadLetter
			}
			switch {
			case state == awaitDeadLettered && r.State == stateDeadLettered && r.DeadLetter == dlOpen,
				state == awaitDelivering && r.State == string(contract.StateDelivering),
				state == awaitFinal && (r.State == stateDelivered || r.State == stateSkipped):
				return fmt.Sprintf("reached after %s (%s)", time.Since(began).Round(100*time.Millisecond), last)
			}
		}
		if time.Since(began) > timeout || ctx.Err() != nil {
			return fmt.Sprintf("not reached within %s (%s)", timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openAt returns the endpoints (indexes) at which event id has an open
// dead letter, in order.
func (x *modelExec) openAt(ctx context.Context, id string) []int {
	rows, err := x.rows(ctx)
	if err != nil {
		return nil
	}
	var out []int
	for ep := range x.endpoints {
		if r, ok := rows[Delivery{id, ep}]; ok && r.DeadLetter == dlOpen {
			out = append(out, ep)
		}
	}
	return out
}

// eventDeliveries returns the scenario's deliveries to endpoint ep, by its
// types and filters.
func (x *modelExec) eventDeliveries(ep int) []Delivery {
	var out []Delivery
	for k, n := range x.sc.Events {
		for q := int64(1); q <= int64(n); q++ {
			if x.sc.Takes(k, q, ep) {
				out = append(out, Delivery{x.sc.EventID(k, q), ep})
			}
		}
	}
	return out
}

// eventLanes returns the deliveries event id has, by the scenario's types
// and filters.
func (x *modelExec) eventLanes(id string) []Delivery {
	var out []Delivery
	for k, n := range x.sc.Events {
		for q := int64(1); q <= int64(n); q++ {
			if x.sc.EventID(k, q) != id {
				continue
			}
			for ep := range modelEndpoints {
				if x.sc.Takes(k, q, ep) {
					out = append(out, Delivery{id, ep})
				}
			}
		}
	}
	return out
}

// press presses one button for delivery d and returns the answer. An
// unnamed press is for the event's one open dead letter: the API must
// answer 422 naming both when two are open (and not when one is), which
// press holds it to when the open dead letters are the same before and
// after the call.
func (x *modelExec) press(ctx context.Context, d Delivery, p Press) string {
	id, ep := d.EventID, x.endpoints[d.Endpoint]
	if !p.UI {
		var before []int
		req := hfclient.Operator{Note: "operator model"}
		if p.Named {
			req.EndpointID = ep
		} else {
			before = x.openAt(ctx, id)
		}
		var err error
		var act hfclient.OperatorAction
		if p.Button == "skip" {
			var r *hfclient.DeadLetterSkipResponse
			if r, err = x.api.DeadLetterSkipWithResponse(ctx, id, nil, req); err == nil {
				act = *r.JSON202
			}
		} else {
			var r *hfclient.DeadLetterReplayResponse
			if r, err = x.api.DeadLetterReplayWithResponse(ctx, id, nil, req); err == nil {
				act = *r.JSON202
			}
		}
		raw := err
		code, err := answered(err, http.StatusAccepted)
		if !p.Named && err == nil {
			x.checkUnnamed(ctx, id, p, before, code, raw)
		}
		if p.Button == "skip" && (err != nil || code == http.StatusAccepted) {
			switch {
			case p.Named:
				x.skipAsked(d)
			case act.EndpointID != "":
				x.skipAsked(Delivery{id, slices.Index(x.endpoints, act.EndpointID)})
			default:
				x.skipAsked(x.eventLanes(id)...)
			}
		}
		what := "API " + p.Button
		if !p.Named {
			what += fmt.Sprintf(" (no endpoint_id; open at %v)", endpointNames(before))
		}
		return what + " " + answer(code, err)
	}
	fields := map[string]any{}
	switch p.Input {
	case InputGeneration, InputStale:
		r, err := x.api.DeadLetterGetWithResponse(ctx, id, &hfclient.DeadLetterGetParams{EndpointID: &ep})
		if err != nil {
			return fmt.Sprintf("UI %s not sent: no dead letter to read the generation of (%v)", p.Button, err)
		}
		g := r.JSON200.Generation
		if p.Input == InputStale {
			if g < 2 {
				return fmt.Sprintf("UI %s not sent: dead letter generation %d has no earlier one", p.Button, g)
			}
			g--
		}
		fields["generation"] = g
	}
	if p.Named {
		fields["endpoint_id"] = ep
	}
	var data string
	if len(fields) > 0 || p.Input != InputNone {
		b, _ := json.Marshal(fields)
		data = string(b)
	}
	req := &workflowservice.SignalWorkflowExecutionRequest{
		Namespace: temporalNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: x.wf(id)},
		SignalName: p.Button, Identity: "operator-model@webui", RequestId: randomHex(16),
	}
	if data != "" {
		req.Input = &commonpb.Payloads{Payloads: []*commonpb.Payload{{
			Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(data),
		}}}
	}
	// The signal may act on the delivery it names, or, unnamed, on the
	// event's one dead-lettered delivery, whichever that is.
	asked := []Delivery{d}
	if !p.Named {
		asked = x.eventLanes(id)
	}
	_, err := x.st.tc.WorkflowService().SignalWorkflowExecution(ctx, req)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return fmt.Sprintf("UI %s %s: not running", p.Button, p.Input)
	case err != nil:
		if p.Button == "skip" && p.Input != InputStale {
			x.skipAsked(asked...)
		}
		return fmt.Sprintf("UI %s %s: error %v", p.Button, p.Input, err)
	}
	if p.Button == "skip" && p.Input != InputStale {
		x.skipAsked(asked...)
	}
	if data == "" {
		data = "no input"
	}
	return fmt.Sprintf("UI %s %s: sent", p.Button, data)
}

// checkUnnamed holds the API's answer (code, and the problem it came with)
// to a press without endpoint_id to the rule: two dead letters open ⇒ 422
// naming both; one ⇒ not 422. It judges a 422 only when the open dead
// letters were the same before and after.
func (x *modelExec) checkUnnamed(ctx context.Context, id string, p Press, before []int, code int, problem error) {
	after := x.openAt(ctx, id)
	if code != http.StatusUnprocessableEntity {
		if len(before) >= 2 && (code == http.StatusAccepted || len(after) >= 2) {
			x.namingFailed("%s without endpoint_id on %s, with dead letters open at %v, was answered %d, not 422", p.Button, id, endpointNames(before), code)
		}
		return
	}
	switch {
	case !slices.Equal(before, after):
	case len(before) < 2:
		x.namingFailed("%s without endpoint_id on %s, with a dead letter open only at %v, was answered 422", p.Button, id, endpointNames(before))
	default:
		var e *hfclient.Error
		if !errors.As(problem, &e) {
			return
		}
		for _, ep := range before {
			if !strings.Contains(e.Detail+fmt.Sprint(e.Extensions), x.endpoints[ep]) {
				x.namingFailed("%s without endpoint_id on %s: the 422 (%s) does not name %s", p.Button, id, e.Detail, x.endpoints[ep])
			}
		}
	}
}

// endpointNames names endpoint indexes as the scenario lines do: [e0 e1].
func endpointNames(eps []int) []string {
	out := make([]string, len(eps))
	for i, ep := range eps {
		out[i] = fmt.Sprintf("e%d", ep)
	}
	return out
}

// reset presses Reset on the workflow's latest run (running or closed),
// back to its s.Task-th completed workflow task (modulo how many it has);
// or, when released names a delivery, back to the task whose update
// released it (s.Task-1 tasks earlier, never the first).
func (x *modelExec) reset(ctx context.Context, id string, s Step, released Delivery) string {
	desc, err := x.st.tc.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return "no such workflow"
	case err != nil:
		return "describe: " + err.Error()
	}
	info := desc.GetWorkflowExecutionInfo()
	runID := info.GetExecution().GetRunId()
	var releasedEP string
	if released.EventID != "" {
		releasedEP = x.endpoints[released.Endpoint]
	}
	tasks, releasedAt, err := taskHistory(ctx, x.st.tc, id, runID, released.EventID, releasedEP)
	if err != nil {
		return err.Error()
	}
	if len(tasks) == 0 {
		return "no completed workflow task yet"
	}
	task := s.Task
	i := (max(task, 1) - 1) % len(tasks)
	if task < 0 {
		i = max(0, len(tasks)+task)
	}
	if released.EventID != "" {
		if releasedAt == 0 {
			return fmt.Sprintf("not reset: the %s run's history has no update that released %s@e%d", workflowStatus(info.GetStatus()), released.EventID, released.Endpoint)
		}
		// The task that released it is the last one completed before its
		// update was accepted.
		j := 0
		for j+1 < len(tasks) && tasks[j+1] < releasedAt {
			j++
		}
		if j == 0 {
			return fmt.Sprintf("not reset: %s@e%d was released in the first workflow task, a Reset to which reloads the ledger", released.EventID, released.Endpoint)
		}
		i = max(1, j-(max(task, 1)-1))
	}
	req := &workflowservice.ResetWorkflowExecutionRequest{
		Namespace: temporalNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason: "operator model: Reset", WorkflowTaskFinishEventId: tasks[i], RequestId: randomHex(16),
	}
	if s.NoReapply {
		req.ResetReapplyExcludeTypes = []enumspb.ResetReapplyExcludeType{
			enumspb.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL, enumspb.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
		}
	}
	_, err = x.st.tc.ResetWorkflowExecution(ctx, req)
	if err != nil {
		return fmt.Sprintf("reset of the %s run refused: %v", workflowStatus(info.GetStatus()), err)
	}
	what := fmt.Sprintf("reset the %s run to event %d (task %d of %d)", workflowStatus(info.GetStatus()), tasks[i], i+1, len(tasks))
	if released.EventID != "" {
		what += fmt.Sprintf("; the update that released %s@e%d was accepted at event %d", released.EventID, released.Endpoint, releasedAt)
	}
	return what
}

// taskHistory reads a run's history once: the event IDs of its completed
// workflow tasks and, when released names an event, the ID of the
// UpdateAccepted event of the first update whose answer released its
// delivery to endpoint (a sequencer's hand-over naming it, in an arrival's
// or a finished delivery's answer), or 0.
func taskHistory(ctx context.Context, tc client.Client, workflowID, runID, released, endpoint string) ([]int64, int64, error) {
	var tasks []int64
	var releasedAt int64
	it := tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, 0, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			tasks = append(tasks, ev.GetEventId())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
			if released == "" || releasedAt != 0 {
				continue
			}
			a := ev.GetWorkflowExecutionUpdateCompletedEventAttributes()
			// contract.Announcement and contract.Handoffs both carry
			// "handoffs".
			for _, p := range a.GetOutcome().GetSuccess().GetPayloads() {
				var hs contract.Handoffs
				if json.Unmarshal(p.GetData(), &hs) != nil {
					continue
				}
				for _, h := range hs.Handoffs {
					if h.EventID == released && slices.ContainsFunc(h.Release.Lanes, func(l contract.LaneRelease) bool { return l.Endpoint == endpoint }) {
						releasedAt = a.GetAcceptedEventId()
					}
				}
			}
		}
	}
	return tasks, releasedAt, nil
}

// closing heals every receiver of the scenario and, as the closing
// operator, replays or skips (as the scenario says, naming the endpoint;
// replays the ones the receiver holds, AckLost) each dead letter still open, until every delivery is delivered or
// skipped with no workflow of its event left running, or until nothing
// more can be done, or Settle.
func (x *modelExec) closing(ctx context.Context) {
	for k := range x.sc.Events {
		for ep := range x.endpoints {
			x.st.proxy.SetMode(Key(x.sc.Tenant, x.sc.CorrelationID(k)), x.base+ep, ModePass)
		}
	}
	x.note("closing: every receiver heals")
	for ep, paused := range x.paused {
		if paused {
			x.note(fmt.Sprintf("closing: enable endpoint e%d → %s", ep, x.setDisabled(ctx, ep, false)))
		}
	}
	began := time.Now()
	deadline := x.settleUntil(began)
	acted := map[Delivery]int32{} // delivery → the generation the closing operator acted on
	times := map[Delivery]int{}
	for ctx.Err() == nil {
		rows, err := x.rows(ctx)
		if err != nil {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		quiet := true
		for k := range x.sc.Events {
			for ep := range x.endpoints {
				// blocked: an earlier delivery of the lane waits on a dead
				// letter the closing operator can do no more for, so the
				// later ones wait too.
				blocked := false
				for _, q := range x.sc.RoutedLane(x.rec, k, ep) {
					id := x.sc.EventID(k, q)
					d := Delivery{id, ep}
					r := rows[d]
					switch {
					case r.State == stateDelivered || r.State == stateSkipped:
						if x.running(ctx, id) {
							quiet = false // a Reset's new run may yet send it
						}
					case r.State == stateDeadLettered && r.DeadLetter == dlOpen && x.deleted[ep]:
						quiet = false // the delete skips it (the API, else the sweep)
					case r.State == stateDeadLettered && r.DeadLetter == dlOpen:
						if acted[d] == r.Generation || times[d] >= 3 {
							blocked = true // nothing more the closing operator can do
							continue
						}
						quiet = false
						acted[d] = r.Generation
						times[d]++
						x.closingPress(ctx, k, q, ep, r.Generation)
					case blocked && r.State == string(contract.StateWaiting):
					default:
						quiet = false // moving, or to be repaired by the sweep
					}
				}
			}
		}
		if quiet && time.Since(began) > time.Second {
			x.note(fmt.Sprintf("closing: quiet after %s", time.Since(began).Round(100*time.Millisecond)))
			break
		}
		if time.Now().After(deadline) {
			x.note(fmt.Sprintf("closing: not quiet within %s", deadline.Sub(began).Round(100*time.Millisecond)))
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	x.st.proxy.Wait(x.cfg.DeliveryTimeout + 5*time.Second)
}

// settleUntil is when a closing that began at began stops waiting for
// quiet: Settle on, or, when a Temporal outage or a worker kill ended not
// long before, until a try of an activity lost in it has timed out and been
// tried again (workflows.LedgerTimeout is the longest such try, and a
// retry's backoff and a workflow task follow it). Such a lane is moving,
// not stranded: an operator's replay taken just before the outage shows
// in the ledger but not yet in the workflow, which sends it on once the
// lost try's timeout is past.
func (x *modelExec) settleUntil(began time.Time) time.Time {
	return later(began.Add(x.cfg.Settle), x.st.disrupted.Add(workflows.LedgerTimeout+15*time.Second))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (x *modelExec) closingPress(ctx context.Context, k int, q int64, ep int, gen int32) {
	id := x.sc.EventID(k, q)
	d := Delivery{id, ep}
	button := x.sc.Closing[k][ep][q-1]
	if button == "skip" && x.st.proxy.AckLost(x.path(d)) {
		// The receiver applied it and its answer was lost: a skip would
		// tell hookflow it never got it, which no operator who looked
		// would do.
		button = "replay"
	}
	var err error
	req := hfclient.Operator{EndpointID: x.endpoints[ep], Note: "operator model: closing"}
	if button == "skip" {
		_, err = x.api.DeadLetterSkipWithResponse(ctx, id, nil, req)
	} else {
		_, err = x.api.DeadLetterReplayWithResponse(ctx, id, nil, req)
	}
	code, err := answered(err, http.StatusAccepted)
	x.mu.Lock()
	if err != nil || code == http.StatusAccepted {
		if button == "skip" {
			x.rec.SkipAsked[d] = true
			x.rec.ClosingSkips[d]++
		} else {
			x.rec.ClosingReplays[d]++
		}
	}
	x.mu.Unlock()
	x.note(fmt.Sprintf("closing: c%d/%d@e%d dead letter generation %d open: API %s %s", k, q, ep, gen, button, answer(code, err)))
}

// running reports whether the event's workflow runs.
func (x *modelExec) running(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	desc, err := x.st.tc.DescribeWorkflowExecution(ctx, x.wf(id), "")
	return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// observe reads what the checks need: hookflow's ledger, each endpoint's
// receiver's (its GET /correlations/{id}, and its ledger in application
// order), the proxy's applied answers and, for each unfinished lane, its
// head's event's workflow.
func (x *modelExec) observe(parent context.Context) (ModelObserved, error) {
	ctx, cancel := context.WithTimeout(parent, time.Minute)
	defer cancel()
	obs := ModelObserved{Deliveries: map[Delivery]ModelEvent{}, Applied: map[Lane][]int64{}, Parked: map[Lane][]int64{}, FilteredOut: map[string][]int{},
		AppliedAnswers: map[Delivery]int{}, Heads: map[Lane]Head{}, EndpointIDs: x.endpoints}
	rows, err := x.rows(ctx)
	if err != nil {
		return obs, err
	}
	for d, r := range rows {
		obs.Deliveries[d] = ModelEvent(r)
	}
	if obs.FilteredOut, err = x.filteredOut(ctx); err != nil {
		return obs, err
	}
	answers := x.st.proxy.AppliedAnswers()
	for k, n := range x.sc.Events {
		corr := x.sc.CorrelationID(k)
		for ep := range x.endpoints {
			lane := Lane{corr, ep}
			for q := int64(1); q <= int64(n); q++ {
				d := Delivery{x.sc.EventID(k, q), ep}
				if a := answers[x.path(d)]; a > 0 {
					obs.AppliedAnswers[d] = a
				}
			}
			rc, code, err := x.st.recv[x.base+ep].correlation(ctx, corr, x.endpoints[ep])
			if err != nil {
				return obs, err
			}
			if code == http.StatusOK {
				obs.Parked[lane] = rc.Parked
			}
			// The receiver's API lists what it applied by sequence; the
			// order it applied them in is its ledger's entry order.
			// The receiver serves every tenant's scenarios, and another
			// tenant's scenario may have this correlation's ID: the lane is
			// this endpoint's.
			erows, err := x.st.rcv[x.base+ep].Query(ctx, "SELECT sequence FROM ledger_entries WHERE endpoint_id = $1 AND correlation_id = $2 ORDER BY entry_no", x.endpoints[ep], corr)
			if err != nil {
				return obs, fmt.Errorf("read the receiver's ledger: %w", err)
			}
			seqs, err := pgx.CollectRows(erows, pgx.RowTo[int64])
			if err != nil {
				return obs, fmt.Errorf("read the receiver's ledger: %w", err)
			}
			if len(seqs) != len(rc.Applied) {
				return obs, fmt.Errorf("receiver e%d of %s: its API lists %d applied, its ledger %d", ep, corr, len(rc.Applied), len(seqs))
			}
			obs.Applied[lane] = seqs

			for _, q := range x.sc.RoutedLane(x.rec, k, ep) {
				id := x.sc.EventID(k, q)
				if s := rows[Delivery{id, ep}].State; s == stateDelivered || s == stateSkipped {
					continue
				}
				h := Head{Next: q, Generation: rows[Delivery{id, ep}].Generation}
				ob := &observer{st: x.st}
				h.Workflow, h.Status, h.QueryErr = ob.headWorkflow(ctx, x.wf(id))
				obs.Heads[lane] = h
				break
			}
		}
	}
	return obs, nil
}
