package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/lab/bench/internal/dbsqlc"
	"github.com/hookflow/hookflow/workflows"
)

// Report is everything one run measured; it is written as JSON as is.
type Report struct {
	StartedAt time.Time        `json:"started_at"`
	Seconds   float64          `json:"seconds"`
	Machine   Machine          `json:"machine"`
	Settings  Settings         `json:"settings"`
	Scenarios []ScenarioResult `json:"scenarios"`
	Ratios    Ratios           `json:"ratios"`
	Targets   []Target         `json:"targets"`
	// FanOutTargets are the fan-out goals, as figures of this run: printed,
	// never asserted.
	FanOutTargets []Target       `json:"fan_out_targets"`
	History       HistoryProfile `json:"history_profile"`
	// Sequencers sums up the sequencers of each hookflow scenario.
	Sequencers []SequencerStat `json:"sequencers"`
	// Timelines are the median steps of an idle event, from send.
	Timelines []Timeline `json:"idle_timelines"`
	// Background is the idle stack's own load, per second.
	Background Background `json:"background"`
	// WorkerRSS samples the hookflow worker's resident memory over the run.
	WorkerRSS []RSSPoint `json:"worker_rss"`
	// EagerStarts counts the fast baseline's starts over the whole run
	// (warm-up and idle included) and how many of them ran eagerly.
	EagerStarts *EagerStats `json:"baseline_fast_eager_starts,omitempty"`
	// Destinations compares delivering into each broker with webhooks
	// (Config.Destinations); nil when not asked for.
	Destinations *DestinationsResult `json:"destinations,omitempty"`
}

// Err fails a run whose destinations comparison found a destination
// missing, repeating or reordering deliveries, so that a fast but wrong
// run cannot pass; its figures are printed first.
func (rep *Report) Err() error { return rep.Destinations.err() }

// Machine describes where the bench ran.
type Machine struct {
	CPUs         int     `json:"cpus"`
	CPUModel     string  `json:"cpu_model"`
	MemoryGiB    float64 `json:"memory_gib"`
	Kernel       string  `json:"kernel"`
	GoVersion    string  `json:"go_version"`
	Postgres     string  `json:"postgres"`
	LoadAvgStart string  `json:"load_avg_start"`
	LoadAvgEnd   string  `json:"load_avg_end"`
}

// Settings are the run's parameters.
type Settings struct {
	Events       int `json:"events"`
	Concurrency  int `json:"concurrency"`
	Correlations int `json:"correlations"`
	// Tenants is what the tenant-spread scenarios spread the correlations
	// over (0: they did not run).
	Tenants       int  `json:"tenants,omitempty"`
	Rounds        int  `json:"rounds"`
	IdleEvents    int  `json:"idle_events"`
	PostgresFsync bool `json:"postgres_fsync"`
}

// ScenarioResult is one row of the table.
type ScenarioResult struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Events      int    `json:"events"`
	// Delivered counts the events delivered, Deliveries the webhooks: the
	// same unless the scenario sends each event to several endpoints
	// (scenario.fanOut). The per-delivery figures, and every ratio to the
	// baselines, divide by Deliveries.
	Delivered  int `json:"delivered"`
	Deliveries int `json:"deliveries"`
	// InOrder: every correlation's ledger, in every receiver of the
	// scenario, holds its sequences in order with none missing (hookflow
	// scenarios only).
	InOrder *bool `json:"in_order,omitempty"`
	// Lanes is what hookflow's own ledger says of the scenario's lanes
	// (hookflow scenarios only).
	Lanes *LaneCheck `json:"lanes,omitempty"`
	// EventsPerSec: delivered events over the time from the first
	// submission to the last receiver commit, summed over rounds; for the
	// idle rows, one event at a time.
	EventsPerSec     float64 `json:"events_per_sec"`
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	// VsBaseline and VsBaselineFast are its deliveries/s over the
	// baseline's and the fast baseline's (the idle rows over the idle rows).
	VsBaseline     float64 `json:"vs_baseline,omitempty"`
	VsBaselineFast float64 `json:"vs_baseline_fast,omitempty"`
	// LatencyMS is from accepted (API 202 / workflow start returned) to the
	// receiver's commit.
	LatencyMS Latency `json:"latency_ms"`
	// HistoryPerDelivery is the history events of every workflow of the
	// scenario, plus its events' share of their sequencers' (sequencer
	// events / events of that correlation), per delivery: HistoryWorkflow
	// + HistorySequencerShare. HistoryPerEvent is the same per delivered
	// event (the history target, and older reports).
	HistoryPerEvent       float64 `json:"history_events_per_event,omitempty"`
	HistoryPerDelivery    float64 `json:"history_events_per_delivery,omitempty"`
	HistoryWorkflow       float64 `json:"history_workflow,omitempty"`
	HistorySequencerShare float64 `json:"history_sequencer_share,omitempty"`
	// ActionsPerDelivery is the Temporal Cloud actions (see actions) of
	// the same workflows and sequencer share, per delivery:
	// ActionsWorkflow + ActionsSequencerShare. ActionsVsBaseline and
	// ActionsVsBaselineFast are it over the two baselines' of the same run.
	ActionsPerDelivery    float64 `json:"actions_per_delivery,omitempty"`
	ActionsWorkflow       float64 `json:"actions_workflow,omitempty"`
	ActionsSequencerShare float64 `json:"actions_sequencer_share,omitempty"`
	ActionsVsBaseline     float64 `json:"actions_vs_baseline,omitempty"`
	ActionsVsBaselineFast float64 `json:"actions_vs_baseline_fast,omitempty"`
	// CPUPer1000 is CPU seconds per 1,000 deliveries by process; "app" is
	// hookflow's api+worker, the baseline's worker, or the fast baseline's
	// process (its starter and worker); "receiver" is every receiver's.
	CPUPer1000 map[string]float64 `json:"cpu_seconds_per_1000,omitempty"`
	// Postgres is, per database, committed transactions and rows written
	// per delivery (pg_stat_database), the bench's own queries out.
	Postgres    map[string]PGPerEvent `json:"postgres_per_event,omitempty"`
	WorkerRSSMB *RSSRange             `json:"worker_rss_mb,omitempty"`
	Rounds      []RoundResult         `json:"rounds,omitempty"`
}

// LaneCheck is how a scenario's deliveries stand in hookflow's ledger once
// its rounds are over (warm-up included): every one should be delivered,
// none sent before its lane's previous sequence was delivered, none sent
// again after a 2xx. The receivers' ledgers cannot show the last two: the
// kit parks an early arrival and answers a repeat "already processed".
type LaneCheck struct {
	Deliveries     int64 `json:"deliveries"`
	NotDelivered   int64 `json:"not_delivered"`
	OutOfOrder     int64 `json:"sent_out_of_order"`
	DeliveredTwice int64 `json:"delivered_twice"`
}

// Background is what the stack spends per second with no event in flight.
type Background struct {
	Seconds   float64            `json:"seconds"`
	CPUPerSec map[string]float64 `json:"cpu_seconds_per_second"`
	// PostgresPerSec uses PGPerEvent's fields, per second.
	PostgresPerSec map[string]PGPerEvent `json:"postgres_per_second"`
}

// PGPerEvent is one database's work per delivered event.
type PGPerEvent struct {
	Transactions float64 `json:"transactions"`
	RowsWritten  float64 `json:"rows_written"`
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// RSSRange is a worker's resident memory over a scenario.
type RSSRange struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Max   float64 `json:"max"`
}

// RSSPoint is one memory sample.
type RSSPoint struct {
	Seconds float64 `json:"t"`
	MB      float64 `json:"mb"`
}

// Ratios are hookflow's deliveries/s over the baseline's and over the fast
// baseline's: overall and per round (0 where the round is missing or its
// denominator delivered nothing).
type Ratios struct {
	OrderedVsBaseline       float64 `json:"ordered_vs_baseline"`
	SingleKeyVsBaseline     float64 `json:"single_key_vs_baseline"`
	OrderedVsBaselineFast   float64 `json:"ordered_vs_baseline_fast"`
	SingleKeyVsBaselineFast float64 `json:"single_key_vs_baseline_fast"`
	BaselineFastVsBaseline  float64 `json:"baseline_fast_vs_baseline"`
	// FanOutVsOrdered is the fan-out scenario's deliveries/s over the
	// single-endpoint ordered scenario's events/s (a fan-out target), overall and
	// per round.
	FanOutVsOrdered         float64   `json:"fan_out_vs_ordered"`
	FanOutPerRoundVsOrdered []float64 `json:"fan_out_per_round_vs_ordered"`
	OrderedPerRound         []float64 `json:"ordered_per_round"`
	SingleKeyPerRound       []float64 `json:"single_key_per_round"`
	OrderedPerRoundVsFast   []float64 `json:"ordered_per_round_vs_fast"`
	SingleKeyPerRoundVsFast []float64 `json:"single_key_per_round_vs_fast"`
	// OrderedTenantsVsOne is the tenant-spread ordered scenario's events/s
	// over the one-tenant ordered scenario's (spreading over tenants should
	// cost nothing: within noise of 1), overall and per round;
	// FanOutTenantsVsOne is the same for fan-out, in deliveries/s. Absent when
	// the run had no tenants.
	OrderedTenantsVsOne         float64   `json:"ordered_tenants_vs_one,omitempty"`
	OrderedTenantsPerRoundVsOne []float64 `json:"ordered_tenants_per_round_vs_one,omitempty"`
	FanOutTenantsVsOne          float64   `json:"fan_out_tenants_vs_one,omitempty"`
	FanOutTenantsPerRoundVsOne  []float64 `json:"fan_out_tenants_per_round_vs_one,omitempty"`
}

// Target is one of the bench's goals (targets or fan-out targets) and
// where the run stands.
type Target struct {
	// Figure names what is measured, when Goal is only the bound.
	Figure   string `json:"figure,omitempty"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// HistoryProfile counts history events by type.
type HistoryProfile struct {
	BaselineWorkflow     map[string]int `json:"baseline_workflow"`
	BaselineFastWorkflow map[string]int `json:"baseline_fast_workflow"`
	EventWorkflow        map[string]int `json:"event_workflow"`
	// SequencerPerEvent: the ordered scenario's sequencer events by type,
	// per event of their correlations.
	SequencerPerEvent          map[string]float64 `json:"sequencer_per_event"`
	SingleKeySequencerPerEvent map[string]float64 `json:"single_key_sequencer_per_event"`
	// FanOutEventWorkflow and FanOutSequencerPerEvent are the same for the
	// fan-out scenario: one event's workflow delivers to every endpoint.
	FanOutEventWorkflow     map[string]int     `json:"fan_out_event_workflow"`
	FanOutSequencerPerEvent map[string]float64 `json:"fan_out_sequencer_per_event"`
}

// SequencerStat sums up the sequencers of one scenario.
type SequencerStat struct {
	Scenario     string `json:"scenario"`
	Correlations int    `json:"correlations"`
	Events       int64  `json:"events"`
	Runs         int    `json:"runs"`
	// ContinuedAsNew counts the runs that ended by continuing as new.
	ContinuedAsNew int `json:"continued_as_new"`
	// NotInVisibility counts runs that visibility did not list but the
	// continue-as-new chain led to; they are counted all the same.
	NotInVisibility int     `json:"runs_not_in_visibility"`
	HistoryEvents   int     `json:"history_events"`
	MaxRunLength    int     `json:"max_run_length"`
	PerEvent        float64 `json:"per_event"`
	// Actions are Temporal Cloud's over every run (see actions).
	Actions         int     `json:"actions"`
	ActionsPerEvent float64 `json:"actions_per_event"`
}

// Timeline is when each step of an idle event happened (median).
type Timeline struct {
	Scenario string `json:"scenario"`
	Events   int    `json:"events"`
	Steps    []Step `json:"steps"`
}

// Step is one point of a Timeline.
type Step struct {
	Name     string  `json:"name"`
	MedianMS float64 `json:"median_ms"`
}

// fill turns the runner's measurements into the report.
func (r *runner) fill(ctx context.Context, rep *Report) {
	r.p.logf("reading workflow histories")
	base := r.burstResult(r.base, "bare Temporal: one workflow per event, one HTTP activity, no order, no ledger")
	fast := r.burstResult(r.fast, "bare Temporal at its cheapest: eager start by the worker's own client, the POST as a local activity")
	ordered := r.burstResult(r.ordered, fmt.Sprintf("POST /v1/events, %d correlations", r.cfg.Correlations))
	single := r.burstResult(r.single, "POST /v1/events, one correlation (strictly serial)")
	fan := r.burstResult(r.fan, fmt.Sprintf("POST /v1/events without endpoint_id, routed to %d endpoints, %d correlations", len(r.fan.sinks), r.cfg.Correlations))
	// The tenant-spread twins' rows; zero (and left out) without tenants.
	var orderedTen, fanTen ScenarioResult
	if r.orderedTenants != nil {
		orderedTen = r.burstResult(r.orderedTenants, fmt.Sprintf("hookflow-ordered's workload, its %d correlations spread over %d tenants, each with its own endpoint", r.cfg.Correlations, r.cfg.Tenants))
		fanTen = r.burstResult(r.fanTenants, fmt.Sprintf("hookflow-fanout's workload, its %d correlations spread over %d tenants, each with its own %d endpoints", r.cfg.Correlations, r.cfg.Tenants, len(r.fanTenants.sinks)))
	}

	tc := r.s.temporal
	warn := func(what string, err error) { r.p.logf("%s: %v", what, err) }
	for _, b := range []struct {
		res   *ScenarioResult
		sc    *scenario
		types *map[string]int
	}{{&base, r.base, &rep.History.BaselineWorkflow}, {&fast, r.fast, &rep.History.BaselineFastWorkflow}} {
		own, err := readWorkflows(ctx, tc, workflowIDs(b.sc))
		if err != nil {
			warn(b.sc.name+" history", err)
			continue
		}
		b.res.perDelivery(workload{own: own})
		*b.types = own.mid
	}

	seqStat := func(sc *scenario, corrs []string, keepUpdates bool) (SequencerStat, map[string]float64, *sequencerHistory) {
		st := SequencerStat{Scenario: sc.name, Correlations: len(corrs)}
		types := map[string]float64{}
		var last sequencerHistory
		for _, c := range corrs {
			sh, err := loadSequencer(ctx, tc, sc.corrTenant(c), c, keepUpdates)
			if err != nil {
				warn("sequencer history", err)
				continue
			}
			st.Events += r.seq[c]
			st.Runs += sh.runs
			st.ContinuedAsNew += sh.continuedAsNew
			st.NotInVisibility += sh.missed
			st.HistoryEvents += sh.total
			st.Actions += sh.actions
			st.MaxRunLength = max(st.MaxRunLength, sh.maxLength)
			for k, v := range sh.byType {
				types[k] += float64(v)
			}
			last = sh
		}
		if st.Events > 0 {
			st.PerEvent = float64(st.HistoryEvents) / float64(st.Events)
			st.ActionsPerEvent = float64(st.Actions) / float64(st.Events)
			for k := range types {
				types[k] /= float64(st.Events)
			}
		}
		if st.NotInVisibility > 0 {
			r.p.logf("%s: visibility did not list %d sequencer runs; found through the continue-as-new chain", sc.name, st.NotInVisibility)
		}
		return st, types, &last
	}
	// Every workflow a hookflow scenario creates is counted: its events'
	// workflows (ids, ID = the event's key) and every run of the sequencer
	// of each of its correlations.
	var orderedCorrs, fanCorrs []string
	for i := 0; i < r.cfg.Correlations; i++ {
		orderedCorrs = append(orderedCorrs, r.ordered.corr(i))
		fanCorrs = append(fanCorrs, r.fan.corr(i))
	}
	singleCorrs := []string{r.single.corr(0)}
	ost, otypes, _ := seqStat(r.ordered, orderedCorrs, false)
	fst, ftypes, _ := seqStat(r.fan, fanCorrs, false)
	sst, stypes, singleSeq := seqStat(r.single, singleCorrs, true)
	rep.Sequencers = []SequencerStat{ost, fst, sst}
	rep.History.SequencerPerEvent = otypes
	rep.History.FanOutSequencerPerEvent = ftypes
	rep.History.SingleKeySequencerPerEvent = stypes
	type hookflowRow struct {
		res   *ScenarioResult
		sc    *scenario
		st    SequencerStat
		corrs []string
		types *map[string]int
	}
	rows := []hookflowRow{{&ordered, r.ordered, ost, orderedCorrs, &rep.History.EventWorkflow}, {&fan, r.fan, fst, fanCorrs, &rep.History.FanOutEventWorkflow},
		{&single, r.single, sst, singleCorrs, nil}}
	if r.orderedTenants != nil {
		var otCorrs, ftCorrs []string
		for i := 0; i < r.cfg.Correlations; i++ {
			otCorrs = append(otCorrs, r.orderedTenants.corr(i))
			ftCorrs = append(ftCorrs, r.fanTenants.corr(i))
		}
		otst, _, _ := seqStat(r.orderedTenants, otCorrs, false)
		ftst, _, _ := seqStat(r.fanTenants, ftCorrs, false)
		rep.Sequencers = append(rep.Sequencers, otst, ftst)
		rows = append(rows, hookflowRow{&orderedTen, r.orderedTenants, otst, otCorrs, nil}, hookflowRow{&fanTen, r.fanTenants, ftst, ftCorrs, nil})
	}
	lq := dbsqlc.New(r.s.hookflowDB)
	for _, x := range rows {
		if own, err := readWorkflows(ctx, tc, workflowIDs(x.sc)); err != nil {
			warn("event workflow history", err)
		} else {
			x.res.perDelivery(workload{own: own, seqEventsPerEvent: x.st.PerEvent, seqActionsPerEvent: x.st.ActionsPerEvent})
			if x.types != nil {
				*x.types = own.mid
			}
		}
		if inOrder, err := r.inOrder(ctx, x.sc, x.corrs); err != nil {
			warn(x.sc.name+" order check", err)
		} else {
			x.res.InOrder = &inOrder
		}
		if row, err := lq.LanesDeliveredCheck(ctx, x.corrs); err != nil {
			warn(x.sc.name+" lane check", err)
		} else {
			lc := LaneCheck(row)
			x.res.Lanes = &lc
		}
	}

	baseIdle := idleResult(ScenarioBaselineIdle, "baseline, one event at a time on a quiet system", r.base.idle)
	fastIdle := idleResult(ScenarioBaselineFastIdle, "baseline-fast, one event at a time on a quiet system", r.fast.idle)
	singleIdle := idleResult(ScenarioSingleKeyIdle, "hookflow single key, one event at a time on a quiet system", r.single.idle)
	for _, t := range []struct {
		name    string
		sc      *scenario
		samples []idleSample
		seq     *sequencerHistory
		steps   []string
	}{
		{ScenarioBaselineIdle, r.base, r.base.idle, nil, baselineSteps},
		{ScenarioBaselineFastIdle, r.fast, r.fast.idle, nil, baselineFastSteps},
		{ScenarioSingleKeyIdle, r.single, r.single.idle, singleSeq, hookflowSteps},
	} {
		if len(t.samples) == 0 {
			continue
		}
		if tl, err := timeline(ctx, tc, t.name, t.samples, t.sc.workflowID, t.seq, t.steps); err != nil {
			warn(t.name+" timeline", err)
		} else {
			rep.Timelines = append(rep.Timelines, tl)
		}
	}
	if st, err := r.eagerStats(ctx); err != nil {
		warn("fast baseline", err)
	} else {
		rep.EagerStarts = &st
	}

	relate(&base, &fast, &base, &fast, &ordered, &fan, &single, &orderedTen, &fanTen)
	relate(&baseIdle, &fastIdle, &baseIdle, &fastIdle, &singleIdle)
	rep.Ratios = Ratios{
		OrderedVsBaseline: ordered.VsBaseline, SingleKeyVsBaseline: single.VsBaseline,
		OrderedVsBaselineFast: ordered.VsBaselineFast, SingleKeyVsBaselineFast: single.VsBaselineFast,
		BaselineFastVsBaseline:  fast.VsBaseline,
		OrderedPerRound:         perRound(ordered.Rounds, base.Rounds),
		SingleKeyPerRound:       perRound(single.Rounds, base.Rounds),
		OrderedPerRoundVsFast:   perRound(ordered.Rounds, fast.Rounds),
		SingleKeyPerRoundVsFast: perRound(single.Rounds, fast.Rounds),
		// The ordered scenario delivers each event once: its deliveries/s
		// are its events/s.
		FanOutVsOrdered:         ratio(fan.DeliveriesPerSec, ordered.EventsPerSec),
		FanOutPerRoundVsOrdered: perRound(fan.Rounds, ordered.Rounds),
	}
	rep.Scenarios = []ScenarioResult{base, fast, ordered, fan, single, baseIdle, fastIdle, singleIdle}
	if r.orderedTenants != nil {
		rep.Ratios.OrderedTenantsVsOne = ratio(orderedTen.EventsPerSec, ordered.EventsPerSec)
		rep.Ratios.OrderedTenantsPerRoundVsOne = perRound(orderedTen.Rounds, ordered.Rounds)
		rep.Ratios.FanOutTenantsVsOne = ratio(fanTen.DeliveriesPerSec, fan.DeliveriesPerSec)
		rep.Ratios.FanOutTenantsPerRoundVsOne = perRound(fanTen.Rounds, fan.Rounds)
		// Each beside its one-tenant twin.
		rep.Scenarios = slices.Insert(rep.Scenarios, 4, fanTen)
		rep.Scenarios = slices.Insert(rep.Scenarios, 3, orderedTen)
	}
	rep.WorkerRSS = r.rss
	rep.Background = r.background
	rep.Targets = targets(rep)
	rep.FanOutTargets = fanOutTargets(rep)
}

// ratio is num/den, or 0 when den is not positive (no figure to compare
// with), which the table prints as "-".
func ratio(num, den float64) float64 {
	if den <= 0 || num < 0 {
		return 0
	}
	return num / den
}

// relate sets every row's deliveries/s and actions per delivery ratios to
// the baseline's and the fast baseline's. Per delivery, not per event, so
// that a scenario fanning an event out to several endpoints compares webhook
// for webhook with the baselines, which deliver each event once.
func relate(base, fast *ScenarioResult, rows ...*ScenarioResult) {
	for _, r := range rows {
		r.VsBaseline = ratio(r.DeliveriesPerSec, base.DeliveriesPerSec)
		r.VsBaselineFast = ratio(r.DeliveriesPerSec, fast.DeliveriesPerSec)
		r.ActionsVsBaseline = ratio(r.ActionsPerDelivery, base.ActionsPerDelivery)
		r.ActionsVsBaselineFast = ratio(r.ActionsPerDelivery, fast.ActionsPerDelivery)
	}
}

// perRound is num's deliveries/s over den's, round by round; rounds are
// matched by number, as the scenarios ran them side by side.
func perRound(num, den []RoundResult) []float64 {
	byRound := map[int]float64{}
	for _, d := range den {
		byRound[d.Round] = d.DeliveriesPerSec
	}
	out := make([]float64, 0, len(num))
	for _, n := range num {
		out = append(out, ratio(n.DeliveriesPerSec, byRound[n.Round]))
	}
	return out
}

// workload is what a scenario's workflows did in all, before it is divided
// per delivery: its own workflows' histories (every workflow the scenario
// started: a scenario with more than one per event lists them all in its
// rounds' ids) and, for hookflow, its sequencers' figures per event.
type workload struct {
	own                                   workflowTotals
	seqEventsPerEvent, seqActionsPerEvent float64
}

// perDelivery sets the history and action figures from w. A sequencer
// orders events, whatever each fans out to, so its share is taken once per
// delivered event and then spread over the deliveries.
func (s *ScenarioResult) perDelivery(w workload) {
	if s.Deliveries <= 0 || s.Delivered <= 0 {
		return
	}
	d := float64(s.Deliveries)
	seqEvents := w.seqEventsPerEvent * float64(s.Delivered)
	seqActions := w.seqActionsPerEvent * float64(s.Delivered)
	s.HistoryWorkflow = float64(w.own.events) / d
	s.HistorySequencerShare = seqEvents / d
	s.HistoryPerDelivery = s.HistoryWorkflow + s.HistorySequencerShare
	s.HistoryPerEvent = (float64(w.own.events) + seqEvents) / float64(s.Delivered)
	s.ActionsWorkflow = float64(w.own.actions) / d
	s.ActionsSequencerShare = seqActions / d
	s.ActionsPerDelivery = s.ActionsWorkflow + s.ActionsSequencerShare
}

func ids(sc *scenario) []string {
	var out []string
	for _, rd := range sc.rounds {
		out = append(out, rd.ids...)
	}
	return out
}

// burstResult sums a scenario's rounds.
func (r *runner) burstResult(sc *scenario, desc string) ScenarioResult {
	res := ScenarioResult{Name: sc.name, Description: desc, Rounds: sc.rounds, CPUPer1000: map[string]float64{}}
	var lat []time.Duration
	var seconds float64
	cpu := cpuSnapshot{}
	pg := pgSnapshot{}
	for i, rd := range sc.rounds {
		for k, v := range rd.pg {
			pg[k] = pgCounters{commits: pg[k].commits + v.commits, rows: pg[k].rows + v.rows}
		}
		res.Events += rd.Events
		res.Delivered += rd.Delivered
		res.Deliveries += rd.Deliveries
		seconds += rd.Seconds
		lat = append(lat, rd.latencies...)
		for k, v := range rd.cpu {
			cpu[k] += v
		}
		if i == 0 {
			res.WorkerRSSMB = &RSSRange{Start: rd.rssStart}
		}
		res.WorkerRSSMB.End = rd.rssEnd
		res.WorkerRSSMB.Max = max(res.WorkerRSSMB.Max, rd.rssMax)
	}
	if seconds > 0 {
		res.EventsPerSec = float64(res.Delivered) / seconds
		res.DeliveriesPerSec = float64(res.Deliveries) / seconds
	}
	res.LatencyMS = percentiles(lat)
	// Per delivery, like every other figure of the row: the same as per
	// event but for a scenario that fans out.
	if res.Deliveries > 0 {
		per := 1000 / float64(res.Deliveries)
		receivers := 0.0
		for k, v := range cpu {
			res.CPUPer1000[k] = v * per
			if k == procReceiver || strings.HasPrefix(k, procFanReceiver) {
				receivers += v * per
			}
		}
		res.CPUPer1000[procReceiver] = receivers // every receiver's
		res.Postgres = map[string]PGPerEvent{}
		for k, v := range pg {
			res.Postgres[k] = PGPerEvent{Transactions: v.commits / float64(res.Deliveries), RowsWritten: v.rows / float64(res.Deliveries)}
		}
		switch sc.kind {
		case kindBaseline:
			res.CPUPer1000["app"] = cpu[procBaseline] * per
		case kindBaselineFast:
			res.CPUPer1000["app"] = cpu[procBaselineFast] * per
		default:
			res.CPUPer1000["app"] = (cpu[procAPI] + cpu[procWorker]) * per
		}
	}
	return res
}

func idleResult(name, desc string, samples []idleSample) ScenarioResult {
	res := ScenarioResult{Name: name, Description: desc, Events: len(samples)}
	var lat []time.Duration
	var busy time.Duration
	for _, s := range samples {
		if s.applied.IsZero() {
			continue
		}
		res.Delivered++
		lat = append(lat, s.applied.Sub(s.accepted))
		busy += s.applied.Sub(s.sent)
	}
	// One endpoint each: the idle rows measure latency.
	res.Deliveries = res.Delivered
	if busy > 0 {
		res.EventsPerSec = float64(res.Delivered) / busy.Seconds()
		res.DeliveriesPerSec = res.EventsPerSec
	}
	res.LatencyMS = percentiles(lat)
	return res
}

// percentiles uses the nearest rank.
func percentiles(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		i = min(max(i, 0), len(s)-1)
		return float64(s[i].Microseconds()) / 1000
	}
	return Latency{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
}

// inOrder checks, in the ledger of every receiver of the scenario, that
// every correlation's entries were applied in sequence order with no gap.
func (r *runner) inOrder(ctx context.Context, sc *scenario, corrs []string) (bool, error) {
	ok := len(sc.sinks) > 0
	for _, db := range sc.sinks {
		rows, err := db.Query(ctx,
			"SELECT correlation_id, sequence FROM ledger_entries WHERE correlation_id = ANY($1) ORDER BY entry_no", corrs)
		if err != nil {
			return false, fmt.Errorf("read ledger order: %w", err)
		}
		last := map[string]int64{}
		var corr string
		var seq int64
		_, err = pgx.ForEachRow(rows, []any{&corr, &seq}, func() error {
			if seq != last[corr]+1 {
				ok = false
			}
			last[corr] = seq
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read ledger order: %w", err)
		}
	}
	return ok, nil
}

// The targets of the design card's shape (a workflow per event from
// acceptance, a sequencer per correlation): still faster than bare Temporal,
// a quick single key, a short idle latency and a small history.
const (
	targetOrderedVsBaseline = 1.0 // × the bare baseline's events/s
	targetSingleKeyRate     = 25  // events/s
	targetIdleP50MS         = 30  // idle single key, accept → commit
	targetHistoryPerEvent   = 14  // own + sequencer share
)

// The fan-out targets, each against a figure of the same run: publishing
// once to three endpoints must cost less than posting three times.
const (
	targetFanOutVsOrdered      = 2.0 // fan-out deliveries/s × single-endpoint ordered events/s
	targetFanOutHistory        = 8   // history events per delivery at fan-out 3
	targetFanOutActionsVsBase  = 1.0 // actions per delivery × the bare baseline's per event
	targetOrderedVsBaselineF23 = 1.0 // single-endpoint ordered × bare baseline events/s
)

// fanOutTargets measures the run against the fan-out goals. Figures only:
// the bench never asserts them (the machine decides the speed ones).
func fanOutTargets(rep *Report) []Target {
	base, ordered, fan := rep.scenario(ScenarioBaseline), rep.scenario(ScenarioOrdered), rep.scenario(ScenarioFanOut)
	n := 0
	if fan.Delivered > 0 {
		n = fan.Deliveries / fan.Delivered
	}
	return []Target{{
		Figure: "fan-out deliveries/s vs single-endpoint ordered events/s",
		Goal:   fmt.Sprintf("≥ %.1f×", targetFanOutVsOrdered),
		Measured: fmt.Sprintf("%s (%.1f deliveries/s vs %.1f events/s; per round %s)",
			times(rep.Ratios.FanOutVsOrdered), fan.DeliveriesPerSec, ordered.EventsPerSec, joinRatios(rep.Ratios.FanOutPerRoundVsOrdered)),
		Met: rep.Ratios.FanOutVsOrdered >= targetFanOutVsOrdered,
	}, {
		Figure: fmt.Sprintf("history events per delivery at fan-out %d (own + sequencer share)", fanOutEndpoints),
		Goal:   fmt.Sprintf("≤ %d", targetFanOutHistory),
		Measured: fmt.Sprintf("%.1f (%.1f + %.1f) at fan-out %d; single-endpoint ordered %.1f, baseline %.1f",
			fan.HistoryPerDelivery, fan.HistoryWorkflow, fan.HistorySequencerShare, n, ordered.HistoryPerDelivery, base.HistoryPerDelivery),
		Met: fan.HistoryPerDelivery > 0 && fan.HistoryPerDelivery <= targetFanOutHistory,
	}, {
		Figure: fmt.Sprintf("actions per delivery at fan-out %d vs the bare baseline's actions per event", fanOutEndpoints),
		Goal:   fmt.Sprintf("≤ %.1f×", targetFanOutActionsVsBase),
		Measured: fmt.Sprintf("%s (%.2f = %.2f own + %.2f sequencer share, vs %.2f); single-endpoint ordered %.2f",
			times(fan.ActionsVsBaseline), fan.ActionsPerDelivery, fan.ActionsWorkflow, fan.ActionsSequencerShare, base.ActionsPerDelivery, ordered.ActionsPerDelivery),
		Met: fan.ActionsVsBaseline > 0 && fan.ActionsVsBaseline <= targetFanOutActionsVsBase,
	}, {
		Figure: "single-endpoint ordered events/s vs the bare baseline's",
		Goal:   fmt.Sprintf("≥ %.1f×", targetOrderedVsBaselineF23),
		Measured: fmt.Sprintf("%s (%.1f vs %.1f events/s; per round %s)",
			times(ordered.VsBaseline), ordered.EventsPerSec, base.EventsPerSec, joinRatios(rep.Ratios.OrderedPerRound)),
		Met: ordered.VsBaseline >= targetOrderedVsBaselineF23,
	}}
}

// scenario returns the row of that name (zero when absent).
func (rep *Report) scenario(name string) ScenarioResult {
	for _, s := range rep.Scenarios {
		if s.Name == name {
			return s
		}
	}
	return ScenarioResult{}
}

// targets measures the run against the design card's shape's goals.
func targets(rep *Report) []Target {
	base, fast := rep.scenario(ScenarioBaseline), rep.scenario(ScenarioBaselineFast)
	ordered, single := rep.scenario(ScenarioOrdered), rep.scenario(ScenarioSingleKey)
	singleIdle := rep.scenario(ScenarioSingleKeyIdle)
	var t []Target
	t = append(t, Target{
		Goal: fmt.Sprintf("hookflow ordered (%d correlations) ≥ %.1f× baseline events/s", rep.Settings.Correlations, targetOrderedVsBaseline),
		Measured: fmt.Sprintf("%.2f× (%.1f vs %.1f events/s; per round %s); vs baseline-fast %.2f× (%.1f events/s; per round %s)",
			ordered.VsBaseline, ordered.EventsPerSec, base.EventsPerSec, joinRatios(rep.Ratios.OrderedPerRound),
			ordered.VsBaselineFast, fast.EventsPerSec, joinRatios(rep.Ratios.OrderedPerRoundVsFast)),
		Met: base.EventsPerSec > 0 && ordered.EventsPerSec >= targetOrderedVsBaseline*base.EventsPerSec,
	})
	t = append(t, Target{
		Goal: fmt.Sprintf("single key ≥ %d events/s", targetSingleKeyRate),
		Measured: fmt.Sprintf("%.1f events/s (%.2f× baseline, %.2f× baseline-fast)",
			single.EventsPerSec, single.VsBaseline, single.VsBaselineFast),
		Met: single.EventsPerSec >= targetSingleKeyRate,
	})
	t = append(t, Target{
		Goal:     fmt.Sprintf("idle single key p50 accept→commit ≤ %d ms", targetIdleP50MS),
		Measured: fmt.Sprintf("p50 %.1f ms over %d idle events", singleIdle.LatencyMS.P50, singleIdle.Delivered),
		Met:      singleIdle.Delivered > 0 && singleIdle.LatencyMS.P50 <= targetIdleP50MS,
	})
	t = append(t, Target{
		Goal: fmt.Sprintf("history events per delivered event (own + sequencer share) ≤ %d, ordered and single key", targetHistoryPerEvent),
		Measured: fmt.Sprintf("ordered %.1f (%.1f + %.1f), single key %.1f (%.1f + %.1f); baseline %.1f, baseline-fast %.1f",
			ordered.HistoryPerEvent, ordered.HistoryWorkflow, ordered.HistorySequencerShare,
			single.HistoryPerEvent, single.HistoryWorkflow, single.HistorySequencerShare, base.HistoryPerEvent, fast.HistoryPerEvent),
		Met: ordered.HistoryPerEvent > 0 && single.HistoryPerEvent > 0 &&
			ordered.HistoryPerEvent <= targetHistoryPerEvent && single.HistoryPerEvent <= targetHistoryPerEvent,
	})
	t = append(t, sequencerTarget(rep.Sequencers))
	t = append(t, rssTarget(rep.WorkerRSS))
	return t
}

// sequencerTarget: no sequencer run grows past DefaultMaxHistory + 10 %.
// A run that never reaches the limit proves nothing about continue-as-new,
// so the measurement says whether any run did.
func sequencerTarget(seqs []SequencerStat) Target {
	limit := workflows.DefaultMaxHistory + workflows.DefaultMaxHistory/10
	maxRun, runs, cans, corrs := 0, 0, 0, 0
	for _, s := range seqs {
		maxRun = max(maxRun, s.MaxRunLength)
		runs += s.Runs
		cans += s.ContinuedAsNew
		corrs += s.Correlations
	}
	m := fmt.Sprintf("longest run %d events (limit %d); %d runs over %d sequencers, %d continued as new", maxRun, limit, runs, corrs, cans)
	if cans == 0 {
		m += " (no run reached the limit: continue-as-new not exercised)"
	}
	return Target{
		Goal:     fmt.Sprintf("sequencer runs bounded by continue-as-new (longest ≤ %d events + 10 %%)", workflows.DefaultMaxHistory),
		Measured: m,
		Met:      runs > 0 && maxRun <= limit,
	}
}

// rssTarget: the hookflow worker's RSS at the end is within 25 % (+10 MB)
// of its first sample.
func rssTarget(points []RSSPoint) Target {
	t := Target{Goal: "worker RSS flat over a long run"}
	n := len(points)
	if n < 2 {
		t.Measured = fmt.Sprintf("%d samples: too few to tell", n)
		return t
	}
	first, last, peak := points[0].MB, points[n-1].MB, 0.0
	for _, p := range points {
		peak = max(peak, p.MB)
	}
	t.Measured = fmt.Sprintf("%.0f MB → %.0f MB (peak %.0f MB) over %.0f s", first, last, peak, points[n-1].Seconds-points[0].Seconds)
	t.Met = last <= first*1.25+10
	return t
}

func joinRatios(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i := range v {
		s[i] = at(v, i)
	}
	return strings.Join(s, ", ")
}

// WriteJSON writes the report to path.
func (rep *Report) WriteJSON(path string) error { return writeJSON(path, "report", rep) }

// writeJSON writes v, indented, to path; what names it in errors.
func writeJSON(path, what string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// WriteTable prints the report for people: the main table, the rounds, the
// targets, the idle timelines and the history profile.
func (rep *Report) WriteTable(w io.Writer) error {
	m, st := rep.Machine, rep.Settings
	fmt.Fprintf(w, "hookflow bench: %d events per scenario, concurrency %d, %d correlations, %d tenants for the tenant-spread scenarios, %d rounds, %d idle events, Postgres fsync %s\n",
		st.Events, st.Concurrency, st.Correlations, st.Tenants, st.Rounds, st.IdleEvents, onOff(st.PostgresFsync))
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, Linux %s, %s, PostgreSQL %s, load average %s at start, %s at end; %.0f s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.Kernel, m.GoVersion, m.Postgres, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tevents\tdelivered\tdeliveries\tdeliveries/s\tvs baseline\tvs baseline-fast\tp50 ms\tp95 ms\tp99 ms\thistory/delivery\tactions/delivery\tactions vs baseline\tapp CPU s/1k\ttemporal CPU s/1k\tpostgres CPU s/1k\treceiver CPU s/1k\t")
	for _, s := range rep.Scenarios {
		hist, acts, app, tmp, pg, rc := "-", "-", "-", "-", "-", "-"
		if s.HistoryPerDelivery > 0 {
			hist = fmt.Sprintf("%.1f", s.HistoryPerDelivery)
		}
		if s.ActionsPerDelivery > 0 {
			acts = fmt.Sprintf("%.2f", s.ActionsPerDelivery)
		}
		if s.CPUPer1000 != nil {
			app = fmt.Sprintf("%.1f", s.CPUPer1000["app"])
			tmp = fmt.Sprintf("%.1f", s.CPUPer1000[procTemporal])
			pg = fmt.Sprintf("%.1f", s.CPUPer1000[procPostgres])
			rc = fmt.Sprintf("%.1f", s.CPUPer1000[procReceiver])
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, s.Events, s.Delivered, s.Deliveries,
			s.DeliveriesPerSec, times(s.VsBaseline), times(s.VsBaselineFast), s.LatencyMS.P50, s.LatencyMS.P95, s.LatencyMS.P99, hist, acts, times(s.ActionsVsBaseline), app, tmp, pg, rc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\ndeliveries: webhooks delivered (one per event unless a scenario fans out); deliveries/s and the ratios compare webhook for webhook.")
	fmt.Fprintln(w, "latency: accepted (API 202 / workflow start returned / fast baseline's start call returned) → receiver commit. history/delivery: every workflow of the scenario + its share of the sequencer's.")
	fmt.Fprintln(w, "actions/delivery: Temporal Cloud's billable actions, counted from the same histories by its published rules (docs/performance.md), over the bare baseline's.")
	base, fast := rep.scenario(ScenarioBaseline), rep.scenario(ScenarioBaselineFast)
	for _, s := range rep.Scenarios {
		if s.ActionsPerDelivery <= 0 || s.Name == ScenarioBaseline || s.Name == ScenarioBaselineFast {
			continue
		}
		fmt.Fprintf(w, "  %s: %.2f actions per delivery (%.2f own + %.2f sequencer share) = %s the baseline's %.2f, %s baseline-fast's %.2f\n",
			s.Name, s.ActionsPerDelivery, s.ActionsWorkflow, s.ActionsSequencerShare,
			times(s.ActionsVsBaseline), base.ActionsPerDelivery, times(s.ActionsVsBaselineFast), fast.ActionsPerDelivery)
	}
	fmt.Fprintln(w, "CPU s/1k: CPU seconds per 1,000 deliveries from /proc; app = hookflow api+worker, the baseline's worker (the bench itself starts its workflows),")
	fmt.Fprintln(w, "or the fast baseline's process (starter and worker in one, as eager start needs); receiver = every receiver. idle rows: events/s is one at a time, ratios against the idle rows.")
	for _, s := range rep.Scenarios {
		if l := s.Lanes; l != nil {
			fmt.Fprintf(w, "  %s in hookflow's ledger (warm-up included): %d deliveries, %d not delivered, %d sent before their lane's previous sequence was delivered, %d delivered twice\n",
				s.Name, l.Deliveries, l.NotDelivered, l.OutOfOrder, l.DeliveredTwice)
		}
	}
	if e := rep.EagerStarts; e != nil {
		fmt.Fprintf(w, "baseline-fast: %d of %d starts ran eagerly (%d asked for it)", e.Accepted, e.Starts, e.Requested)
		if e.Accepted < e.Starts {
			fmt.Fprint(w, "; the others went through matching, as the baseline's")
		}
		fmt.Fprintln(w, ".")
	}

	fmt.Fprintln(w, "\nrounds (deliveries/s; interleaved, so noise hits every scenario alike):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	var burst []ScenarioResult
	rounds := 0
	for _, s := range rep.Scenarios {
		if len(s.Rounds) > 0 {
			burst = append(burst, s)
			rounds = max(rounds, len(s.Rounds))
		}
	}
	fmt.Fprint(tw, "round\t")
	for _, s := range burst {
		fmt.Fprintf(tw, "%s\t", s.Name)
	}
	fmt.Fprintln(tw, "ordered/baseline\tsingle/baseline\tordered/fast\tsingle/fast\tfan-out/ordered\tordered tenants/one\tfan-out tenants/one\t")
	for i := 0; i < rounds; i++ {
		fmt.Fprintf(tw, "%d\t", i+1)
		for _, s := range burst {
			if i < len(s.Rounds) {
				fmt.Fprintf(tw, "%.1f\t", s.Rounds[i].DeliveriesPerSec)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		r := rep.Ratios
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", at(r.OrderedPerRound, i), at(r.SingleKeyPerRound, i), at(r.OrderedPerRoundVsFast, i), at(r.SingleKeyPerRoundVsFast, i),
			at(r.FanOutPerRoundVsOrdered, i), at(r.OrderedTenantsPerRoundVsOne, i), at(r.FanOutTenantsPerRoundVsOne, i))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	rep.writeTenants(w)

	fmt.Fprintln(w, "\ntargets:")
	for _, t := range rep.Targets {
		mark := "MISSED"
		if t.Met {
			mark = "met"
		}
		fmt.Fprintf(w, "  [%-6s] %s: %s\n", mark, t.Goal, t.Measured)
	}
	if len(rep.FanOutTargets) > 0 {
		fmt.Fprintln(w, "\ntargets (fan-out; figures of this run, read as ratios on a busy machine):")
		for _, t := range rep.FanOutTargets {
			mark := "below target"
			if t.Met {
				mark = "at target"
			}
			fmt.Fprintf(w, "  %s: %s; target %s (%s)\n", t.Figure, t.Measured, t.Goal, mark)
		}
	}

	for _, tl := range rep.Timelines {
		fmt.Fprintf(w, "\nwhere the time goes, %s (median of %d, ms from send):\n", tl.Scenario, tl.Events)
		prev := 0.0
		for _, s := range tl.Steps {
			fmt.Fprintf(w, "  %8.1f  (+%6.1f)  %s\n", s.MedianMS, s.MedianMS-prev, s.Name)
			prev = s.MedianMS
		}
	}

	fmt.Fprintln(w, "\nhistory events by type (one event):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tbaseline workflow\tbaseline-fast workflow\tEventWorkflow\tsequencer share (ordered)\tsequencer share (single key)\tEventWorkflow (fan-out)\tsequencer share (fan-out)\t")
	h := rep.History
	types := map[string]bool{}
	for _, m := range []map[string]int{h.BaselineWorkflow, h.BaselineFastWorkflow, h.EventWorkflow, h.FanOutEventWorkflow} {
		for k := range m {
			types[k] = true
		}
	}
	for _, m := range []map[string]float64{h.SequencerPerEvent, h.SingleKeySequencerPerEvent, h.FanOutSequencerPerEvent} {
		for k := range m {
			types[k] = true
		}
	}
	names := make([]string, 0, len(types))
	for k := range types {
		names = append(names, k)
	}
	sort.Strings(names)
	var tb, tf, te, tn int
	var to, ts, tq float64
	for _, k := range names {
		b, f, e, n := h.BaselineWorkflow[k], h.BaselineFastWorkflow[k], h.EventWorkflow[k], h.FanOutEventWorkflow[k]
		o, s, q := h.SequencerPerEvent[k], h.SingleKeySequencerPerEvent[k], h.FanOutSequencerPerEvent[k]
		tb, tf, te, tn, to, ts, tq = tb+b, tf+f, te+e, tn+n, to+o, ts+s, tq+q
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.2f\t%d\t%.2f\t\n", k, b, f, e, o, s, n, q)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%.2f\t%.2f\t%d\t%.2f\t\n", tb, tf, te, to, ts, tn, tq)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nPostgres per delivery (committed transactions, reads included / rows written), by database (hookflow_receiver: every receiver's):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "scenario\t")
	for _, db := range pgDatabases {
		fmt.Fprintf(tw, "%s\t", db)
	}
	fmt.Fprintln(tw, "total\t")
	for _, sc := range rep.Scenarios {
		if sc.Postgres == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t", sc.Name)
		var tx, rows float64
		for _, db := range pgDatabases {
			v := sc.Postgres[db]
			tx, rows = tx+v.Transactions, rows+v.RowsWritten
			fmt.Fprintf(tw, "%.1f / %.1f\t", v.Transactions, v.RowsWritten)
		}
		fmt.Fprintf(tw, "%.1f / %.1f\t\n", tx, rows)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	bg := rep.Background
	if bg.Seconds > 0 {
		fmt.Fprintf(w, "idle stack (background, per second): CPU temporal %.3f s, postgres %.3f s, worker %.3f s; Postgres transactions %.1f, rows written %.1f\n",
			bg.CPUPerSec[procTemporal], bg.CPUPerSec[procPostgres], bg.CPUPerSec[procWorker], sumTx(bg.PostgresPerSec), sumRows(bg.PostgresPerSec))
	}
	fmt.Fprintln(w, "\nsequencers:")
	for _, s := range rep.Sequencers {
		fmt.Fprintf(w, "  %s: %d correlations, %d events, %d runs (%d continued as new), %d history events (%.2f per event), %d actions (%.2f per event), longest run %d\n",
			s.Scenario, s.Correlations, s.Events, s.Runs, s.ContinuedAsNew, s.HistoryEvents, s.PerEvent, s.Actions, s.ActionsPerEvent, s.MaxRunLength)
		if s.NotInVisibility > 0 {
			fmt.Fprintf(w, "    %d of those runs were missing from visibility and found through the continue-as-new chain\n", s.NotInVisibility)
		}
	}
	if rep.Destinations != nil {
		return rep.Destinations.writeTable(w)
	}
	return nil
}

// writeTenants sets each tenant-spread scenario beside its one-tenant twin
// (spreading over tenants should cost nothing: within noise of it): the rate
// and its ratio, overall and per round, what Temporal and the ledger did per
// delivery, and the exactly-once and order checks of both. Figures only,
// never asserted.
func (rep *Report) writeTenants(w io.Writer) {
	if rep.Settings.Tenants == 0 {
		return
	}
	fmt.Fprintf(w, "\ntenants (%d correlations spread over %d tenants vs one tenant, run back to back in every round):\n", rep.Settings.Correlations, rep.Settings.Tenants)
	for _, c := range []struct {
		spread, one, unit string
		all               float64
		rounds            []float64
	}{
		{ScenarioOrderedTenants, ScenarioOrdered, "events/s", rep.Ratios.OrderedTenantsVsOne, rep.Ratios.OrderedTenantsPerRoundVsOne},
		{ScenarioFanOutTenants, ScenarioFanOut, "deliveries/s", rep.Ratios.FanOutTenantsVsOne, rep.Ratios.FanOutTenantsPerRoundVsOne},
	} {
		s, o := rep.scenario(c.spread), rep.scenario(c.one)
		rate := func(x ScenarioResult) float64 {
			if c.unit == "events/s" {
				return x.EventsPerSec
			}
			return x.DeliveriesPerSec
		}
		fmt.Fprintf(w, "  %s vs %s: %.1f vs %.1f %s = %s (per round %s); history/delivery %.2f vs %.2f, actions/delivery %.2f vs %.2f\n",
			c.spread, c.one, rate(s), rate(o), c.unit, times(c.all), joinRatios(c.rounds),
			s.HistoryPerDelivery, o.HistoryPerDelivery, s.ActionsPerDelivery, o.ActionsPerDelivery)
		fmt.Fprintf(w, "    %s: %s; %s: %s\n", c.spread, laneSummary(s), c.one, laneSummary(o))
	}
}

// laneSummary is a row's exactly-once and order checks in a few words.
func laneSummary(s ScenarioResult) string {
	out := fmt.Sprintf("%d/%d events delivered", s.Delivered, s.Events)
	if s.InOrder != nil {
		out += fmt.Sprintf(", every receiver in order %v", *s.InOrder)
	}
	if l := s.Lanes; l != nil {
		out += fmt.Sprintf(", %d delivered twice, %d out of order, %d not delivered (of %d in hookflow's ledger)", l.DeliveredTwice, l.OutOfOrder, l.NotDelivered, l.Deliveries)
	}
	return out
}

// times formats a ratio; 0 (no figure to compare with) is "-".
func times(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

func at(v []float64, i int) string {
	if i < len(v) {
		return times(v[i])
	}
	return "-"
}

func sumTx(m map[string]PGPerEvent) float64 {
	t := 0.0
	for _, v := range m {
		t += v.Transactions
	}
	return t
}

func sumRows(m map[string]PGPerEvent) float64 {
	t := 0.0
	for _, v := range m {
		t += v.RowsWritten
	}
	return t
}
