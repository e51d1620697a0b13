package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// LedgerReport is a ledger-growth run: hookflow measured at each size of
// synthetic history, with the cleaner running, and the ledger's bytes per
// event before and after pruning.
type LedgerReport struct {
	StartedAt time.Time     `json:"started_at"`
	Seconds   float64       `json:"seconds"`
	Machine   Machine       `json:"machine"`
	Settings  Settings      `json:"settings"`
	History   LedgerHistory `json:"history"`
	Sizes     []LedgerSize  `json:"sizes"`
	// Verdicts compare the largest size with the smallest.
	Verdicts []Verdict `json:"verdicts"`
	// Bytes is the bytes-per-event measurement; nil when skipped.
	Bytes *LedgerBytes `json:"bytes,omitempty"`
}

// LedgerHistory is the shape of the synthetic history and the cleaner that
// works on it.
type LedgerHistory struct {
	SpanDays             float64 `json:"span_days"`
	NewestAgeHours       float64 `json:"newest_age_hours"`
	EventsPerCorrelation int64   `json:"events_per_correlation"`
	// RetriedEvery: one event in this many has two attempts (503, then 200).
	RetriedEvery     int64  `json:"retried_every"`
	SynthConnections int    `json:"synth_connections"`
	PayloadRetention string `json:"payload_retention"`
	AttemptRetention string `json:"attempt_retention"`
	KeyRetention     string `json:"key_retention"`
	CleanerInterval  string `json:"cleaner_interval"`
	// Past* are the shares of the history already past each retention when
	// it is written: the cleaner's backlog.
	PastPayloadRetention float64 `json:"past_payload_retention"`
	PastAttemptRetention float64 `json:"past_attempt_retention"`
	PastKeyRetention     float64 `json:"past_key_retention"`
}

// LedgerSize is one size of history and what hookflow did on top of it.
type LedgerSize struct {
	// Rows is the number of synthetic delivered events; Attempts and
	// Correlations are their attempts and cursors.
	Rows         int64 `json:"rows"`
	Attempts     int64 `json:"attempts"`
	Correlations int64 `json:"correlations"`
	// PayloadBytes is the mean stored size of a synthetic payload.
	PayloadBytes float64 `json:"payload_bytes"`
	SynthSeconds float64 `json:"synth_seconds"`
	// SettleSeconds is VACUUM (ANALYZE) and CHECKPOINT after the inserts.
	SettleSeconds float64 `json:"settle_seconds"`
	// LedgerBytes is events, attempts and cursors, indexes included, before
	// the traffic.
	LedgerBytes int64 `json:"ledger_bytes"`
	// Accept is POST /v1/events, from send to the 202, over the ordered
	// scenario's measured rounds (16 producers at once, by default).
	Accept Latency `json:"accept_ms"`
	// Ordered is the ordered scenario as the main bench reports it:
	// events/s, accept → commit latency, CPU, Postgres work.
	Ordered ScenarioResult `json:"ordered"`
	// MedianRoundPerSec is the median of the ordered rounds' events/s: one
	// round that stalls (a correlation waiting for the API's repair sweep)
	// moves it less than the total.
	MedianRoundPerSec float64 `json:"median_round_events_per_sec"`
	// IdleAccept and Idle are the single-key events sent one at a time:
	// send → 202, and accept → receiver commit.
	IdleAccept Latency        `json:"idle_accept_ms"`
	Idle       ScenarioResult `json:"idle"`
	Cleaner    LedgerCleaner  `json:"cleaner"`
	// Left is what remained of the synthetic history after the traffic.
	Left       LedgerLeft        `json:"left"`
	Statements []StatementTiming `json:"statements"`
}

// LedgerCleaner is what the API's cleaner did from the end of a size's
// synthesis to the end of its traffic, as GET /v1/stats reported its runs.
type LedgerCleaner struct {
	Runs            int     `json:"runs"`
	PayloadsPruned  int64   `json:"payloads_pruned"`
	AttemptsDeleted int64   `json:"attempts_deleted"`
	KeysDeleted     int64   `json:"keys_deleted"`
	LongestRunSec   float64 `json:"longest_run_seconds"`
	FailedRuns      int     `json:"failed_runs"`
	LastError       string  `json:"last_error,omitempty"`
	// Stats is how long GET /v1/stats took, polled every half interval.
	Stats Latency `json:"stats_ms"`
	Polls int     `json:"polls"`
}

// LedgerLeft counts the synthetic rows still there after a size's traffic.
type LedgerLeft struct {
	Events         int64 `json:"events"`
	PayloadsPruned int64 `json:"payloads_pruned"`
	Attempts       int64 `json:"attempts"`
}

// StatementTiming is one of hookflow's statements run under EXPLAIN
// (ANALYZE, BUFFERS) after a size's traffic, its writes rolled back.
type StatementTiming struct {
	Name       string  `json:"name"`
	ExecMS     float64 `json:"execution_ms"`
	PlanMS     float64 `json:"planning_ms"`
	SharedHit  int64   `json:"shared_hit_blocks"`
	SharedRead int64   `json:"shared_read_blocks"`
	Rows       float64 `json:"rows"`
	// Scans names every scan of the plan: "Index Scan using x", "Seq Scan
	// on y".
	Scans []string        `json:"scans"`
	Plan  json.RawMessage `json:"plan,omitempty"`
	Error string          `json:"error,omitempty"`
}

// Verdict says whether one figure stayed flat from the smallest size to the
// largest.
type Verdict struct {
	Metric string  `json:"metric"`
	From   int64   `json:"from_rows"`
	To     int64   `json:"to_rows"`
	Base   float64 `json:"base"`
	At     float64 `json:"at"`
	Ratio  float64 `json:"ratio"`
	Flat   bool    `json:"flat"`
}

// LedgerBytes is the bytes-per-event measurement: a ledger of Events
// synthetic delivered events read after VACUUM FULL at each stage of
// pruning.
type LedgerBytes struct {
	Events int64        `json:"events"`
	Stages []BytesStage `json:"stages"`
}

// BytesStage is the ledger's live size at one stage of pruning.
type BytesStage struct {
	Name string `json:"name"`
	// Pruned is what the cleaner did to reach this stage from the last,
	// and how long it took.
	PayloadsPruned  int64   `json:"payloads_pruned"`
	AttemptsDeleted int64   `json:"attempts_deleted"`
	KeysDeleted     int64   `json:"keys_deleted"`
	PruneSeconds    float64 `json:"prune_seconds"`
	EventsHeap      int64   `json:"events_heap_bytes"`
	EventsIndexes   int64   `json:"events_indexes_bytes"`
	// Deliveries is the deliveries' (one per event here), indexes included.
	Deliveries int64 `json:"deliveries_bytes"`
	Attempts   int64 `json:"attempts_bytes"`
	// Correlations is every cursor: the correlations' and their lanes'.
	Correlations int64   `json:"correlations_bytes"`
	Total        int64   `json:"total_bytes"`
	PerEvent     float64 `json:"bytes_per_event"`
}

// ParseLedgerRows reads a comma-separated list of sizes: whole numbers,
// with an optional k (thousand) or M (million) suffix: "0,1M,5M".
func ParseLedgerRows(s string) ([]int64, error) {
	var out []int64
	for _, orig := range strings.Split(s, ",") {
		f := strings.TrimSpace(strings.ReplaceAll(orig, "_", ""))
		mult := int64(1)
		switch {
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1000, f[:len(f)-1]
		case strings.HasSuffix(f, "m"), strings.HasSuffix(f, "M"):
			mult, f = 1000000, f[:len(f)-1]
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a whole number of rows (0, 20000, 1M, …)", strings.TrimSpace(orig))
		}
		if n > maxLedgerRows/mult {
			return nil, fmt.Errorf("%s is more than the bench synthesises (%s)", strings.TrimSpace(orig), thousands(maxLedgerRows))
		}
		out = append(out, n*mult)
	}
	if len(out) == 0 {
		return nil, errors.New("no size given")
	}
	return out, nil
}

// bytesRows is the size of the bytes-per-event ledger: requested when not
// negative, else the largest size measured, at most DefaultLedgerBytesRows.
func bytesRows(sizes []int64, requested int64) int64 {
	if requested >= 0 {
		return requested
	}
	var largest int64
	for _, n := range sizes {
		largest = max(largest, n)
	}
	return min(largest, DefaultLedgerBytesRows)
}

// pastRetention is the share of a history spread evenly over span, its
// newest entry newest old, that is older than retention (0 keeps for ever).
func pastRetention(span, newest, retention time.Duration) float64 {
	if retention <= 0 || span <= 0 {
		return 0
	}
	f := float64(newest+span-retention) / float64(span)
	return min(max(f, 0), 1)
}

// Flatness thresholds: a latency is flat when it grows by at most 25 % (and
// 2 ms: a few milliseconds are noise on a busy machine); a rate when it
// drops by at most 20 %.
const (
	flatLatencyRatio = 1.25
	flatLatencySlack = 2.0
	flatRateRatio    = 0.8
)

// flatness compares the largest size's figures with the smallest size's.
func flatness(sizes []LedgerSize) []Verdict {
	if len(sizes) < 2 {
		return nil
	}
	lo, hi := sizes[0], sizes[0]
	for _, s := range sizes[1:] {
		if s.Rows < lo.Rows {
			lo = s
		}
		if s.Rows > hi.Rows {
			hi = s
		}
	}
	if lo.Rows == hi.Rows {
		return nil
	}
	latency := func(metric string, base, at float64) Verdict {
		return Verdict{Metric: metric, From: lo.Rows, To: hi.Rows, Base: base, At: at, Ratio: ratio(at, base),
			Flat: at <= base*flatLatencyRatio+flatLatencySlack}
	}
	rate := func(metric string, base, at float64) Verdict {
		return Verdict{Metric: metric, From: lo.Rows, To: hi.Rows, Base: base, At: at, Ratio: ratio(at, base),
			Flat: base > 0 && at >= base*flatRateRatio}
	}
	return []Verdict{
		latency("accept p50 ms (under load)", lo.Accept.P50, hi.Accept.P50),
		latency("accept p99 ms (under load)", lo.Accept.P99, hi.Accept.P99),
		latency("idle accept p50 ms", lo.IdleAccept.P50, hi.IdleAccept.P50),
		latency("idle accept p99 ms", lo.IdleAccept.P99, hi.IdleAccept.P99),
		rate("ordered events/s (median round)", lo.MedianRoundPerSec, hi.MedianRoundPerSec),
		rate("ordered events/s (all rounds)", lo.Ordered.EventsPerSec, hi.Ordered.EventsPerSec),
		latency("idle accept→commit p50 ms", lo.Idle.LatencyMS.P50, hi.Idle.LatencyMS.P50),
	}
}

// medianRound is the median events/s of rounds (0 without any).
func medianRound(rounds []RoundResult) float64 {
	if len(rounds) == 0 {
		return 0
	}
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = r.EventsPerSec
	}
	return median(v)
}

// roundRates lists the rounds' events/s: "24.6 22.7 6.8".
func roundRates(rounds []RoundResult) string {
	if len(rounds) == 0 {
		return "-"
	}
	s := make([]string, len(rounds))
	for i, r := range rounds {
		s[i] = fmt.Sprintf("%.1f", r.EventsPerSec)
	}
	return strings.Join(s, " ")
}

// thousands formats n with commas: 5,000,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func mb(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// WriteJSON writes the report to path.
func (rep *LedgerReport) WriteJSON(path string) error { return writeJSON(path, "ledger report", rep) }

// WriteTable prints what was measured at each size, the cleaner's work, the
// statement timings, the verdicts and the bytes per event.
func (rep *LedgerReport) WriteTable(w io.Writer) error {
	m, st, h := rep.Machine, rep.Settings, rep.History
	sizes := make([]string, len(rep.Sizes))
	for i, s := range rep.Sizes {
		sizes[i] = thousands(s.Rows)
	}
	fmt.Fprintf(w, "hookflow bench --ledger-rows %s: hookflow on top of that many delivered events of history, with the cleaner running\n",
		strings.Join(sizes, " / "))
	fmt.Fprintf(w, "history: synthesised by SQL before each size into an emptied ledger (generate_series on up to %d connections, foreign-key triggers off, every index kept),\n", h.SynthConnections)
	fmt.Fprintf(w, "  then VACUUM (ANALYZE) and CHECKPOINT: delivered events spread over the last %.0f days (the newest %.0f h old), %d per correlation with its cursor past them,\n",
		h.SpanDays, h.NewestAgeHours, h.EventsPerCorrelation)
	payload := 0.0
	for _, s := range rep.Sizes {
		payload = max(payload, s.PayloadBytes)
	}
	fmt.Fprintf(w, "  a JSON payload of %.0f bytes as stored (jsonb), one attempt each (one event in %d: a 503, then the delivery).\n", payload, h.RetriedEvery)
	fmt.Fprintf(w, "cleaner: the API's own, retentions payload %s, attempts %s, keys %s (hookflow's defaults), every %s in batches of 1,000;\n",
		h.PayloadRetention, h.AttemptRetention, h.KeyRetention, h.CleanerInterval)
	if h.PastPayloadRetention+h.PastAttemptRetention+h.PastKeyRetention > 0 {
		fmt.Fprintf(w, "  %.0f %% of the payloads, %.0f %% of the attempts and %.0f %% of the keys are past retention when the history is written.\n",
			100*h.PastPayloadRetention, 100*h.PastAttemptRetention, 100*h.PastKeyRetention)
	} else {
		fmt.Fprintln(w, "  nothing is past retention: the cleaner runs but finds nothing to prune, so what is measured is the history's size alone.")
	}
	fmt.Fprintf(w, "traffic per size: the ordered scenario (%d events over %d correlations, %d producers, %d rounds), then %d single-key events one at a time; Postgres fsync %s\n",
		st.Events, st.Correlations, st.Concurrency, st.Rounds, st.IdleEvents, onOff(st.PostgresFsync))
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, Linux %s, %s, PostgreSQL %s, load average %s at start, %s at end; %.0f s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.Kernel, m.GoVersion, m.Postgres, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "history rows\tattempts\tledger MB\tsynth s\taccept p50 ms\tp99 ms\tidle accept p50 ms\tp99 ms\tordered events/s\tmedian round\tidle accept→commit p50 ms\tp99 ms\tapp CPU s/1k\tpostgres CPU s/1k\t")
	for _, s := range rep.Sizes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n",
			thousands(s.Rows), thousands(s.Attempts), mb(s.LedgerBytes), s.SynthSeconds+s.SettleSeconds,
			s.Accept.P50, s.Accept.P99, s.IdleAccept.P50, s.IdleAccept.P99, s.Ordered.EventsPerSec, s.MedianRoundPerSec,
			s.Idle.LatencyMS.P50, s.Idle.LatencyMS.P99, s.Ordered.CPUPer1000["app"], s.Ordered.CPUPer1000[procPostgres])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\naccept: POST /v1/events from send to its 202, under the ordered scenario's load (its producers at once), and idle (the single key, one at a time).")
	fmt.Fprintln(w, "accept→commit: 202 → the receiver's commit. synth s: inserts, VACUUM (ANALYZE), CHECKPOINT. ordered events/s: all rounds together, and the median round.")
	fmt.Fprintln(w, "CPU s/1k: CPU seconds per 1,000 delivered events of the ordered scenario (app = api+worker); the cleaner's work runs in the api and in Postgres, so it is counted there.")
	fmt.Fprintln(w, "\nthe ordered scenario by round (events/s; a round far below the others had a correlation wait for the API's repair sweep) and its accept → commit:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "history rows\trounds events/s\taccept→commit p50 ms\tp99 ms\t")
	for _, s := range rep.Sizes {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t\n", thousands(s.Rows), roundRates(s.Ordered.Rounds), s.Ordered.LatencyMS.P50, s.Ordered.LatencyMS.P99)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(w, "\nthe cleaner during each size (its runs from the end of the synthesis to the end of the traffic, from GET /v1/stats polled every %s):\n", halfInterval(h.CleanerInterval))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "history rows\truns\tpayloads pruned\tattempts deleted\tkeys deleted\tlongest run s\tfailed runs\tGET /v1/stats p50 ms\tmax ms\tleft: events\tpayloads emptied\tattempts\t")
	for _, s := range rep.Sizes {
		c := s.Cleaner
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.1f\t%d\t%.1f\t%.1f\t%s\t%s\t%s\t\n", thousands(s.Rows), c.Runs, thousands(c.PayloadsPruned),
			thousands(c.AttemptsDeleted), thousands(c.KeysDeleted), c.LongestRunSec, c.FailedRuns, c.Stats.P50, c.Stats.Max,
			thousands(s.Left.Events), thousands(s.Left.PayloadsPruned), thousands(s.Left.Attempts))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rep.Sizes {
		if s.Cleaner.LastError != "" {
			fmt.Fprintf(w, "  at %s rows a cleaner run failed: %s\n", thousands(s.Rows), s.Cleaner.LastError)
		}
	}

	if err := rep.writeStatements(w); err != nil {
		return err
	}

	if len(rep.Verdicts) > 0 {
		fmt.Fprintf(w, "\nflat? (the largest size against the smallest; latency flat within ×%.2f + %.0f ms, rate within ×%.1f):\n", flatLatencyRatio, flatLatencySlack, flatRateRatio)
		for _, v := range rep.Verdicts {
			mark := "GROWS"
			if strings.HasSuffix(v.Metric, "/s") {
				mark = "DROPS"
			}
			if v.Flat {
				mark = "flat"
			}
			fmt.Fprintf(w, "  [%-5s] %s: %.1f at %s rows, %.1f at %s rows (%s)\n", mark, v.Metric, v.Base, thousands(v.From), v.At, thousands(v.To), times(v.Ratio))
		}
	}

	if b := rep.Bytes; b != nil && len(b.Stages) > 0 {
		fmt.Fprintf(w, "\nPostgres bytes per delivered event: %s synthetic delivered events (shaped as above, all within the last day), the cleaner's own code run to completion\n", thousands(b.Events))
		fmt.Fprintln(w, "with retentions of 1 s for what each stage prunes, then VACUUM (FULL, ANALYZE) before each reading, so the figures are live sizes (pg_table_size, pg_indexes_size, pg_total_relation_size):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stage\tevents heap MB\tevents indexes MB\tdeliveries MB\tattempts MB\tcursors MB\ttotal MB\tbytes/event\tpruned to get here\tprune s\t")
		for _, s := range b.Stages {
			pruned := "-"
			if s.PayloadsPruned+s.AttemptsDeleted+s.KeysDeleted > 0 {
				pruned = fmt.Sprintf("%s payloads, %s attempts, %s keys", thousands(s.PayloadsPruned), thousands(s.AttemptsDeleted), thousands(s.KeysDeleted))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%.1f\t\n", s.Name, mb(s.EventsHeap), mb(s.EventsIndexes), mb(s.Deliveries), mb(s.Attempts), mb(s.Correlations),
				mb(s.Total), s.PerEvent, pruned, s.PruneSeconds)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeStatements prints each statement's execution time at every size.
func (rep *LedgerReport) writeStatements(w io.Writer) error {
	if len(rep.Sizes) == 0 || len(rep.Sizes[0].Statements) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nhookflow's statements after each size's traffic (EXPLAIN (ANALYZE, BUFFERS), writes rolled back): execution ms / shared buffers hit+read")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "statement\t")
	for _, s := range rep.Sizes {
		fmt.Fprintf(tw, "%s rows\t", thousands(s.Rows))
	}
	fmt.Fprintln(tw, "scans at the largest size\t")
	largest := rep.Sizes[0]
	for _, s := range rep.Sizes {
		if s.Rows > largest.Rows {
			largest = s
		}
	}
	for i, first := range rep.Sizes[0].Statements {
		fmt.Fprintf(tw, "%s\t", first.Name)
		for _, s := range rep.Sizes {
			if i >= len(s.Statements) || s.Statements[i].Error != "" {
				fmt.Fprint(tw, "error\t")
				continue
			}
			t := s.Statements[i]
			fmt.Fprintf(tw, "%.2f / %d\t", t.ExecMS, t.SharedHit+t.SharedRead)
		}
		scans := "-"
		if i < len(largest.Statements) {
			if t := largest.Statements[i]; t.Error != "" {
				scans = t.Error
			} else if len(t.Scans) > 0 {
				scans = strings.Join(t.Scans, "; ")
			}
		}
		fmt.Fprintf(tw, "%s\t\n", scans)
	}
	return tw.Flush()
}

// halfInterval is half of a duration written as Go prints it.
func halfInterval(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	return (d / 2).String()
}
