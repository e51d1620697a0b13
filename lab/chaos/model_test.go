package chaos

import (
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
)

// The same seed gives the same scenario, action for action; other seeds
// give others.
func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	distinct := map[string]bool{}
	for seed := uint64(1); seed <= 50; seed++ {
		a, b := Generate(seed), Generate(seed)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d gave two scenarios:\n%s\n---\n%s", seed, strings.Join(a.Lines(), "\n"), strings.Join(b.Lines(), "\n"))
		}
		distinct[strings.Join(a.Lines()[len(a.Events):], "\n")] = true
	}
	if len(distinct) < 45 {
		t.Errorf("50 seeds gave only %d distinct action sequences", len(distinct))
	}
}

// Every step names a correlation and an event of its scenario, and every
// correlation is posted before anything acts on it.
func TestGenerateStepsAreWellFormed(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 300; seed++ {
		sc := Generate(seed)
		if n := len(sc.Events); n < 1 || n > 2 {
			t.Fatalf("seed %d: %d correlations", seed, n)
		}
		posted := map[int]bool{}
		arrived := map[[2]int64]bool{}
		voided := map[[2]int64]bool{}
		var disabled, deleted [modelEndpoints]bool
		for i, s := range sc.Steps {
			if s.Corr < 0 || s.Corr >= len(sc.Events) || s.Seq < 0 || s.Seq > int64(sc.Events[s.Corr]) {
				t.Fatalf("seed %d step %d targets c%d/%d: %s", seed, i+1, s.Corr, s.Seq, s.Line())
			}
			if s.Endpoint < 0 || s.Endpoint >= modelEndpoints {
				t.Fatalf("seed %d step %d targets e%d: %s", seed, i+1, s.Endpoint, s.Line())
			}
			switch s.Kind {
			case StepPost, StepOutage:
				for _, q := range s.Order {
					key := [2]int64{int64(s.Corr), q}
					switch {
					case q < 1 || q > int64(sc.Events[s.Corr]):
						t.Fatalf("seed %d: %s posts a sequence out of 1..%d", seed, s.Line(), sc.Events[s.Corr])
					case s.Voided != voided[key]:
						t.Fatalf("seed %d step %d: %s, and %d voided is %v", seed, i+1, s.Line(), q, voided[key])
					case !s.Voided && (arrived[key] || q == sc.Lost[s.Corr]):
						t.Fatalf("seed %d step %d: %s posts %d twice, or the lost one", seed, i+1, s.Line(), q)
					}
					arrived[key] = true
				}
				posted[s.Corr] = true
			case StepVoid:
				for _, q := range s.Order {
					if key := [2]int64{int64(s.Corr), q}; q != s.Arrived {
						if q != sc.Lost[s.Corr] || arrived[key] {
							t.Fatalf("seed %d step %d: %s voids %d, not the lost one (%d)", seed, i+1, s.Line(), q, sc.Lost[s.Corr])
						}
						voided[key] = true
					} else if !arrived[key] {
						t.Fatalf("seed %d step %d: %s says %d has arrived; it has not", seed, i+1, s.Line(), q)
					}
				}
			case StepVoidRace:
				for _, q := range s.Posts {
					key := [2]int64{int64(s.Corr), q}
					if q != sc.Lost[s.Corr] && arrived[key] || q < 1 || q > int64(sc.Events[s.Corr]) {
						t.Fatalf("seed %d step %d: %s posts %d twice or out of range", seed, i+1, s.Line(), q)
					}
					arrived[key] = q != sc.Lost[s.Corr]
				}
				if len(s.Order) != 1 || s.Order[0] != sc.Lost[s.Corr] || !slices.Contains(s.Posts, s.Order[0]) {
					t.Fatalf("seed %d step %d: %s races a void of other than the lost one (%d) with its post", seed, i+1, s.Line(), sc.Lost[s.Corr])
				}
				voided[[2]int64{int64(s.Corr), s.Order[0]}] = true
			case StepCreate:
				if !sc.CreatedLate[s.Endpoint] {
					t.Fatalf("seed %d step %d: %s, created with the scenario", seed, i+1, s.Line())
				}
			case StepDisable, StepEnable, StepDelete:
				if deleted[s.Endpoint] || s.Kind != StepDelete && (s.Kind == StepEnable) != disabled[s.Endpoint] {
					t.Fatalf("seed %d step %d: %s with e%d disabled %v, deleted %v", seed, i+1, s.Line(), s.Endpoint, disabled[s.Endpoint], deleted[s.Endpoint])
				}
				disabled[s.Endpoint] = s.Kind == StepDisable
				deleted[s.Endpoint] = s.Kind == StepDelete
			case StepFilter:
				if s.Filter == nil || s.Filter != sc.Refilter[s.Endpoint] {
					t.Fatalf("seed %d step %d: %s, the scenario's change of filter being %v", seed, i+1, s.Line(), sc.Refilter[s.Endpoint])
				}
			case StepMode, StepPause, StepThrottle, StepKillWorkers:
			default:
				if !posted[s.Corr] {
					t.Fatalf("seed %d step %d acts on c%d before its posts: %s", seed, i+1, s.Corr, s.Line())
				}
			}
			presses := map[StepKind][]Press{StepPress: {s.Press}, StepDouble: {s.Press, s.Second}}[s.Kind]
			for _, p := range presses {
				if p.Button != "replay" && p.Button != "skip" {
					t.Fatalf("seed %d: %s presses %q", seed, s.Line(), p.Button)
				}
			}
			if s.Kind == StepReset && s.Task == 0 {
				t.Fatalf("seed %d: %s", seed, s.Line())
			}
		}
		for k, n := range sc.Events {
			for q := int64(1); q <= int64(n); q++ {
				key := [2]int64{int64(k), q}
				if arrived[key] == (q == sc.Lost[k]) && !voided[key] {
					t.Fatalf("seed %d: c%d/%d posted %v, voided %v, lost %v", seed, k, q, arrived[key], voided[key], q == sc.Lost[k])
				}
			}
		}
		if len(sc.Closing) != len(sc.Events) {
			t.Fatalf("seed %d: closing choices for %d of %d correlations", seed, len(sc.Closing), len(sc.Events))
		}
	}
}

// The generator reaches the shapes of an earlier review's defects often enough for
// a short run to meet them: a skip of a head then a Terminate of its
// successor (1), a sequencer reset while its head is in flight then the
// head terminated, and in particular a skip, then (its successor
// delivering) the sequencer reset back to that successor's release
// without the updates since, then the successor terminated (2), an API
// replay racing a raw skip {} (4), a skipped event reset (5).
func TestGenerateReachesTheDefectShapes(t *testing.T) {
	t.Parallel()
	const seeds = 400
	count := shapeCounts(seeds, func(sc *Scenario, found map[string]bool) {
		skipped := map[[2]int64]bool{}
		for i, s := range sc.Steps {
			key := [2]int64{int64(s.Corr), s.Seq}
			switch {
			case s.Kind == StepPress && s.Press.Button == "skip" && !s.Press.UI:
				skipped[key] = true
			case s.Kind == StepTerminate && s.Seq > 1 && skipped[[2]int64{int64(s.Corr), s.Seq - 1}]:
				found["terminate after a skip"] = true
			case s.Kind == StepDouble && !s.Press.UI && s.Press.Button == "replay" && s.Second.UI && s.Second.Button == "skip":
				found["API replay racing a raw skip"] = true
			case s.Kind == StepReset && s.Seq > 0 && skipped[key]:
				found["reset of a skipped event"] = true
			case s.Kind == StepReset && s.Seq == 0 && i+1 < len(sc.Steps) && sc.Steps[i+1].Kind == StepTerminate && sc.Steps[i+1].Seq > 0:
				found["sequencer reset, then its head terminated"] = true
				if s.Release == sc.Steps[i+1].Seq && s.Release > 1 && s.NoReapply && i >= 2 &&
					sc.Steps[i-1].Kind == StepAwait && sc.Steps[i-1].State == awaitDelivering &&
					sc.Steps[i-2].Kind == StepPress && sc.Steps[i-2].Press.Button == "skip" && sc.Steps[i-2].Seq == s.Release-1 {
					found["a skip, then the sequencer reset to before its release of the successor, then the successor terminated"] = true
				}
			}
		}
	})
	for _, shape := range []string{"terminate after a skip", "API replay racing a raw skip", "reset of a skipped event", "sequencer reset, then its head terminated",
		"a skip, then the sequencer reset to before its release of the successor, then the successor terminated"} {
		// A reset of a skipped event needs a skip and then the receiver
		// healed on the same lane: rarer since the actions on endpoints and
		// producers (a sixth of them) joined the lanes' own.
		want := 6
		if shape == "reset of a skipped event" {
			want = 4
		}
		if pct := 100 * count[shape] / seeds; pct < want {
			t.Errorf("%s: in %d%% of the scenarios, want at least %d%%", shape, pct, want)
		} else {
			t.Logf("%s: %d%% of the scenarios", shape, pct)
		}
	}
}

// The proxy's receiver modes: a rejection and an outage never reach the
// receiver; a lost ack reaches it once and drops the answer, and the
// event's next delivery passes.
func TestProxyReceiverModes(t *testing.T) {
	t.Parallel()
	p, url, got := proxySetup(t, time.Second, ProxyFaults{})
	send := func(id, corr string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, url+Path(0), strings.NewReader(`{"correlation_id":"`+corr+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("webhook-id", id)
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	p.SetMode(Key(contract.DefaultTenant, "a"), 0, ModeReject)
	p.SetMode(Key(contract.DefaultTenant, "b"), 0, ModeUnavailable)
	p.SetMode(Key(contract.DefaultTenant, "c"), 0, ModeLoseAck)
	if code, err := send("a-1", "a"); err != nil || code != http.StatusBadRequest {
		t.Errorf("reject: %d %v, want 400", code, err)
	}
	if code, err := send("b-1", "b"); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("unavailable: %d %v, want 503", code, err)
	}
	if got.Load() != 0 {
		t.Fatalf("the receiver got %d deliveries of a rejecting or unavailable receiver", got.Load())
	}
	if _, err := send("c-1", "c"); err == nil {
		t.Error("lost ack: the sender got an answer")
	}
	if code, err := send("c-1", "c"); err != nil || code != http.StatusOK {
		t.Errorf("lost ack, second delivery: %d %v, want 200", code, err)
	}
	if got.Load() != 2 {
		t.Errorf("the receiver got %d deliveries of the lost ack's event, want 2", got.Load())
	}
	p.SetMode(Key(contract.DefaultTenant, "a"), 0, ModePass)
	if code, err := send("a-1", "a"); err != nil || code != http.StatusOK {
		t.Errorf("healed: %d %v, want 200", code, err)
	}
}

// modelFixture is a quiet, clean scenario of one correlation of three
// events, 1 and 2 routed to both endpoints, 3 to e0 alone. At e0: 1
// dead-lettered and skipped, 2 dead-lettered and replayed, 3 delivered; the
// receiver applied 2 and 3. At e1: 1 and 2 delivered and applied.
func modelFixture() (*Scenario, ModelRecord, ModelObserved) {
	sc := &Scenario{Seed: 7, Block: 7, Tenant: contract.DefaultTenant, Events: []int{3}, Types: [][]string{{"model.shared", "model.shared", "model.first"}},
		Closing: [][][]string{{{"replay", "replay", "replay"}, {"replay", "replay", "replay"}}}}
	sc.Lost, sc.Late = []int64{0}, []int{0}
	rec := newModelRecord()
	for q := int64(1); q <= 3; q++ {
		rec.Posted[sc.EventID(0, q)] = Post{Code: http.StatusAccepted}
	}
	rec.SkipAsked[Delivery{sc.EventID(0, 1), 0}] = true
	corr := sc.CorrelationID(0)
	obs := ModelObserved{
		Deliveries: map[Delivery]ModelEvent{
			{sc.EventID(0, 1), 0}: {State: stateSkipped, DeadLetter: dlSkipped, Generation: 1},
			{sc.EventID(0, 2), 0}: {State: stateDelivered, DeadLetter: dlReplayed, Generation: 1},
			{sc.EventID(0, 3), 0}: {State: stateDelivered},
			{sc.EventID(0, 1), 1}: {State: stateDelivered},
			{sc.EventID(0, 2), 1}: {State: stateDelivered},
		},
		Applied: map[Lane][]int64{{corr, 0}: {2, 3}, {corr, 1}: {1, 2}},
		Parked:  map[Lane][]int64{},
		AppliedAnswers: map[Delivery]int{{sc.EventID(0, 2), 0}: 1, {sc.EventID(0, 3), 0}: 1,
			{sc.EventID(0, 1), 1}: 1, {sc.EventID(0, 2), 1}: 1},
		Heads:       map[Lane]Head{},
		EndpointIDs: testEndpoints[:2],
	}
	return sc, rec, obs
}

// filterTwoAtE0 gives the fixture's e0 a filter, amount 50 and more, that
// leaves out event 2 (amount 10): e0's lane is 1 (skipped) and 3, and its
// receiver applies 3 alone, which names 1 as its previous sequence.
func filterTwoAtE0(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
	sc.Filters[0] = &EventFilter{MinAmount: 50}
	sc.Amounts, sc.Regions = [][]int64{{60, 10, 70}}, [][]string{{"eu", "us", "eu"}}
	for q := int64(1); q <= 3; q++ {
		p := rec.Posted[sc.EventID(0, q)]
		p.Filters = sc.Filters
		rec.Posted[sc.EventID(0, q)] = p
	}
	two := sc.EventID(0, 2)
	delete(obs.Deliveries, Delivery{two, 0})
	delete(obs.AppliedAnswers, Delivery{two, 0})
	obs.Applied[lane0(sc)] = []int64{3}
	obs.FilteredOut = map[string][]int{two: {0}}
}

// createE1AfterTwo makes the fixture's e1 an endpoint created between the
// posts of 2 and 3, with 3 of a type it takes: 3 alone is routed to it.
func createE1AfterTwo(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
	sc.CreatedLate[1] = true
	sc.Types[0][2] = "model.shared"
	for q := int64(1); q <= 2; q++ {
		rec.Posted[sc.EventID(0, q)] = Post{Code: http.StatusAccepted, Uncreated: [modelEndpoints]bool{false, true}}
		delete(obs.Deliveries, Delivery{sc.EventID(0, q), 1})
		delete(obs.AppliedAnswers, Delivery{sc.EventID(0, q), 1})
	}
	obs.Deliveries[Delivery{sc.EventID(0, 3), 1}] = ModelEvent{State: stateDelivered}
	obs.AppliedAnswers[Delivery{sc.EventID(0, 3), 1}] = 1
	obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{3}
}

// lane0 is the fixture's lane at e0.
func lane0(sc *Scenario) Lane { return Lane{sc.CorrelationID(0), 0} }

// waitingHead makes the fixture's event 3 wait at e0 on an open dead
// letter that its workflow waits on: not stranded.
func waitingHead(sc *Scenario, obs *ModelObserved) {
	obs.Deliveries[Delivery{sc.EventID(0, 3), 0}] = ModelEvent{State: stateDeadLettered, DeadLetter: dlOpen, Generation: 2}
	obs.Applied[lane0(sc)] = []int64{2}
	delete(obs.AppliedAnswers, Delivery{sc.EventID(0, 3), 0})
	obs.Heads[lane0(sc)] = Head{Next: 3, Generation: 2, Workflow: "running", Status: deadAt(0, 2)}
}

// voidTwo makes the fixture's event 2 a sequence the producer lost and an
// operator voided, into obs: no delivery, e0 applies 3 after the skipped 1,
// e1 applies 1.
func voidTwo(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
	id := sc.EventID(0, 2)
	delete(rec.Posted, id)
	rec.Voided[id] = true
	for ep := range modelEndpoints {
		delete(obs.Deliveries, Delivery{id, ep})
		delete(obs.AppliedAnswers, Delivery{id, ep})
	}
	obs.Applied[lane0(sc)] = []int64{3}
	obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{1}
}

// skipTwoAtE1 deletes e1 after the fixture's events were posted: its
// delivery of 2 ends skipped at its attempt (no dead letter), 1 was
// delivered before.
func skipTwoAtE1(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
	rec.Deleted[1] = true
	obs.Deliveries[Delivery{sc.EventID(0, 2), 1}] = ModelEvent{State: stateSkipped}
	delete(obs.AppliedAnswers, Delivery{sc.EventID(0, 2), 1})
	obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{1}
}

// A voided sequence has no delivery and its lanes apply past it; a deleted
// endpoint's deliveries end skipped without a dead letter, and an event
// posted after the delete is routed to the other endpoint alone.
func TestCheckModelPassesVoidsAndDeletes(t *testing.T) {
	t.Parallel()
	sc, rec, obs := modelFixture()
	voidTwo(sc, &rec, &obs)
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of a scenario with a voided sequence: %v", vs)
	}
	sc, rec, obs = modelFixture()
	skipTwoAtE1(sc, &rec, &obs)
	sc.Types[0][2] = "model.shared" // 3 would go to e1 too, but came after the delete
	rec.Posted[sc.EventID(0, 3)] = Post{Code: http.StatusAccepted, DeletedBefore: rec.Deleted}
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of a scenario with a deleted endpoint: %v", vs)
	}
	// Sent before the delete, applied, its answer lost: skipped at the
	// retry that found the endpoint deleted.
	rec.SentBeforeDelete[Delivery{sc.EventID(0, 2), 1}] = true
	obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{1, 2}
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of a delivery applied before its endpoint's delete, its answer lost: %v", vs)
	}
}

func TestCheckModelPassesACleanScenario(t *testing.T) {
	t.Parallel()
	sc, rec, obs := modelFixture()
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of a clean scenario: %v", vs)
	}
	sc, rec, obs = modelFixture()
	createE1AfterTwo(sc, &rec, &obs)
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of an endpoint created mid-scenario, routed what came after: %v", vs)
	}
	sc, rec, obs = modelFixture()
	waitingHead(sc, &obs)
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of a head waiting on an operator: %v", vs)
	}
	sc, rec, obs = modelFixture()
	filterTwoAtE0(sc, &rec, &obs)
	if vs := CheckModel(sc, rec, obs); len(vs) != 0 {
		t.Fatalf("violations of a lane whose filter left an event out: %v", vs)
	}
}

// A scenario's lanes hold what each endpoint's filter takes, as it stood
// when each event was posted: an event a filter leaves out is in no lane,
// and one posted after a StepFilter is held to the new filter.
func TestScenarioLaneFollowsTheFilters(t *testing.T) {
	t.Parallel()
	sc, _, _ := modelFixture()
	if got := sc.Lane(0, 0); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("e0's lane without a filter: %v", got)
	}
	sc.Filters[0] = &EventFilter{MinAmount: 50}
	sc.Amounts, sc.Regions = [][]int64{{60, 10, 70}}, [][]string{{"eu", "us", "us"}}
	if got := sc.Lane(0, 0); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("e0's lane with amount >= 50 over amounts 60, 10, 70: %v, want [1 3]", got)
	}
	if got := sc.Lane(0, 1); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("e1's lane, which has no filter: %v, want [1 2]", got)
	}
	// 1 posted before the change to region eu, 2 and 3 after.
	sc.Refilter[0] = &EventFilter{Region: "eu"}
	sc.Refiltered = [][]bool{{false, true, true}}
	sc.Regions = [][]string{{"us", "eu", "us"}}
	if got := sc.Lane(0, 0); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("e0's lane across its change of filter: %v, want [1 2]", got)
	}
}

// The generator gives filters to enough scenarios for a short run to meet
// them: a lane a filter leaves an event of its types out of, with an event
// after it that the lane takes (whose previous_sequence must skip it), and
// a filter changed between two posts, the events either side held to their
// own.
func TestGenerateReachesTheFilterShapes(t *testing.T) {
	t.Parallel()
	const seeds = 400
	count := shapeCounts(seeds, func(sc *Scenario, found map[string]bool) {
		for k, n := range sc.Events {
			left := false
			for q := int64(1); q <= int64(n); q++ {
				wants := ModelSubscribers()[0].Wants(sc.Types[k][q-1])
				switch {
				case wants && !sc.Takes(k, q, 0):
					left = true
				case wants && left:
					found["an event left out by a filter, then one taken"] = true
				}
				if sc.Refiltered != nil && sc.Refiltered[k][q-1] && sc.Filters[0].Takes(sc.Amount(k, q), sc.Region(k, q)) != sc.Refilter[0].Takes(sc.Amount(k, q), sc.Region(k, q)) {
					found["an event posted after a change of filter that the old one would have routed otherwise"] = true
				}
			}
		}
		for _, s := range sc.Steps {
			if s.Kind == StepFilter {
				found["a filter changed"] = true
			}
		}
	})
	for _, shape := range []string{"an event left out by a filter, then one taken", "a filter changed",
		"an event posted after a change of filter that the old one would have routed otherwise"} {
		if pct := 100 * count[shape] / seeds; pct < 3 {
			t.Errorf("%s: in %d%% of the scenarios, want at least 3%%", shape, pct)
		} else {
			t.Logf("%s: %d%% of the scenarios", shape, pct)
		}
	}
}

// Each kind of violation is flagged by its check.
func TestCheckModelFlagsEachViolation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		change func(sc *Scenario, rec *ModelRecord, obs *ModelObserved)
		check  string
		detail string
	}{
		{"a skipped event applied", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Applied[lane0(sc)] = []int64{2, 3, 1}
		}, CheckSkippedApplied, "c0/1"},
		{"a skip nobody asked for", func(sc *Scenario, rec *ModelRecord, _ *ModelObserved) {
			delete(rec.SkipAsked, Delivery{sc.EventID(0, 1), 0})
		}, CheckSkippedApplied, "no operator asked"},
		{"a delivered event never applied", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Applied[lane0(sc)] = []int64{2}
		}, CheckExactlyOnce, "never applied"},
		{"an event applied twice", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.AppliedAnswers[Delivery{sc.EventID(0, 3), 0}] = 2
		}, CheckExactlyOnce, "applied 1 times (the receiver answered \"applied\" 2 times)"},
		{"out of order", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Applied[lane0(sc)] = []int64{3, 2}
		}, CheckOrder, "applied sequence 3 after 0"},
		{"applied an event of another lane", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{1, 2, 3}
		}, CheckOrder, "which is not of its lane"},
		{"routed to an endpoint that does not subscribe", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Deliveries[Delivery{sc.EventID(0, 3), 1}] = ModelEvent{State: stateDelivered}
		}, CheckExactlyOnce, "routed to e1 is true, subscribed false"},
		{"a 422 for one open dead letter", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.Naming = append(rec.Naming, "skip without endpoint_id on x, with a dead letter open only at [e0], was answered 422")
		}, CheckNaming, "answered 422"},
		{"a gap no skip explains", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Deliveries[Delivery{sc.EventID(0, 1), 0}] = ModelEvent{State: stateDelivered}
			obs.Applied[lane0(sc)] = []int64{1, 3}
			obs.AppliedAnswers[Delivery{sc.EventID(0, 1), 0}] = 1
		}, CheckOrder, "applied sequence 3 after 1"},
		{"left parked at the receiver", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Parked[lane0(sc)] = []int64{3}
		}, CheckOrder, "parked"},
		{"skipped, row says replayed", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Deliveries[Delivery{sc.EventID(0, 1), 0}] = ModelEvent{State: stateSkipped, DeadLetter: dlReplayed, Generation: 1}
		}, CheckDeadLetter, "ended skipped, but its dead letter row says replayed"},
		{"delivered, row still open", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			obs.Deliveries[Delivery{sc.EventID(0, 2), 0}] = ModelEvent{State: stateDelivered, DeadLetter: dlOpen, Generation: 1}
		}, CheckDeadLetter, "delivered, but its dead letter row says open"},
		{"dead-lettered, row claimed", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			waitingHead(sc, obs)
			obs.Deliveries[Delivery{sc.EventID(0, 3), 0}] = ModelEvent{State: stateDeadLettered, DeadLetter: dlReplayed, Generation: 2}
		}, CheckDeadLetter, "waits dead-lettered, but its dead letter row says replayed"},
		{"head delivering with nothing to move it", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			waitingHead(sc, obs)
			obs.Deliveries[Delivery{sc.EventID(0, 3), 0}] = ModelEvent{State: "delivering"}
			obs.Heads[lane0(sc)] = Head{Next: 3, Workflow: "running", Status: contract.EventStatus{State: contract.StateWaiting}}
		}, CheckStranded, "om-7-c0-3 is delivering"},
		{"head's workflow terminated", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			waitingHead(sc, obs)
			obs.Heads[lane0(sc)] = Head{Next: 3, Generation: 2, Workflow: "terminated"}
		}, CheckStranded, "its workflow is terminated"},
		{"head's workflow waits on another generation", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			waitingHead(sc, obs)
			obs.Heads[lane0(sc)] = Head{Next: 3, Generation: 2, Workflow: "running", Status: deadAt(0, 1)}
		}, CheckStranded, "generation 2 open"},
		{"head's workflow says the other lane waits", func(sc *Scenario, _ *ModelRecord, obs *ModelObserved) {
			waitingHead(sc, obs)
			obs.Heads[lane0(sc)] = Head{Next: 3, Generation: 2, Workflow: "running", Status: deadAt(1, 2)}
		}, CheckStranded, "generation 2 open"},
		{"a voided sequence delivered", func(sc *Scenario, rec *ModelRecord, _ *ModelObserved) {
			voidTwo(sc, rec, &ModelObserved{Deliveries: map[Delivery]ModelEvent{}, Applied: map[Lane][]int64{}})
		}, CheckVoided, "was voided, yet it has a delivery to e0"},
		{"a void answered against the rule", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.Void = append(rec.Void, "c0/2, voided, was posted again and answered 202, not 409")
		}, CheckVoided, "not 409"},
		{"routed to an endpoint deleted before the post", func(sc *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.Deleted[1] = true
			rec.Posted[sc.EventID(0, 2)] = Post{Code: http.StatusAccepted, DeletedBefore: [modelEndpoints]bool{false, true}}
		}, CheckExactlyOnce, "posted after e1 was deleted, was routed to it"},
		{"a deleted endpoint's lane left unfinished", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			rec.Deleted[1] = true
			obs.Deliveries[Delivery{sc.EventID(0, 2), 1}] = ModelEvent{State: string(contract.StateWaiting)}
			obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{1}
			delete(obs.AppliedAnswers, Delivery{sc.EventID(0, 2), 1})
		}, CheckStranded, "its endpoint was deleted, yet deliveries of its lane are unfinished: 2 waiting"},
		{"skipped yet applied at a deleted endpoint, not sent before the delete", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			skipTwoAtE1(sc, rec, obs)
			obs.Applied[Lane{sc.CorrelationID(0), 1}] = []int64{1, 2}
		}, CheckSkippedApplied, "c0/2@e1 (om-7-c0-2) ended skipped, yet the receiver applied it"},
		{"skipped with no dead letter at an endpoint not deleted", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			skipTwoAtE1(sc, rec, obs)
			rec.Deleted[1] = false
			rec.SkipAsked[Delivery{sc.EventID(0, 2), 1}] = true
		}, CheckDeadLetter, "ended skipped, but its dead letter row says nothing"},
		{"replayed by the closing operator, still dead-lettered", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			waitingHead(sc, obs)
			rec.ClosingReplays[Delivery{sc.EventID(0, 3), 0}] = 3
		}, CheckUnfinished, "after the closing operator's 3 replays"},
		{"an event left out by a filter routed all the same", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			filterTwoAtE0(sc, rec, obs)
			obs.Deliveries[Delivery{sc.EventID(0, 2), 0}] = ModelEvent{State: stateDelivered}
		}, CheckExactlyOnce, "routed to e0 is true, subscribed true, its filter then amount >= 50"},
		{"an event left out by a filter not listed in its filtered_out", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			filterTwoAtE0(sc, rec, obs)
			obs.FilteredOut = map[string][]int{}
		}, CheckExactlyOnce, "its filtered_out lists e0 is false"},
		{"an event a filter takes listed in its filtered_out", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			filterTwoAtE0(sc, rec, obs)
			obs.FilteredOut[sc.EventID(0, 3)] = []int{0}
		}, CheckExactlyOnce, "its filtered_out lists e0 is true"},
		{"an event left out by a filter applied", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			filterTwoAtE0(sc, rec, obs)
			obs.Applied[lane0(sc)] = []int64{2, 3}
		}, CheckOrder, "which is not of its lane"},
		{"a lane parked on an event its filter left out", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			filterTwoAtE0(sc, rec, obs)
			obs.Applied[lane0(sc)] = nil
			obs.Parked[lane0(sc)] = []int64{3}
		}, CheckOrder, "parked"},
		{"a change of filter not set", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.FilterFailed = append(rec.FilterFailed, "e0's filter was not set to region eu (5 tries): 503")
		}, CheckFilterFailed, "not set"},
		{"a void race answered 5xx at a try", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.VoidRace5xx = append(rec.VoidRace5xx, "c0: the void of [2] racing posts was answered [500] at a try")
		}, CheckVoidRace5xx, "[500]"},
		{"an endpoint created mid-scenario not created", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.CreateFailed = append(rec.CreateFailed, "e1 was not created (5 tries): 503")
		}, CheckCreateFailed, "e1 was not created"},
		{"an endpoint created mid-scenario routed nothing", func(sc *Scenario, rec *ModelRecord, obs *ModelObserved) {
			createE1AfterTwo(sc, rec, obs)
			delete(obs.Deliveries, Delivery{sc.EventID(0, 3), 1})
			delete(obs.AppliedAnswers, Delivery{sc.EventID(0, 3), 1})
			obs.Applied[Lane{sc.CorrelationID(0), 1}] = nil
		}, CheckCreateEffect, "none of the 1 deliveries owed"},
		{"a throttle with no continue-as-new", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.ContinuedAsNew = append(rec.ContinuedAsNew, 0)
		}, CheckThrottleEffect, "none of the scenario's events had continued as new"},
		{"an outage with nothing queued", func(_ *Scenario, rec *ModelRecord, _ *ModelObserved) {
			rec.Outages = append(rec.Outages, OutageMove{Stopped: true, Posts: 3})
		}, CheckOutageEffect, "none of its 3 posts was answered queued"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sc, rec, obs := modelFixture()
			c.change(sc, &rec, &obs)
			vs := CheckModel(sc, rec, obs)
			for _, v := range vs {
				if v.Check == c.check && strings.Contains(v.Detail, c.detail) {
					return
				}
			}
			t.Errorf("want a %s violation mentioning %q; got %v", c.check, c.detail, vs)
		})
	}
}

// The summary line counts sequences, actions by kind, violations by
// check, and the deliveries a receiver refused to verify.
func TestModelSummary(t *testing.T) {
	t.Parallel()
	r := ModelResult{Sequences: 3, Failed: []uint64{5}, Actions: map[string]int{"skip_api": 2, "reset_event": 1},
		Violations: map[string]int{CheckDeadLetter: 1}, Unverified: 2, Wall: time.Minute}
	s := modelSummary(r, []uint64{4, 5, 6})
	for _, want := range []string{"sequences=3 ", "failed=1 ", "unverified=2 ", "actions=3 ", "skip_api=2", "reset_event=1", "dead_letter_status=1", "stranded=0",
		"void_race_5xx=0", "create_failed=0", "create_no_effect=0", "throttle_no_effect=0", "outage_no_effect=0", "filter_failed=0", "failed_seeds=5 ", "seeds=4..6 "} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q: %s", want, s)
		}
	}
}

// The generator reaches fan-out's operator shapes often enough for a short
// run to meet them: presses that name the endpoint and presses that do
// not, raw signals with {"endpoint_id": …}, and, with the same event
// dead-lettered at both endpoints, a press without endpoint_id (refused,
// or ignored) followed by one that names it.
func TestGenerateReachesTheFanOutShapes(t *testing.T) {
	t.Parallel()
	const seeds = 400
	count := shapeCounts(seeds, func(sc *Scenario, found map[string]bool) {
		for i, s := range sc.Steps {
			if s.Kind != StepPress && s.Kind != StepDouble {
				continue
			}
			switch {
			case s.Press.UI && s.Press.Named:
				found["a signal naming the endpoint"] = true
			case !s.Press.UI && !s.Press.Named:
				found["an API press without endpoint_id"] = true
			}
			if s.Endpoint == 1 {
				found["a press at e1"] = true
			}
			if s.Kind == StepPress && !s.Press.Named && i+1 < len(sc.Steps) {
				n := sc.Steps[i+1]
				if n.Kind == StepPress && n.Press.Named && n.Corr == s.Corr && n.Seq == s.Seq {
					found["an unnamed press, then a named one, on one event"] = true
				}
			}
		}
	})
	for _, shape := range []string{"a signal naming the endpoint", "an API press without endpoint_id", "a press at e1",
		"an unnamed press, then a named one, on one event"} {
		if pct := 100 * count[shape] / seeds; pct < 3 {
			t.Errorf("%s: in %d%% of the scenarios, want at least 3%%", shape, pct)
		} else {
			t.Logf("%s: %d%% of the scenarios", shape, pct)
		}
	}
}

// shapeCounts counts, per shape, the scenarios of seeds 1..seeds in which
// find finds it.
func shapeCounts(seeds int, find func(sc *Scenario, found map[string]bool)) map[string]int {
	count := map[string]int{}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		found := map[string]bool{}
		find(Generate(seed), found)
		for k := range found {
			count[k]++
		}
	}
	return count
}

// The generator reaches the shapes of a paused, a slow and a deleted
// endpoint and of a lost sequence often enough for a short run to meet
// them: events posted into a paused endpoint, then the endpoint enabled;
// events posted after an endpoint's delete; a lost sequence voided, a void
// refused for one that arrived, a voided sequence posted after all; a slow
// receiver.
func TestGenerateReachesTheEndpointAndProducerShapes(t *testing.T) {
	t.Parallel()
	const seeds = 400
	count := shapeCounts(seeds, func(sc *Scenario, found map[string]bool) {
		var paused, deleted [modelEndpoints]bool
		for _, s := range sc.Steps {
			switch s.Kind {
			case StepDisable:
				paused[s.Endpoint] = true
			case StepEnable:
				if paused[s.Endpoint] && found["a post into a paused endpoint"] {
					found["a post into a paused endpoint, then enabled"] = true
				}
				paused[s.Endpoint] = false
			case StepDelete:
				deleted[s.Endpoint] = true
				found["an endpoint deleted"] = true
			case StepPost:
				if s.Voided {
					found["a voided sequence posted"] = true
				}
				for ep := range paused {
					if paused[ep] && len(sc.Lane(s.Corr, ep)) > 0 {
						found["a post into a paused endpoint"] = true
					}
					if deleted[ep] {
						found["a post after a delete"] = true
					}
				}
			case StepVoid:
				if s.Arrived > 0 {
					found["a void refused"] = true
				} else {
					found["a lost sequence voided"] = true
				}
			case StepMode:
				if s.Mode == ModeSlow {
					found["a slow receiver"] = true
				}
			}
		}
	})
	for _, shape := range []string{"a post into a paused endpoint, then enabled", "an endpoint deleted", "a post after a delete",
		"a lost sequence voided", "a void refused", "a voided sequence posted", "a slow receiver"} {
		if pct := 100 * count[shape] / seeds; pct < 3 {
			t.Errorf("%s: in %d%% of the scenarios, want at least 3%%", shape, pct)
		} else {
			t.Logf("%s: %d%% of the scenarios", shape, pct)
		}
	}
}

// The short run's fixed seeds press every button the generator has, so
// that make test meets each kind of action on a real stack.
func TestModelShortPressesEveryButton(t *testing.T) {
	t.Parallel()
	met := map[string]bool{}
	for _, seed := range ModelShort().Seeds {
		for _, s := range Generate(seed).Steps {
			met[actionLabel(s)] = true
		}
	}
	for _, l := range actionLabels {
		if !met[l] && l != "closing_replay" && l != "closing_skip" {
			t.Errorf("no scenario of the short run's seeds has a %s action", l)
		}
	}
}

// A void racing the post of its sequence: one of them wins, never both,
// never neither.
func TestVoidRaceViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		code     int
		voided   []int64
		post     int
		violates bool
	}{
		{"the void wins", http.StatusOK, []int64{3}, http.StatusConflict, false},
		{"the post wins", http.StatusUnprocessableEntity, nil, http.StatusAccepted, false},
		{"both win", http.StatusOK, []int64{3}, http.StatusAccepted, true},
		{"neither wins", http.StatusUnprocessableEntity, nil, http.StatusConflict, true},
		{"a 200 that voids nothing", http.StatusOK, nil, http.StatusConflict, true},
		{"the voided post answered 200", http.StatusOK, []int64{3}, http.StatusOK, true},
		{"the void unanswered", http.StatusServiceUnavailable, nil, http.StatusAccepted, true},
	}
	for _, c := range cases {
		vs := voidRaceViolations([]int64{3}, c.code, nil, c.voided, map[int64]int{3: c.post})
		if (len(vs) > 0) != c.violates {
			t.Errorf("%s: violations %q, want some: %v", c.name, vs, c.violates)
		}
	}
}

// A 5xx at any try of a void race breaks its rule, however the retry was
// answered: the void's, or a post's.
func TestVoidRace5xx(t *testing.T) {
	t.Parallel()
	if vs := voidRace5xx([]int64{3}, nil, map[int64][]int{3: nil, 4: nil}); len(vs) != 0 {
		t.Errorf("a race answered below 500 throughout: %q", vs)
	}
	if vs := voidRace5xx([]int64{3}, []int{http.StatusInternalServerError}, nil); len(vs) != 1 || !strings.Contains(vs[0], "the void of [3]") {
		t.Errorf("the void answered 500, then by the rule: %q", vs)
	}
	if vs := voidRace5xx([]int64{3}, nil, map[int64][]int{3: nil, 4: {http.StatusServiceUnavailable}}); len(vs) != 1 || !strings.Contains(vs[0], "the post of 4") {
		t.Errorf("the post of 4 answered 503, then 202: %q", vs)
	}
}

// noting5xx sees the 5xx answers untilAnswered retries past, and nothing
// else.
func TestNoting5xxSeesRetried5xx(t *testing.T) {
	t.Parallel()
	answers := []error{&hfclient.Error{Status: http.StatusInternalServerError}, &hfclient.Error{Status: http.StatusConflict}}
	var got []int
	code, tries, _ := untilAnswered(http.StatusOK, noting5xx(http.StatusOK, &got, func() error {
		err := answers[0]
		answers = answers[1:]
		return err
	}))
	if code != http.StatusConflict || tries != 2 || !slices.Equal(got, []int{http.StatusInternalServerError}) {
		t.Errorf("answered %d after %d tries, 5xx seen %v; want 409 after 2, [500]", code, tries, got)
	}
}
