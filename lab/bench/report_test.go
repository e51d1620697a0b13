package bench

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A command name with spaces and a ')' must not shift the fields.
	line := "4242 (my (odd) cmd) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 9 0 12345 1000 200"
	st, err := parseStat(line)
	require.NoError(t, err)
	require.Equal(t, 17, st.ppid)
	require.InDelta(t, 3.8, st.cpu, 1e-9)
	require.InDelta(t, 0, st.reaped, 1e-9)

	self, err := readStat(os.Getpid())
	require.NoError(t, err)
	require.Equal(t, os.Getppid(), self.ppid)
}

func TestPercentiles(t *testing.T) {
	t.Parallel()
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	l := percentiles(d)
	require.Equal(t, Latency{P50: 50, P95: 95, P99: 99, Max: 100}, l)
	require.Equal(t, Latency{}, percentiles(nil))
	require.Equal(t, Latency{P50: 7, P95: 7, P99: 7, Max: 7}, percentiles([]time.Duration{7 * time.Millisecond}))
}

func TestSample(t *testing.T) {
	t.Parallel()
	ids := []string{"a", "b", "c", "d", "e", "f"}
	require.Equal(t, ids, sample(ids, 10))
	require.Equal(t, []string{"a", "c", "e"}, sample(ids, 3))
}

func TestRatios(t *testing.T) {
	t.Parallel()
	require.InDelta(t, 2, ratio(10, 5), 1e-9)
	require.Zero(t, ratio(10, 0), "no baseline figure: no ratio")
	require.Zero(t, ratio(10, -1))

	base := ScenarioResult{EventsPerSec: 20, DeliveriesPerSec: 20, ActionsPerDelivery: 2}
	fast := ScenarioResult{EventsPerSec: 40, DeliveriesPerSec: 40, ActionsPerDelivery: 2.5}
	ordered := ScenarioResult{EventsPerSec: 30, DeliveriesPerSec: 30, ActionsPerDelivery: 5}
	// Three webhooks per event: compared webhook for webhook.
	fanOut := ScenarioResult{EventsPerSec: 10, DeliveriesPerSec: 30, ActionsPerDelivery: 3}
	relate(&base, &fast, &base, &fast, &ordered, &fanOut)
	require.InDelta(t, 1, base.VsBaseline, 1e-9)
	require.InDelta(t, 0.5, base.VsBaselineFast, 1e-9)
	require.InDelta(t, 2, fast.VsBaseline, 1e-9)
	require.InDelta(t, 1, fast.VsBaselineFast, 1e-9)
	require.InDelta(t, 1.5, ordered.VsBaseline, 1e-9)
	require.InDelta(t, 0.75, ordered.VsBaselineFast, 1e-9)
	require.InDelta(t, 1.5, fanOut.VsBaseline, 1e-9)
	require.InDelta(t, 1, base.ActionsVsBaseline, 1e-9)
	require.InDelta(t, 2.5, ordered.ActionsVsBaseline, 1e-9)
	require.InDelta(t, 2, ordered.ActionsVsBaselineFast, 1e-9)
	require.InDelta(t, 1.5, fanOut.ActionsVsBaseline, 1e-9)
	idle := ScenarioResult{DeliveriesPerSec: 30}
	relate(&base, &fast, &idle)
	require.Zero(t, idle.ActionsVsBaseline, "no actions counted: no ratio")

	// Rounds pair by number; a missing or empty denominator gives 0.
	num := []RoundResult{{Round: 1, DeliveriesPerSec: 10}, {Round: 2, DeliveriesPerSec: 12}, {Round: 3, DeliveriesPerSec: 9}}
	den := []RoundResult{{Round: 2, DeliveriesPerSec: 6}, {Round: 1, DeliveriesPerSec: 20}}
	require.Equal(t, []float64{0.5, 2, 0}, perRound(num, den))
	require.Empty(t, perRound(nil, den))
}

func TestFormatRatios(t *testing.T) {
	t.Parallel()
	require.Equal(t, "-", times(0))
	require.Equal(t, "1.25×", times(1.25))
	require.Equal(t, "0.50×, -, 2.00×", joinRatios([]float64{0.5, 0, 2}))
	require.Equal(t, "-", joinRatios(nil))
	require.Equal(t, "-", at([]float64{1}, 1))
}

// sampleReport is a finished run's report with every row filled in.
func sampleReport() *Report {
	rounds := func(v ...float64) []RoundResult {
		out := make([]RoundResult, len(v))
		for i, x := range v {
			out[i] = RoundResult{Round: i + 1, Events: 100, Delivered: 100, Deliveries: 100, EventsPerSec: x, DeliveriesPerSec: x}
		}
		return out
	}
	cpu := map[string]float64{"app": 5, procTemporal: 30, procPostgres: 20, procReceiver: 1}
	lat := Latency{P50: 20, P95: 40, P99: 50, Max: 60}
	rep := &Report{
		Settings: Settings{Events: 200, Concurrency: 16, Correlations: 50, Rounds: 2, IdleEvents: 10},
		Scenarios: []ScenarioResult{
			{Name: ScenarioBaseline, Events: 200, Delivered: 200, Deliveries: 200, EventsPerSec: 20, DeliveriesPerSec: 20, LatencyMS: lat, CPUPer1000: cpu, Rounds: rounds(20, 20),
				HistoryPerEvent: 11, HistoryPerDelivery: 11, HistoryWorkflow: 11, ActionsPerDelivery: 2, ActionsWorkflow: 2},
			{Name: ScenarioBaselineFast, Events: 200, Delivered: 200, Deliveries: 200, EventsPerSec: 40, DeliveriesPerSec: 40, LatencyMS: lat, CPUPer1000: cpu, Rounds: rounds(40, 40),
				HistoryPerEvent: 6, HistoryPerDelivery: 6, HistoryWorkflow: 6, ActionsPerDelivery: 2, ActionsWorkflow: 2},
			{Name: ScenarioOrdered, Events: 200, Delivered: 200, Deliveries: 200, EventsPerSec: 24, DeliveriesPerSec: 24, LatencyMS: lat, CPUPer1000: cpu, Rounds: rounds(22, 26),
				HistoryPerEvent: 13, HistoryPerDelivery: 13, HistoryWorkflow: 7, HistorySequencerShare: 6, ActionsPerDelivery: 5.1, ActionsWorkflow: 3, ActionsSequencerShare: 2.1},
			{Name: ScenarioFanOut, Events: 200, Delivered: 200, Deliveries: 600, EventsPerSec: 20, DeliveriesPerSec: 60, LatencyMS: lat, CPUPer1000: cpu,
				Rounds: []RoundResult{{Round: 1, Events: 100, Delivered: 100, Deliveries: 300, EventsPerSec: 50.0 / 3, DeliveriesPerSec: 50},
					{Round: 2, Events: 100, Delivered: 100, Deliveries: 300, EventsPerSec: 70.0 / 3, DeliveriesPerSec: 70}},
				HistoryPerEvent: 22.5, HistoryPerDelivery: 7.5, HistoryWorkflow: 6, HistorySequencerShare: 1.5, ActionsPerDelivery: 2.2, ActionsWorkflow: 1.5, ActionsSequencerShare: 0.7,
				Lanes: &LaneCheck{Deliveries: 750}},
			{Name: ScenarioSingleKey, Events: 200, Delivered: 200, Deliveries: 200, EventsPerSec: 12, DeliveriesPerSec: 12, LatencyMS: lat, CPUPer1000: cpu, Rounds: rounds(12, 12),
				HistoryPerEvent: 15, HistoryPerDelivery: 15, HistoryWorkflow: 7, HistorySequencerShare: 8, ActionsPerDelivery: 5, ActionsWorkflow: 3, ActionsSequencerShare: 2},
			{Name: ScenarioBaselineIdle, Events: 10, Delivered: 10, Deliveries: 10, EventsPerSec: 20, DeliveriesPerSec: 20, LatencyMS: lat},
			{Name: ScenarioBaselineFastIdle, Events: 10, Delivered: 10, Deliveries: 10, EventsPerSec: 40, DeliveriesPerSec: 40, LatencyMS: lat},
			{Name: ScenarioSingleKeyIdle, Events: 10, Delivered: 10, Deliveries: 10, EventsPerSec: 30, DeliveriesPerSec: 30, LatencyMS: Latency{P50: 29, P95: 35, P99: 35, Max: 35}},
		},
		Sequencers: []SequencerStat{
			{Scenario: ScenarioOrdered, Correlations: 50, Events: 300, Runs: 50, HistoryEvents: 1800, MaxRunLength: 60, PerEvent: 6},
			{Scenario: ScenarioFanOut, Correlations: 50, Events: 250, Runs: 50, HistoryEvents: 1125, MaxRunLength: 40, PerEvent: 4.5},
			{Scenario: ScenarioSingleKey, Correlations: 1, Events: 215, Runs: 3, ContinuedAsNew: 2, HistoryEvents: 1720, MaxRunLength: 1008, PerEvent: 8},
		},
		WorkerRSS:   []RSSPoint{{Seconds: 0, MB: 100}, {Seconds: 60, MB: 110}},
		EagerStarts: &EagerStats{Starts: 230, Requested: 230, Accepted: 229},
	}
	var ptr []*ScenarioResult
	for i := range rep.Scenarios {
		ptr = append(ptr, &rep.Scenarios[i])
	}
	relate(ptr[0], ptr[1], ptr[:5]...)
	relate(ptr[5], ptr[6], ptr[5:]...)
	s := rep.Scenarios
	rep.Ratios = Ratios{
		OrderedVsBaseline: s[2].VsBaseline, SingleKeyVsBaseline: s[4].VsBaseline,
		OrderedVsBaselineFast: s[2].VsBaselineFast, SingleKeyVsBaselineFast: s[4].VsBaselineFast,
		OrderedPerRound: perRound(s[2].Rounds, s[0].Rounds), SingleKeyPerRound: perRound(s[4].Rounds, s[0].Rounds),
		OrderedPerRoundVsFast: perRound(s[2].Rounds, s[1].Rounds), SingleKeyPerRoundVsFast: perRound(s[4].Rounds, s[1].Rounds),
		FanOutVsOrdered: ratio(s[3].DeliveriesPerSec, s[2].EventsPerSec), FanOutPerRoundVsOrdered: perRound(s[3].Rounds, s[2].Rounds),
	}
	return rep
}

func TestTargets(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	got := map[string]bool{}
	for _, tg := range targets(rep) {
		require.NotEmpty(t, tg.Measured, tg.Goal)
		got[tg.Goal] = tg.Met
	}
	require.Equal(t, map[string]bool{
		"hookflow ordered (50 correlations) ≥ 1.0× baseline events/s":                             true,  // 24 vs 20
		"single key ≥ 25 events/s":                                                                false, // 12
		"idle single key p50 accept→commit ≤ 30 ms":                                               true,  // 29
		"history events per delivered event (own + sequencer share) ≤ 14, ordered and single key": false, // single key 15
		"sequencer runs bounded by continue-as-new (longest ≤ 1000 events + 10 %)":                true,  // 1008
		"worker RSS flat over a long run":                                                         true,  // 100 → 110
	}, got)

	// Every figure missing: nothing is met, nothing panics.
	for _, tg := range targets(&Report{}) {
		require.False(t, tg.Met, tg.Goal)
	}
}

// TestFanOutTargets: the four fan-out figures, each from the same run's
// rows (in the sample: fan-out 60 deliveries/s against the ordered 24
// events/s, 7.5 history events and 2.2 actions per delivery against the
// baseline's 2, ordered 24 against the baseline's 20 events/s).
func TestFanOutTargets(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	got := map[string]bool{}
	for _, tg := range fanOutTargets(rep) {
		require.NotEmpty(t, tg.Measured, tg.Figure)
		got[tg.Figure+" "+tg.Goal] = tg.Met
	}
	require.Equal(t, map[string]bool{
		"fan-out deliveries/s vs single-endpoint ordered events/s ≥ 2.0×":                   true,  // 2.5
		"history events per delivery at fan-out 3 (own + sequencer share) ≤ 8":              true,  // 7.5
		"actions per delivery at fan-out 3 vs the bare baseline's actions per event ≤ 1.0×": false, // 1.1
		"single-endpoint ordered events/s vs the bare baseline's ≥ 1.0×":                    true,  // 1.2
	}, got)
	m := fanOutTargets(rep)
	require.Contains(t, m[0].Measured, "2.50× (60.0 deliveries/s vs 24.0 events/s; per round 2.27×, 2.69×)")
	require.Contains(t, m[1].Measured, "7.5 (6.0 + 1.5) at fan-out 3")
	require.Contains(t, m[2].Measured, "1.10× (2.20 = 1.50 own + 0.70 sequencer share, vs 2.00)")

	for _, tg := range fanOutTargets(&Report{}) {
		require.False(t, tg.Met, tg.Figure)
	}
}

func TestSequencerTarget(t *testing.T) {
	t.Parallel()
	tg := sequencerTarget([]SequencerStat{{Correlations: 2, Runs: 2, MaxRunLength: 80}})
	require.True(t, tg.Met)
	require.Contains(t, tg.Measured, "continue-as-new not exercised")

	tg = sequencerTarget([]SequencerStat{{Correlations: 1, Runs: 4, ContinuedAsNew: 3, MaxRunLength: 1101}})
	require.False(t, tg.Met, "a run past DefaultMaxHistory + 10 %")
	require.NotContains(t, tg.Measured, "not exercised")
}

func TestWriteTable(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	rep.Targets = targets(rep)
	rep.FanOutTargets = fanOutTargets(rep)
	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	for _, name := range ScenarioNames() {
		require.Contains(t, out, name)
	}
	require.Contains(t, out, "vs baseline-fast")
	require.Contains(t, out, "targets:")
	for _, tg := range rep.Targets {
		require.Contains(t, out, tg.Goal)
	}
	require.Contains(t, out, "229 of 230 starts ran eagerly")
	// The ordered row: 24 deliveries/s is 1.20× the baseline's 20, 0.60× the
	// fast one's 40; 13 history events and 5.10 actions per delivery, 2.55×
	// the baseline's 2.
	require.Regexp(t, `hookflow-ordered\s+200\s+200\s+200\s+24\.0\s+1\.20×\s+0\.60×\s+20\s+40\s+50\s+13\.0\s+5\.10\s+2\.55×\s`, out)
	require.Regexp(t, `baseline\s+200\s+200\s+200\s+20\.0\s+1\.00×\s+0\.50×\s+20\s+40\s+50\s+11\.0\s+2\.00\s+1\.00×\s`, out)
	require.Contains(t, out, "hookflow-ordered: 5.10 actions per delivery (3.00 own + 2.10 sequencer share) = 2.55× the baseline's 2.00, 2.55× baseline-fast's 2.00")
	require.Regexp(t, `single-key-idle\s+10\s+10\s+10\s+30\.0\s+1\.50×\s+0\.75×\s+29\s+35\s+35\s+-\s+-\s+-\s`, out)
	// Round 2: ordered 26 / baseline 20, single 12 / 20, ordered 26 / fast 40, single 12 / 40, fan-out 70 / ordered 26;
	// no tenant-spread scenario ran.
	require.Regexp(t, `\n\s+2\s+20\.0\s+40\.0\s+26\.0\s+70\.0\s+12\.0\s+1\.30×\s+0\.60×\s+0\.65×\s+0\.30×\s+2\.69×\s+-\s+-\n`, out)
	// The fan-out row: 600 deliveries of 200 events, 60/s = 3.00× the baseline, 7.5 history events and 2.20 actions per delivery.
	require.Regexp(t, `hookflow-fanout\s+200\s+200\s+600\s+60\.0\s+3\.00×\s+1\.50×\s+20\s+40\s+50\s+7\.5\s+2\.20\s+1\.10×\s`, out)
	require.Contains(t, out, "targets (fan-out;")
	require.Contains(t, out, "  fan-out deliveries/s vs single-endpoint ordered events/s: 2.50× (60.0 deliveries/s vs 24.0 events/s; per round 2.27×, 2.69×); target ≥ 2.0× (at target)")
	require.Contains(t, out, "actions per delivery at fan-out 3 vs the bare baseline's actions per event: 1.10×")
	require.Contains(t, out, "target ≤ 1.0× (below target)")
	require.Contains(t, out, "hookflow-fanout in hookflow's ledger (warm-up included): 750 deliveries, 0 not delivered, 0 sent before their lane's previous sequence was delivered, 0 delivered twice")
}

func TestSoakWriteTable(t *testing.T) {
	t.Parallel()
	rep := &SoakReport{
		Events: 10000, Delivered: 10000, Correlation: "c", InOrder: true,
		Rounds: []SoakRound{
			{Round: 1, Events: 5000, Delivered: 5000, UpTo: 5000, EventsPerSec: 20, RSSEndMB: 100, RSSMaxMB: 120, SequencerRuns: 40, SequencerLongestRun: 1012},
			{Round: 2, Events: 5000, Delivered: 5000, UpTo: 10000, EventsPerSec: 19, RSSEndMB: 90, RSSMaxMB: 115, SequencerRuns: 80, SequencerLongestRun: 1015},
		},
		Sequencer: SequencerStat{Correlations: 1, Events: 10000, Runs: 80, ContinuedAsNew: 79, HistoryEvents: 80000, MaxRunLength: 1015, PerEvent: 8},
	}
	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	require.Regexp(t, `\n\s+2\s+5000\s+5000\s+10000\s+19\.0\s+0\s+90\s+115\s+80\s+1015\s*\n`, out)
	require.Contains(t, out, "after the last 90 MB (-10%)")
	require.Contains(t, out, "sequencer: 80 runs (79 continued as new), 80000 history events, longest run 1015")
	require.Contains(t, out, "[met   ] sequencer runs bounded by continue-as-new")

	rep.Rounds = rep.Rounds[:1]
	b.Reset()
	require.NoError(t, rep.WriteTable(&b))
	require.Contains(t, b.String(), "one burst cannot show whether it stays flat")
}

func TestPerDelivery(t *testing.T) {
	t.Parallel()
	// 100 ordered events, one webhook each: 700 own history events and 300
	// actions, and a sequencer share of 2.1 actions and 9 events per event.
	own := workflowTotals{workflows: 100, events: 700, actions: 300}
	ordered := ScenarioResult{Delivered: 100, Deliveries: 100}
	ordered.perDelivery(workload{own: own, seqEventsPerEvent: 9, seqActionsPerEvent: 2.1})
	require.InDelta(t, 7, ordered.HistoryWorkflow, 1e-9)
	require.InDelta(t, 9, ordered.HistorySequencerShare, 1e-9)
	require.InDelta(t, 16, ordered.HistoryPerDelivery, 1e-9)
	require.InDelta(t, 16, ordered.HistoryPerEvent, 1e-9)
	require.InDelta(t, 5.1, ordered.ActionsPerDelivery, 1e-9)

	// The same events fanned out to three endpoints each, with a workflow
	// per delivery as well (300 more, 3 actions each): the sequencer's share
	// is paid once per event and spread over its three deliveries.
	fan := ScenarioResult{Delivered: 100, Deliveries: 300}
	fanOwn := workflowTotals{workflows: 400, events: 700 + 300*11, actions: 300 + 300*3}
	fan.perDelivery(workload{own: fanOwn, seqEventsPerEvent: 9, seqActionsPerEvent: 2.1})
	require.InDelta(t, 4000.0/300, fan.HistoryWorkflow, 1e-9)
	require.InDelta(t, 3, fan.HistorySequencerShare, 1e-9)
	require.InDelta(t, 4900.0/100, fan.HistoryPerEvent, 1e-9)
	require.InDelta(t, 4, fan.ActionsWorkflow, 1e-9)
	require.InDelta(t, 0.7, fan.ActionsSequencerShare, 1e-9)
	require.InDelta(t, 4.7, fan.ActionsPerDelivery, 1e-9)

	// Nothing delivered: no figure, no division by zero.
	var none ScenarioResult
	none.perDelivery(workload{own: own})
	require.Zero(t, none.ActionsPerDelivery)
}

func TestBurstResultDeliveries(t *testing.T) {
	t.Parallel()
	r := &runner{}
	sc := &scenario{name: "fan", kind: kindHookflow, rounds: []RoundResult{
		{Round: 1, Events: 10, Delivered: 10, Deliveries: 30, Seconds: 2, cpu: cpuSnapshot{procReceiver: 0.5, procFanReceiver + "1": 1, procFanReceiver + "2": 2.5}},
		{Round: 2, Events: 10, Delivered: 9, Deliveries: 27, Seconds: 1},
	}}
	res := r.burstResult(sc, "")
	require.Equal(t, 19, res.Delivered)
	require.InDelta(t, 1000*(0.5+2.5+1.0)/57, res.CPUPer1000[procReceiver], 1e-9, "every receiver's CPU, per delivery")
	require.InDelta(t, 1000*2.5/57, res.CPUPer1000[procFanReceiver+"2"], 1e-9)
	require.Equal(t, 57, res.Deliveries)
	require.InDelta(t, 19.0/3, res.EventsPerSec, 1e-9)
	require.InDelta(t, 19, res.DeliveriesPerSec, 1e-9)
}
