package bench

import (
	"context"
	"fmt"
	"github.com/oapi-codegen/nullable"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	hfclient "github.com/hookflow/hookflow/kit/client"
)

// The flapping measurement's shape: one endpoint with
// auto_replay whose receiver answers 200 once every FlapEvery and 500
// otherwise, for a run of DefaultFlapDuration, with disable_after short
// enough to trip within it. Lanes keep work coming: flapLanes lanes of
// flapLaneEvents events at the start, then one event every flapTrickle.
const (
	DefaultFlapDuration     = 10 * time.Minute
	DefaultFlapDisableAfter = 3 * time.Minute
	FlapEvery               = 6 * time.Second
	flapLanes               = 20
	flapLaneEvents          = 3
	flapTrickle             = 2 * time.Second
)

// FlappingCase is hookflow bench --flapping's run: how long the receiver
// flaps, and the endpoint's disable_after.
type FlappingCase struct {
	Duration     time.Duration
	DisableAfter time.Duration
}

// FlappingReport is hookflow bench --flapping: does a receiver that
// answers once every 6 s make work for ever, or does its endpoint rest
// (disable_after trips), and what did it cost until then?
type FlappingReport struct {
	StartedAt time.Time `json:"started_at"`
	Machine   Machine   `json:"machine"`
	Seconds   float64   `json:"seconds"`
	// DurationSeconds is how long the receiver flapped, DisableAfterSeconds
	// the endpoint's disable_after, and Posted the events accepted.
	DurationSeconds     float64 `json:"duration_seconds"`
	DisableAfterSeconds float64 `json:"disable_after_seconds"`
	Posted              int     `json:"posted"`
	// Requests is what the receiver got, OKs the 200s among them.
	Requests int64 `json:"requests"`
	OKs      int64 `json:"oks"`
	// Attempts are the endpoint's rows in delivery_attempts (those of a
	// disabled endpoint, which send nothing, included).
	Attempts int64 `json:"attempts"`
	// OperationalEvents counts hookflow's events about the endpoint, by
	// type.
	OperationalEvents map[string]int `json:"operational_events"`
	// DeadLetters are the endpoint's dead letter rows, DeadLetterings the
	// times they were written (their generations), and DeadLetterAttempts
	// the attempts they hold.
	DeadLetters        int `json:"dead_letters"`
	DeadLetterings     int `json:"dead_letterings"`
	DeadLetterAttempts int `json:"dead_letter_attempts"`
	// Disabled says disable_after tripped, DisabledSeconds when (from the
	// first post), and Circuit is the breaker's state at the end.
	Disabled        bool    `json:"disabled"`
	DisabledSeconds float64 `json:"disabled_seconds,omitempty"`
	DisabledReason  string  `json:"disabled_reason,omitempty"`
	Circuit         string  `json:"circuit"`
	// RequestsAfterDisabled is what the receiver got once the endpoint was
	// disabled: 0 when it rests.
	RequestsAfterDisabled int64 `json:"requests_after_disabled"`
}

// Flapping starts a stack and runs the case on it.
func Flapping(ctx context.Context, cfg Config, c FlappingCase, logger *slog.Logger) (*FlappingReport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the flapping receiver: %w", err)
	}
	rcv := &flapReceiver{every: FlapEvery}
	srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cfg.ownReceivers = append(cfg.ownReceivers, ln.Addr().String())
	var rep *FlappingReport
	err = onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &FlappingReport{StartedAt: r.p.began.UTC(), Machine: m, DurationSeconds: c.Duration.Seconds(), DisableAfterSeconds: c.DisableAfter.Seconds()}
		if err := r.flapping(ctx, rep, c, rcv, "http://"+ln.Addr().String()+"/webhook"); err != nil {
			return err
		}
		rep.Machine.LoadAvgEnd = loadAvg()
		rep.Seconds = time.Since(r.p.began).Seconds()
		return nil
	})
	return rep, err
}

func (r *runner) flapping(ctx context.Context, rep *FlappingReport, c FlappingCase, rcv *flapReceiver, url string) error {
	api, err := hfclient.New(r.s.apiURL, apiToken, hfclient.WithHTTPClient(r.hc))
	if err != nil {
		return err
	}
	// The fan-out endpoints subscribe to every type; hookflow's own events
	// about the flapping endpoint are counted in the ledger, not sent.
	if err := r.narrowFanOut(ctx, api); err != nil {
		return err
	}
	r201, err := api.EndpointCreateWithResponse(ctx, hfclient.EndpointCreate{
		URL: url, EventTypes: nullable.NewNullableWithValue([]string{benchEventType}), AutoReplay: nullable.NewNullableWithValue(true),
		DisableAfter: nullable.NewNullableWithValue(c.DisableAfter.String()),
	})
	if err != nil {
		return fmt.Errorf("create the flapping receiver's endpoint: %w", err)
	}
	ep := r201.JSON201
	sc := &scenario{name: "flapping", short: "flap", kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType, endpoint: ep.ID,
		corr: func(i int) string { return fmt.Sprintf("%s-flap-%03d", r.tag, i%flapLanes) }}
	specs := make([]eventSpec, flapLanes*flapLaneEvents)
	for i := range specs {
		specs[i] = r.spec(sc, "o")
	}
	began := time.Now()
	r.p.logf("flapping: a receiver answering 200 once every %s, 500 otherwise, for %s; disable_after %s", FlapEvery, c.Duration, c.DisableAfter)
	if rep.Posted, err = r.postAll(ctx, sc, specs); err != nil {
		return err
	}
	end := began.Add(c.Duration)
	trickle := time.NewTicker(flapTrickle)
	defer trickle.Stop()
	report := time.NewTicker(30 * time.Second)
	defer report.Stop()
	var disabledAt time.Time
	var atDisabled int64
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-trickle.C:
			// A disabled endpoint accepts no event addressed to it (409):
			// the trickle stops once it is.
			if !disabledAt.IsZero() {
				continue
			}
			gr, err := api.EndpointGetWithResponse(ctx, ep.ID, nil)
			if err != nil {
				return fmt.Errorf("read the flapping endpoint: %w", err)
			}
			got := gr.JSON200
			if got.Disabled {
				disabledAt, atDisabled = time.Now(), rcv.tally().requests
				rep.Disabled, rep.DisabledReason = true, got.DisabledReason
				rep.DisabledSeconds = disabledAt.Sub(began).Seconds()
				r.p.logf("flapping: disabled after %s: %s", disabledAt.Sub(began).Round(time.Second), got.DisabledReason)
				continue
			}
			if err := r.post(ctx, sc, r.spec(sc, "t")); err != nil {
				return err
			}
			rep.Posted++
		case <-report.C:
			if err := r.s.checkAlive(); err != nil {
				return err
			}
			t := rcv.tally()
			r.p.logf("flapping: %s in, %d requests (%d answered 200), disabled %t", time.Since(began).Round(time.Second), t.requests, t.oks, !disabledAt.IsZero())
		}
	}
	t := rcv.tally()
	rep.Requests, rep.OKs = t.requests, t.oks
	if rep.Disabled {
		rep.RequestsAfterDisabled = t.requests - atDisabled
	}
	return r.flapLedger(ctx, rep, api, ep.ID)
}

// flapLedger reads what the run left in hookflow's ledger about the
// endpoint: its attempts, its operational events and its dead letters.
func (r *runner) flapLedger(ctx context.Context, rep *FlappingReport, api *hfclient.Client, endpointID string) error {
	db := r.s.hookflowDB
	if err := db.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE endpoint_id = $1`, endpointID).Scan(&rep.Attempts); err != nil {
		return fmt.Errorf("count the flapping endpoint's attempts: %w", err)
	}
	rows, err := db.Query(ctx, `SELECT type, count(*)::int FROM events WHERE type LIKE 'hookflow.%' AND data->>'endpoint_id' = $1 GROUP BY type`, endpointID)
	if err != nil {
		return fmt.Errorf("count the flapping endpoint's operational events: %w", err)
	}
	rep.OperationalEvents = map[string]int{}
	for rows.Next() {
		var typ string
		var n int
		if err := rows.Scan(&typ, &n); err != nil {
			rows.Close()
			return err
		}
		rep.OperationalEvents[typ] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if err := db.QueryRow(ctx, `SELECT count(*)::int, COALESCE(sum(generation), 0)::int, COALESCE(sum(jsonb_array_length(attempts)), 0)::int
		FROM dead_letters WHERE endpoint_id = $1`, endpointID).Scan(&rep.DeadLetters, &rep.DeadLetterings, &rep.DeadLetterAttempts); err != nil {
		return fmt.Errorf("count the flapping endpoint's dead letters: %w", err)
	}
	sr, err := api.EndpointStatsWithResponse(ctx, endpointID, nil)
	if err != nil {
		return fmt.Errorf("read the flapping endpoint's stats: %w", err)
	}
	rep.Circuit = string(sr.JSON200.Circuit.State)
	if !rep.Disabled {
		gr, err := api.EndpointGetWithResponse(ctx, endpointID, nil)
		if err != nil {
			return fmt.Errorf("read the flapping endpoint: %w", err)
		}
		got := gr.JSON200
		rep.Disabled, rep.DisabledReason = got.Disabled, got.DisabledReason
	}
	return nil
}

// Err is the run's verdict: the endpoint must have been disabled.
func (rep *FlappingReport) Err() error {
	if !rep.Disabled {
		return fmt.Errorf("flapping: disable_after (%s) never tripped in %s", seconds(rep.DisableAfterSeconds), seconds(rep.DurationSeconds))
	}
	return nil
}

// WriteJSON writes the report to path.
func (rep *FlappingReport) WriteJSON(path string) error {
	return writeJSON(path, "flapping report", rep)
}

// WriteTable prints the figures and a summary line.
func (rep *FlappingReport) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "hookflow bench --flapping: an endpoint with auto_replay whose receiver answers 200 once every %s and 500 otherwise\n", FlapEvery)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, %s, load average %s at start, %s at end; %.0f s\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)
	fmt.Fprintf(w, "\n%s of flapping, disable_after %s, %d events posted (%d lanes × %d, then one every %s)\n",
		seconds(rep.DurationSeconds), seconds(rep.DisableAfterSeconds), rep.Posted, flapLanes, flapLaneEvents, flapTrickle)
	fmt.Fprintf(w, "  receiver: %d requests, %d answered 200; %d after the endpoint was disabled\n", rep.Requests, rep.OKs, rep.RequestsAfterDisabled)
	fmt.Fprintf(w, "  ledger: %d attempts; dead letters %d rows (written %d times) holding %d attempts\n",
		rep.Attempts, rep.DeadLetters, rep.DeadLetterings, rep.DeadLetterAttempts)
	ops := 0
	for _, typ := range []string{contract.OpCircuitOpened, contract.OpCircuitClosed, contract.OpEndpointDisabled, contract.OpDeadLetterCreated, contract.OpDeadLetterAutoReplayed} {
		fmt.Fprintf(w, "  %s: %d\n", typ, rep.OperationalEvents[typ])
	}
	for _, n := range rep.OperationalEvents {
		ops += n
	}
	fmt.Fprintf(w, "  disabled: %t after %.0f s (%s); circuit %s\n", rep.Disabled, rep.DisabledSeconds, rep.DisabledReason, rep.Circuit)
	fmt.Fprintf(w, "flapping duration=%s disable_after=%s posted=%d requests=%d oks=%d attempts=%d operational_events=%d opened=%d closed=%d dead_letters=%d dead_letterings=%d dead_letter_attempts=%d disabled=%t disabled_after=%.0fs requests_after_disabled=%d\n",
		seconds(rep.DurationSeconds), seconds(rep.DisableAfterSeconds), rep.Posted, rep.Requests, rep.OKs, rep.Attempts, ops,
		rep.OperationalEvents[contract.OpCircuitOpened], rep.OperationalEvents[contract.OpCircuitClosed],
		rep.DeadLetters, rep.DeadLetterings, rep.DeadLetterAttempts, rep.Disabled, rep.DisabledSeconds, rep.RequestsAfterDisabled)
	return nil
}

// flapReceiver answers 200 to the first request once every period since
// its last 200, and 500 to every other; it checks nothing else: what is
// measured is what hookflow sends it.
type flapReceiver struct {
	every time.Duration

	mu     sync.Mutex
	nextOK time.Time
	t      flapTally
}

type flapTally struct{ requests, oks int64 }

func (f *flapReceiver) tally() flapTally {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *flapReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, req.Body, 1<<20))
	f.mu.Lock()
	now := time.Now()
	f.t.requests++
	ok := !now.Before(f.nextOK)
	if ok {
		f.t.oks++
		f.nextOK = now.Add(f.every)
	}
	f.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, `{"status":"applied"}`)
}
