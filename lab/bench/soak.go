package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"
	"time"
)

// SoakRoundSize is how many events one soak round posts at once.
const SoakRoundSize = 5000

// SoakReport is a long run on one correlation: does hookflow stay as fast
// and as small at its 100,000th event as at its first?
type SoakReport struct {
	StartedAt   time.Time   `json:"started_at"`
	Machine     Machine     `json:"machine"`
	Events      int         `json:"events"`
	Delivered   int         `json:"delivered"`
	Correlation string      `json:"correlation"`
	InOrder     bool        `json:"in_order"`
	Seconds     float64     `json:"seconds"`
	Rounds      []SoakRound `json:"rounds"`
	WorkerRSS   []RSSPoint  `json:"worker_rss"`
	// HistoryPerEvent is the mean history length of events sampled from
	// the last round: what a late event of a long correlation costs.
	HistoryPerEvent float64 `json:"history_per_event"`
	// Sequencer sums up the correlation's sequencer over the whole soak:
	// its runs (continue-as-new keeps each one short), the longest, and its
	// history per event of the correlation.
	Sequencer SequencerStat `json:"sequencer"`
}

// SoakRound is one burst of the soak.
type SoakRound struct {
	Round        int     `json:"round"`
	Events       int     `json:"events"`
	Delivered    int     `json:"delivered"`
	UpTo         int     `json:"up_to"` // the correlation's length after it
	EventsPerSec float64 `json:"events_per_sec"`
	P50ms        float64 `json:"p50_ms"`
	RSSEndMB     float64 `json:"rss_end_mb"`
	RSSMaxMB     float64 `json:"rss_max_mb"`
	// SequencerRuns and SequencerLongestRun are the sequencer's runs so
	// far and the longest of them, in history events.
	SequencerRuns       int `json:"sequencer_runs"`
	SequencerLongestRun int `json:"sequencer_longest_run"`
}

// Soak starts a stack and posts cfg.Events events to one correlation in
// bursts of SoakRoundSize, recording each burst's rate, the worker's RSS and
// the sequencer's runs.
func Soak(ctx context.Context, cfg Config, logger *slog.Logger) (*SoakReport, error) {
	var rep *SoakReport
	err := onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &SoakReport{StartedAt: r.p.began.UTC(), Machine: m, Events: r.cfg.Events, Correlation: r.single.corr(0)}
		return r.soak(ctx, rep)
	})
	return rep, err
}

// soak runs the bursts of Soak and fills rep.
func (r *runner) soak(ctx context.Context, rep *SoakReport) error {
	var last RoundResult
	closed := map[string]closedRun{}
	for round, done := 1, 0; done < r.cfg.Events; round++ {
		n := min(SoakRoundSize, r.cfg.Events-done)
		res, err := r.burst(ctx, r.single, fmt.Sprintf("s%d", round), n)
		if err != nil {
			return err
		}
		done += n
		rep.Delivered += res.Delivered
		sr := SoakRound{Round: round, Events: n, Delivered: res.Delivered, UpTo: done, EventsPerSec: res.EventsPerSec,
			P50ms: percentiles(res.latencies).P50, RSSEndMB: res.rssEnd, RSSMaxMB: res.rssMax}
		if rl, err := sequencerRunLengths(ctx, r.s.temporal, r.single.corrTenant(rep.Correlation), rep.Correlation, closed); err != nil {
			r.p.logf("soak round %d: sequencer runs: %v", round, err)
		} else {
			sr.SequencerRuns, sr.SequencerLongestRun = rl.runs, rl.longest
		}
		rep.Rounds = append(rep.Rounds, sr)
		r.p.logf("soak round %d: %d/%d delivered at %.1f events/s, correlation now %d long, worker RSS %.0f MB (peak %.0f), sequencer %d runs (longest %d)",
			round, res.Delivered, n, res.EventsPerSec, done, res.rssEnd, res.rssMax, sr.SequencerRuns, sr.SequencerLongestRun)
		last = res
	}
	rep.WorkerRSS = r.rss
	wfs := make([]string, len(last.ids))
	for i, id := range last.ids {
		wfs[i] = r.single.workflowID(id)
	}
	if h, _, err := meanHistory(ctx, r.s.temporal, wfs); err == nil {
		rep.HistoryPerEvent = h
	} else {
		r.p.logf("history: %v", err)
	}
	// Every run read in full: the exact lengths, and the continue-as-new
	// chain checked against what visibility lists.
	st := SequencerStat{Scenario: "soak", Correlations: 1, Events: r.seq[rep.Correlation]}
	if sh, err := loadSequencer(ctx, r.s.temporal, r.single.corrTenant(rep.Correlation), rep.Correlation, false); err != nil {
		r.p.logf("sequencer history: %v", err)
	} else {
		st.Runs, st.ContinuedAsNew, st.NotInVisibility = sh.runs, sh.continuedAsNew, sh.missed
		st.HistoryEvents, st.MaxRunLength = sh.total, sh.maxLength
		if st.Events > 0 {
			st.PerEvent = float64(sh.total) / float64(st.Events)
		}
	}
	rep.Sequencer = st
	var err error
	if rep.InOrder, err = r.inOrder(ctx, r.single, []string{rep.Correlation}); err != nil {
		return err
	}
	rep.Machine.LoadAvgEnd = loadAvg()
	rep.Seconds = time.Since(r.p.began).Seconds()
	return nil
}

// WriteJSON writes the soak report to path.
func (rep *SoakReport) WriteJSON(path string) error { return writeJSON(path, "soak report", rep) }

// WriteTable prints the rounds and the verdicts.
func (rep *SoakReport) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "hookflow bench --soak: %d events on one correlation (%s), bursts of %d\n", rep.Events, rep.Correlation, SoakRoundSize)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, %s, load average %s at start, %s at end; %.0f s\n\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tevents\tdelivered\tcorrelation length\tevents/s\tp50 ms\tworker RSS MB\tpeak MB\tsequencer runs\tlongest run\t")
	for _, r := range rep.Rounds {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%d\t%d\t\n", r.Round, r.Events, r.Delivered, r.UpTo, r.EventsPerSec, r.P50ms,
			r.RSSEndMB, r.RSSMaxMB, r.SequencerRuns, r.SequencerLongestRun)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.Rounds) == 0 {
		return nil
	}
	first, lastR := rep.Rounds[0], rep.Rounds[len(rep.Rounds)-1]
	fmt.Fprintf(w, "\ndelivered %d of %d, in order: %v\n", rep.Delivered, rep.Events, rep.InOrder)
	// The first burst grows the caches from cold; flat means no growth after.
	base := first.RSSEndMB
	if len(rep.Rounds) == 1 {
		fmt.Fprintf(w, "worker RSS after the only burst %.0f MB (peak %.0f MB); one burst cannot show whether it stays flat\n", base, first.RSSMaxMB)
	} else {
		peak := 0.0
		for _, r := range rep.Rounds[1:] {
			peak = max(peak, r.RSSMaxMB)
		}
		growth := 0.0
		if base > 0 {
			growth = 100 * (lastR.RSSEndMB - base) / base
		}
		fmt.Fprintf(w, "worker RSS after the first burst %.0f MB, after the last %.0f MB (%+.0f%%), peak after the first %.0f MB\n",
			base, lastR.RSSEndMB, growth, peak)
	}
	fmt.Fprintf(w, "events/s first burst %.1f, last %.1f (%.2f×); history events per event in the last burst %.1f own + %.1f sequencer share\n",
		first.EventsPerSec, lastR.EventsPerSec, ratio(lastR.EventsPerSec, first.EventsPerSec), rep.HistoryPerEvent, rep.Sequencer.PerEvent)
	s := rep.Sequencer
	fmt.Fprintf(w, "sequencer: %d runs (%d continued as new), %d history events, longest run %d\n", s.Runs, s.ContinuedAsNew, s.HistoryEvents, s.MaxRunLength)
	if s.NotInVisibility > 0 {
		fmt.Fprintf(w, "  %d of those runs were missing from visibility and found through the continue-as-new chain\n", s.NotInVisibility)
	}
	t := sequencerTarget([]SequencerStat{s})
	mark := "MISSED"
	if t.Met {
		mark = "met"
	}
	fmt.Fprintf(w, "[%-6s] %s: %s\n", mark, t.Goal, t.Measured)
	return nil
}
