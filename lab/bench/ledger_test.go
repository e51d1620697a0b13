package bench

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/lab/bench/internal/dbsqlc"
)

func TestParseLedgerRows(t *testing.T) {
	t.Parallel()
	got, err := ParseLedgerRows("0, 1M,5_000_000,20k")
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1_000_000, 5_000_000, 20_000}, got)
	for _, bad := range []string{"", "1,,2", "-5", "1.5M", "ten", "200M"} {
		_, err := ParseLedgerRows(bad)
		require.Error(t, err, bad)
	}
}

func TestBytesRows(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(1_000_000), bytesRows([]int64{0, 1_000_000, 5_000_000}, -1), "the largest size, capped")
	require.Equal(t, int64(20_000), bytesRows([]int64{0, 20_000}, -1))
	require.Zero(t, bytesRows([]int64{0}, -1), "no history, nothing to weigh")
	require.Equal(t, int64(5_000_000), bytesRows([]int64{0}, 5_000_000), "asked for")
	require.Zero(t, bytesRows([]int64{1_000_000}, 0), "0 skips it")
}

func TestPastRetention(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	// 120 days of history, the newest an hour old: with 30 d, 30 d and 90 d
	// retentions, about 75 %, 75 % and 25 % of it is overdue at once.
	require.InDelta(t, 0.75, pastRetention(120*day, time.Hour, 30*day), 0.001)
	require.InDelta(t, 0.25, pastRetention(120*day, time.Hour, 90*day), 0.001)
	require.Zero(t, pastRetention(120*day, time.Hour, 0), "kept for ever")
	require.Zero(t, pastRetention(day, time.Hour, 30*day), "younger than the retention")
	require.Equal(t, 1.0, pastRetention(day, 40*day, 30*day), "all older")
}

func TestSynthPlan(t *testing.T) {
	t.Parallel()
	p := newSynthPlan(1050, 100, 400)
	require.Equal(t, int64(11), p.correlations, "100 per correlation, rounded up")
	require.Equal(t, []rowSpan{{0, 400}, {400, 800}, {800, 1050}}, p.batches)
	require.Equal(t, int64(1050+105), p.attempts(), "one each, two for every tenth (i % 10 = 0)")

	// eventsOf agrees with dealing event i to correlation i % correlations,
	// as LedgerEventsInsert does, and the cursor is past the last sequence.
	counts := map[int64]int64{}
	last := map[int64]int64{}
	for i := int64(0); i < p.rows; i++ {
		c := i % p.correlations
		counts[c]++
		last[c] = i/p.correlations + 1
	}
	var sum int64
	for c := int64(0); c < p.correlations; c++ {
		require.Equal(t, counts[c], p.eventsOf(c), "correlation %d", c)
		require.Equal(t, last[c], p.eventsOf(c), "its last sequence is its count")
		sum += p.eventsOf(c)
	}
	require.Equal(t, p.rows, sum)
	require.Zero(t, p.eventsOf(p.correlations))

	empty := newSynthPlan(0, 100, 400)
	require.Zero(t, empty.correlations)
	require.Empty(t, empty.batches)
	require.Zero(t, empty.attempts())

	five := newSynthPlan(5_000_000, ledgerEventsPerCorrelation, synthBatch)
	require.Equal(t, int64(50_000), five.correlations)
	require.Len(t, five.batches, 50)
	require.Equal(t, int64(5_500_000), five.attempts())
}

// TestLedgerQueries checks the bench's SQL loads and that each statement's
// parameters are numbered 1…n with n what the Go side passes (Postgres
// cannot type a parameter that is skipped).
func TestLedgerQueries(t *testing.T) {
	t.Parallel()
	book := map[string]string{
		"LedgerTruncate": dbsqlc.LedgerTruncate, "LedgerReplicaRole": dbsqlc.LedgerReplicaRole,
		"LedgerEventsInsert": dbsqlc.LedgerEventsInsert, "LedgerAttemptsInsert": dbsqlc.LedgerAttemptsInsert,
		"LedgerCorrelationsInsert": dbsqlc.LedgerCorrelationsInsert, "LedgerVacuumAnalyze": dbsqlc.LedgerVacuumAnalyze,
		"LedgerVacuumFull": dbsqlc.LedgerVacuumFull, "LedgerCheckpoint": dbsqlc.LedgerCheckpoint,
		"LedgerSizes": dbsqlc.LedgerSizes, "LedgerCounts": dbsqlc.LedgerCounts,
	}

	param := regexp.MustCompile(`\$(\d+)`)
	want := map[string]int{
		"LedgerEventsInsert": 7, "LedgerAttemptsInsert": 6, "LedgerCorrelationsInsert": 7,
		"LedgerTruncate": 0, "LedgerReplicaRole": 0, "LedgerVacuumAnalyze": 0, "LedgerVacuumFull": 0,
		"LedgerCheckpoint": 0, "LedgerSizes": 0, "LedgerCounts": 0,
	}
	for name, n := range want {
		used := map[int]bool{}
		for _, m := range param.FindAllStringSubmatch(book[name], -1) {
			k, _ := strconv.Atoi(m[1])
			used[k] = true
		}
		require.Len(t, used, n, name)
		for k := 1; k <= n; k++ {
			require.True(t, used[k], "%s uses $%d", name, k)
		}
	}
	// The synthetic history must look like hookflow's own: delivered rows
	// with a payload, and the retried shape the report describes.
	require.Contains(t, dbsqlc.LedgerEventsInsert, "'delivered'")
	require.Contains(t, dbsqlc.LedgerAttemptsInsert, "g.i % 10 = 0", "one in ledgerRetriedEvery")
	require.Equal(t, 10, ledgerRetriedEvery)
	require.Contains(t, dbsqlc.LedgerTruncate, "cleaner_runs")
	// Since fan-out (migration 009) an event's routing is its deliveries and
	// a cursor is a lane's too: the history writes both, and every size
	// starts without the last one's.
	require.Contains(t, dbsqlc.LedgerEventsInsert, "INSERT INTO deliveries")
	require.Contains(t, dbsqlc.LedgerAttemptsInsert, "endpoint_id")
	require.Contains(t, dbsqlc.LedgerCorrelationsInsert, "INSERT INTO lanes")
	for _, table := range []string{"deliveries", "lanes"} {
		require.Contains(t, dbsqlc.LedgerTruncate, table)
		require.Contains(t, dbsqlc.LedgerVacuumFull, table)
	}
}

func TestCleanerRuns(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	c := newCleanerRuns(t0)
	run := func(start time.Duration, took time.Duration, p, a, k int64) store.CleanerRun {
		return store.CleanerRun{StartedAt: t0.Add(start), FinishedAt: t0.Add(start + took), PayloadsPruned: p, AttemptsDeleted: a, KeysDeleted: k}
	}
	c.add(run(-20*time.Second, time.Second, 99, 99, 99)) // ended before the watch: not counted
	c.add(run(-time.Second, 3*time.Second, 1000, 0, 0))  // ended after it started
	c.add(run(-time.Second, 3*time.Second, 1000, 0, 0))  // the same run, polled twice
	c.add(run(10*time.Second, 5*time.Second, 2000, 300, 0))
	msg := "prune payloads: boom"
	failed := run(20*time.Second, time.Second, 0, 0, 0)
	failed.Error = &msg
	c.add(failed)
	c.polled(4*time.Millisecond, nil)
	c.polled(6*time.Millisecond, nil)
	s := c.summary()
	require.Equal(t, 3, s.Runs)
	require.Equal(t, int64(3000), s.PayloadsPruned)
	require.Equal(t, int64(300), s.AttemptsDeleted)
	require.Zero(t, s.KeysDeleted)
	require.InDelta(t, 5, s.LongestRunSec, 1e-9)
	require.Equal(t, 1, s.FailedRuns)
	require.Equal(t, msg, s.LastError)
	require.Equal(t, 2, s.Polls)
	require.Equal(t, 4.0, s.Stats.P50)
}

func TestFlatness(t *testing.T) {
	t.Parallel()
	size := func(rows int64, p50, p99, idleP50, idleP99, median, rate, idle float64) LedgerSize {
		return LedgerSize{Rows: rows, Accept: Latency{P50: p50, P99: p99}, IdleAccept: Latency{P50: idleP50, P99: idleP99},
			MedianRoundPerSec: median, Ordered: ScenarioResult{EventsPerSec: rate}, Idle: ScenarioResult{LatencyMS: Latency{P50: idle}}}
	}
	v := flatness([]LedgerSize{
		size(5_000_000, 13, 80, 31, 240, 22, 15, 22),
		size(0, 10, 40, 23, 37, 23, 30, 20),
		size(1_000_000, 11, 45, 30, 90, 22.5, 29, 21),
	})
	require.Len(t, v, 7)
	got := map[string]bool{}
	for _, x := range v {
		require.Equal(t, int64(0), x.From, "the smallest size, wherever it is in the list")
		require.Equal(t, int64(5_000_000), x.To)
		got[x.Metric] = x.Flat
	}
	require.Equal(t, map[string]bool{
		"accept p50 ms (under load)":      true,  // 13 ≤ 10 × 1.25 + 2
		"accept p99 ms (under load)":      false, // 80 > 40 × 1.25 + 2
		"idle accept p50 ms":              false, // 31 > 23 × 1.25 + 2
		"idle accept p99 ms":              false,
		"ordered events/s (median round)": true,  // 22 ≥ 23 × 0.8
		"ordered events/s (all rounds)":   false, // 15 < 30 × 0.8
		"idle accept→commit p50 ms":       true,
	}, got)
	one := size(0, 1, 1, 1, 1, 1, 1, 1)
	require.Nil(t, flatness([]LedgerSize{one}), "one size: nothing to compare")
	require.Nil(t, flatness([]LedgerSize{one, one}), "one size twice")
	require.False(t, flatness([]LedgerSize{one, size(9, 1, 1, 1, 1, 0, 0, 1)})[4].Flat, "nothing delivered is not flat")
}

func TestRounds(t *testing.T) {
	t.Parallel()
	r := []RoundResult{{EventsPerSec: 24.6}, {EventsPerSec: 6.8}, {EventsPerSec: 22.7}, {EventsPerSec: 23.3}}
	require.InDelta(t, 23.0, medianRound(r), 1e-9)
	require.Equal(t, "24.6 6.8 22.7 23.3", roundRates(r))
	require.Zero(t, medianRound(nil))
	require.Equal(t, "-", roundRates(nil))
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 5_000_000: "5,000,000", -1234: "-1,234", 123456: "123,456"} {
		require.Equal(t, want, thousands(n))
	}
}

func TestParseExplain(t *testing.T) {
	t.Parallel()
	raw := []byte(`[{"Plan": {"Node Type": "ModifyTable", "Operation": "Update", "Relation Name": "events", "Actual Rows": 0, "Actual Loops": 1,
	  "Shared Hit Blocks": 5120, "Shared Read Blocks": 12,
	  "Plans": [{"Node Type": "Nested Loop", "Actual Rows": 1000, "Actual Loops": 1, "Plans": [
	    {"Node Type": "Subquery Scan", "Alias": "old", "Actual Rows": 1000, "Actual Loops": 1, "Plans": [
	      {"Node Type": "Limit", "Actual Rows": 1000, "Actual Loops": 1, "Plans": [
	        {"Node Type": "Index Scan", "Relation Name": "events", "Index Name": "events_payload_prunable_idx", "Actual Rows": 1000, "Actual Loops": 1}]}]},
	    {"Node Type": "Index Scan", "Relation Name": "events", "Index Name": "events_pkey", "Actual Rows": 1, "Actual Loops": 1000}]}]},
	  "Planning Time": 0.25, "Execution Time": 31.5}]`)
	got, err := parseExplain(raw)
	require.NoError(t, err)
	require.InDelta(t, 31.5, got.ExecMS, 1e-9)
	require.InDelta(t, 0.25, got.PlanMS, 1e-9)
	require.Equal(t, int64(5120), got.SharedHit)
	require.Equal(t, int64(12), got.SharedRead)
	require.Equal(t, []string{
		"Index Scan using events_payload_prunable_idx (1000 rows)",
		"Index Scan using events_pkey (1000 rows)",
		"Subquery Scan (1000 rows)",
	}, got.Scans)
	require.JSONEq(t, string(raw), string(got.Plan))

	_, err = parseExplain([]byte(`[]`))
	require.Error(t, err)
	_, err = parseExplain([]byte(`not json`))
	require.Error(t, err)
}

func sampleLedgerReport() *LedgerReport {
	size := func(rows int64, p50, rate float64) LedgerSize {
		return LedgerSize{
			Rows: rows, Attempts: rows + rows/10, Correlations: rows / 100, LedgerBytes: rows * 900, SynthSeconds: float64(rows) / 50000,
			Accept: Latency{P50: p50, P99: 4 * p50},
			Ordered: ScenarioResult{EventsPerSec: rate, LatencyMS: Latency{P50: 300, P99: 900}, CPUPer1000: map[string]float64{"app": 9, procPostgres: 12},
				Rounds: []RoundResult{{EventsPerSec: rate + 1}, {EventsPerSec: rate - 1}}},
			MedianRoundPerSec: rate,
			Idle:              ScenarioResult{LatencyMS: Latency{P50: 25, P99: 40}}, IdleAccept: Latency{P50: 8, P99: 12},
			Cleaner: LedgerCleaner{Runs: 6, PayloadsPruned: rows / 4, LongestRunSec: 5, Stats: Latency{P50: 3, Max: 9}},
			Left:    LedgerLeft{Events: rows, PayloadsPruned: rows / 4, Attempts: rows + rows/10},
			Statements: []StatementTiming{
				{Name: "EventInsertRouted (accept)", ExecMS: 0.2, SharedHit: 20, Scans: []string{"Index Scan using correlations_pkey (0 rows)"}},
				{Name: "StatsSummary (GET /v1/stats)", ExecMS: 0.1, SharedHit: 4},
			},
		}
	}
	rep := &LedgerReport{
		Settings: Settings{Events: 2000, Concurrency: 16, Correlations: 50, Rounds: 4, IdleEvents: 30, PostgresFsync: true},
		History: LedgerHistory{SpanDays: 120, NewestAgeHours: 1, EventsPerCorrelation: 100, RetriedEvery: 10, SynthConnections: 2,
			PayloadRetention: "30d", AttemptRetention: "30d", KeyRetention: "90d", CleanerInterval: "10s",
			PastPayloadRetention: 0.75, PastAttemptRetention: 0.75, PastKeyRetention: 0.25},
		Sizes: []LedgerSize{size(0, 10, 30), size(1_000_000, 10.5, 29), size(5_000_000, 30, 28)},
		Bytes: &LedgerBytes{Events: 1_000_000, Stages: []BytesStage{
			{Name: "as delivered", EventsHeap: 500 << 20, EventsIndexes: 300 << 20, Deliveries: 120 << 20, Attempts: 150 << 20, Correlations: 1 << 20, Total: 1071 << 20, PerEvent: 1123},
			{Name: "+ keys pruned (cursors kept)", KeysDeleted: 1_000_000, PruneSeconds: 40, Correlations: 1 << 20, Total: 1 << 20, PerEvent: 1},
		}},
	}
	rep.Verdicts = flatness(rep.Sizes)
	return rep
}

func TestLedgerWriteTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	require.NoError(t, sampleLedgerReport().WriteTable(&b))
	out := b.String()
	require.Contains(t, out, "--ledger-rows 0 / 1,000,000 / 5,000,000")
	require.Contains(t, out, "75 % of the payloads, 75 % of the attempts and 25 % of the keys are past retention")
	require.Contains(t, out, "polled every 5s")
	// The 5M row: 5,500,000 attempts, 4,291.5 MB, 100 s to synthesise, accept p50 30, p99 120, idle 8 / 12,
	// 28 events/s, median round 28, idle accept→commit 25 / 40, CPU 9 and 12.
	require.Regexp(t, `\n\s*5,000,000\s+5,500,000\s+4291\.5\s+100\s+30\.0\s+120\.0\s+8\.0\s+12\.0\s+28\.0\s+28\.0\s+25\.0\s+40\.0\s+9\.0\s+12\.0\s*\n`, out)
	require.Regexp(t, `\n\s*5,000,000\s+29\.0 27\.0\s+300\s+900\s*\n`, out)
	require.Regexp(t, `\n\s*1,000,000\s+6\s+250,000\s+0\s+0\s+5\.0\s+0\s+3\.0\s+9\.0\s+1,000,000\s+250,000\s+1,100,000\s*\n`, out)
	require.Regexp(t, `EventInsertRouted \(accept\)\s+0\.20 / 20\s+0\.20 / 20\s+0\.20 / 20\s+Index Scan using correlations_pkey`, out)
	require.Contains(t, out, "[GROWS] accept p50 ms (under load): 10.0 at 0 rows, 30.0 at 5,000,000 rows (3.00×)")
	require.Contains(t, out, "[flat ] ordered events/s (median round): 30.0 at 0 rows, 28.0 at 5,000,000 rows (0.93×)")
	require.Contains(t, out, "Postgres bytes per delivered event: 1,000,000 synthetic delivered events")
	require.Regexp(t, `as delivered\s+500\.0\s+300\.0\s+120\.0\s+150\.0\s+1\.0\s+1071\.0\s+1123\s+-\s+0\.0`, out)
	require.Regexp(t, `\+ keys pruned \(cursors kept\)\s+0\.0\s+0\.0\s+0\.0\s+0\.0\s+1\.0\s+1\.0\s+1\s+0 payloads, 0 attempts, 1,000,000 keys\s+40\.0`, out)
}

func TestLedgerWriteTableNoBacklog(t *testing.T) {
	t.Parallel()
	rep := sampleLedgerReport()
	rep.History.SpanDays, rep.History.PastPayloadRetention, rep.History.PastAttemptRetention, rep.History.PastKeyRetention = 29, 0, 0, 0
	rep.Bytes = nil
	var b strings.Builder
	require.NoError(t, rep.WriteTable(&b))
	out := b.String()
	require.Contains(t, out, "spread over the last 29 days")
	require.Contains(t, out, "nothing is past retention")
	require.NotContains(t, out, "bytes per delivered event")
}
