package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/oapi-codegen/nullable"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/store"
	hfclient "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/kit/webhook"
	"github.com/hookflow/hookflow/services/starter"
	"github.com/hookflow/hookflow/workflows"
)

// The dead-receiver measurement's shape: one endpoint with auto_replay,
// deadLaneEvents events in each of its lanes, and a receiver that is down
// from before the first event is posted until the outage is over. Each lane
// holds several events so that the receiver can tell their order, not only
// that they came.
const (
	DefaultDeadCorrelations = 500
	DefaultDeadOutage       = 2 * time.Minute
	DefaultDeadWindow       = 5 * time.Minute
	deadLaneEvents          = 3
	// deadSettle bounds the wait, once the receiver has every event, for
	// hookflow's ledger to have nothing of the endpoint left undelivered.
	deadSettle = time.Minute
)

// deadStall is how long the drain after the comeback waits for its next
// commit: the probe that closes the circuit may be as far as the probe
// backoff's maximum away, and the lanes take their next look after it.
const deadStall = store.ProbeBackoffMax + stallLimit

// DeadReceiverCase is one endpoint of hookflow bench --dead-receiver: its
// lanes, how long its receiver is down, and its recovery_window.
type DeadReceiverCase struct {
	Correlations int
	Outage       time.Duration
	Window       time.Duration
}

func (c DeadReceiverCase) String() string {
	return fmt.Sprintf("%d lanes, outage %s, window %s", c.Correlations, c.Outage, c.Window)
}

// DeadReceiverReport is hookflow bench --dead-receiver: does the circuit
// breaker hold a dead receiver to its probes, and once it is back, does
// every lane drain in order, each event applied once, the outage's dead
// letters replayed by hookflow itself?
type DeadReceiverReport struct {
	StartedAt time.Time            `json:"started_at"`
	Machine   Machine              `json:"machine"`
	Seconds   float64              `json:"seconds"`
	Cases     []DeadReceiverResult `json:"cases"`
}

// DeadReceiverResult is one case's figures.
type DeadReceiverResult struct {
	Correlations  int     `json:"correlations"`
	LaneEvents    int     `json:"lane_events"`
	OutageSeconds float64 `json:"outage_seconds"`
	WindowSeconds float64 `json:"window_seconds"`
	// Posted is how many of the Correlations × LaneEvents events the API
	// accepted, in PostSeconds from the outage's start.
	Posted      int     `json:"posted"`
	PostSeconds float64 `json:"post_seconds"`
	// OutageAttempts are the requests the receiver got while down, and
	// WithoutBreaker what the retry policy alone would have sent meanwhile:
	// each lane's head retried from the outage's start until its end or the
	// window's (a head posted later makes fewer).
	OutageAttempts int64 `json:"outage_attempts"`
	WithoutBreaker int   `json:"without_breaker"`
	// Requests counts every request the receiver got, down or up.
	Requests int64 `json:"requests"`
	Applied  int   `json:"applied"`
	// Lost were accepted and never applied. Duplicates are requests for an
	// event applied already: this receiver answers at once and never loses
	// an answer, so each is hookflow sending a delivered event again.
	// OrderViolations are events that came before the one before them in
	// their lane was applied. BadRequests broke the wire contract (not an
	// envelope, a bad signature, a webhook-id not the envelope's).
	Lost            int `json:"lost"`
	Duplicates      int `json:"duplicates"`
	OrderViolations int `json:"order_violations"`
	BadRequests     int `json:"bad_requests"`
	// The endpoint's dead letters at the end (GET /v1/dead-letters): the
	// deliveries dead-lettered at least once, the times they were (their
	// generations), those replayed as starter.AutoReplayBy, and those
	// still open.
	DeadLetters     int `json:"dead_letters"`
	DeadLetterings  int `json:"dead_letterings"`
	AutoReplayed    int `json:"auto_replayed"`
	OpenDeadLetters int `json:"open_dead_letters"`
	// Undelivered are the deliveries hookflow's ledger still had waiting or
	// delivering once the receiver had every event, and Circuit the
	// breaker's state then (GET /v1/endpoints/{id}/stats).
	Undelivered int64  `json:"undelivered"`
	Circuit     string `json:"circuit"`
	// FirstSeconds is from the receiver's comeback to the first event it
	// applied (the probe that closed the circuit), DrainedSeconds to the
	// last (every lane drained; 0 when some event was lost).
	FirstSeconds   float64 `json:"first_seconds"`
	DrainedSeconds float64 `json:"drained_seconds"`
}

// DeadReceiver starts a stack and runs each case on it at once, each on an
// endpoint and a receiver of its own.
func DeadReceiver(ctx context.Context, cfg Config, cases []DeadReceiverCase, logger *slog.Logger) (*DeadReceiverReport, error) {
	rcvs := make([]*deadReceiver, 0, len(cases))
	defer func() {
		for _, rcv := range rcvs {
			rcv.close()
		}
	}()
	// Listening before the stack starts gives the workers' allowlist the
	// receivers' real addresses.
	for range cases {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("listen for the dead receiver: %w", err)
		}
		rcv := newDeadReceiver()
		rcv.ln = ln
		rcvs = append(rcvs, rcv)
		cfg.ownReceivers = append(cfg.ownReceivers, ln.Addr().String())
	}
	var rep *DeadReceiverReport
	err := onStack(ctx, cfg, logger, func(r *runner, m Machine) error {
		rep = &DeadReceiverReport{StartedAt: r.p.began.UTC(), Machine: m, Cases: make([]DeadReceiverResult, len(cases))}
		api, err := hfclient.New(r.s.apiURL, apiToken, hfclient.WithHTTPClient(r.hc))
		if err != nil {
			return err
		}
		// The fan-out endpoints subscribe to every type, so hookflow's own
		// events about the dead receiver's endpoint (one per dead letter and
		// per auto-replay, all in that endpoint's one lane) would go to
		// them too: work on the same two cores that no case measures.
		if err := r.narrowFanOut(ctx, api); err != nil {
			return err
		}
		runs := make([]*deadRun, len(cases))
		for i, c := range cases {
			if runs[i], err = r.newDeadRun(ctx, api, i+1, c, rcvs[i]); err != nil {
				return err
			}
		}
		errs := make([]error, len(runs))
		var wg sync.WaitGroup
		for i, run := range runs {
			wg.Go(func() { rep.Cases[i], errs[i] = run.measure(ctx) })
		}
		wg.Wait()
		rep.Machine.LoadAvgEnd = loadAvg()
		rep.Seconds = time.Since(r.p.began).Seconds()
		return errors.Join(errs...)
	})
	return rep, err
}

// deadRun is one case on the stack: its endpoint, its receiver and the
// events it posts.
type deadRun struct {
	r          *runner
	api        *hfclient.Client
	name       string
	c          DeadReceiverCase
	rcv        *deadReceiver
	endpointID string
	sc         *scenario
	specs      []eventSpec
}

// newDeadRun registers the case's endpoint through the API, as a user
// would, with its window and auto_replay, starts its receiver, and makes
// its events: every lane's first, then every lane's second, and so on.
// The events are made here, one case after another, because the runner's
// sequence counters are not shared safely between the cases' goroutines.
func (r *runner) newDeadRun(ctx context.Context, api *hfclient.Client, n int, c DeadReceiverCase, rcv *deadReceiver) (*deadRun, error) {
	r201, err := api.EndpointCreateWithResponse(ctx, hfclient.EndpointCreate{
		URL: rcv.url(), EventTypes: nullable.NewNullableWithValue([]string{benchEventType}),
		RecoveryWindow: nullable.NewNullableWithValue(c.Window.String()), AutoReplay: nullable.NewNullableWithValue(true),
	})
	if err != nil {
		return nil, fmt.Errorf("create the dead receiver's endpoint: %w", err)
	}
	ep := r201.JSON201
	rcv.serve(ep.Secret)
	short := fmt.Sprintf("dead%d", n)
	d := &deadRun{r: r, api: api, name: fmt.Sprintf("case %d (%s)", n, c), c: c, rcv: rcv, endpointID: ep.ID,
		sc: &scenario{name: short, short: short, kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType, endpoint: ep.ID,
			corr: func(i int) string { return fmt.Sprintf("%s-%s-%03d", r.tag, short, i%c.Correlations) }}}
	d.specs = make([]eventSpec, c.Correlations*deadLaneEvents)
	for i := range d.specs {
		d.specs[i] = r.spec(d.sc, "o")
	}
	return d, nil
}

// measure takes the receiver down, posts the events, brings it back once
// the outage is over, waits for every lane to drain and for hookflow's
// ledger to agree, and reads the figures.
func (d *deadRun) measure(ctx context.Context) (DeadReceiverResult, error) {
	c, p := d.c, d.r.p
	res := DeadReceiverResult{Correlations: c.Correlations, LaneEvents: deadLaneEvents, OutageSeconds: c.Outage.Seconds(),
		WindowSeconds: c.Window.Seconds(), WithoutBreaker: c.Correlations * retriesWithin(c.Window, c.Outage)}
	down := d.rcv.setDown(true)
	p.logf("%s: receiver down; posting %d events", d.name, len(d.specs))
	var err error
	if res.Posted, err = d.r.postAll(ctx, d.sc, d.specs); err != nil {
		return res, err
	}
	res.PostSeconds = time.Since(down).Seconds()
	p.logf("%s: %d events accepted in %.1f s", d.name, res.Posted, res.PostSeconds)
	if err := d.waitOutage(ctx, down.Add(c.Outage)); err != nil {
		return res, err
	}
	up := d.rcv.setDown(false)
	p.logf("%s: receiver back after %s; %d attempts during the outage (the retry policy alone: %d)",
		d.name, up.Sub(down).Round(time.Second), d.rcv.tally().downRequests, res.WithoutBreaker)
	if _, err := d.r.waitCount(ctx, d.name, res.Posted, deadStall, func(context.Context) (int, error) {
		return d.rcv.tally().applied, nil
	}); err != nil {
		return res, err
	}
	health, err := d.settle(ctx)
	if err != nil {
		return res, err
	}
	res.Undelivered, res.Circuit = health.Waiting+health.Delivering, string(health.Circuit.State)
	dls, err := d.api.DeadLetterListAll(ctx, hfclient.DeadLetterListParams{EndpointID: &d.endpointID, Status: new(hfclient.DeadLetterListParamsStatusAll), Limit: new(int64(500))})
	if err != nil {
		return res, fmt.Errorf("list the dead receiver's dead letters: %w", err)
	}
	for _, dl := range dls {
		res.DeadLetters++
		res.DeadLetterings += int(dl.Generation)
		switch {
		case dl.Status == hfclient.DeadLetterStatusOpen:
			res.OpenDeadLetters++
		case dl.Status == hfclient.DeadLetterStatusReplayed && dl.ReplayedBy == starter.AutoReplayBy:
			res.AutoReplayed++
		}
	}
	t := d.rcv.tally()
	res.Requests, res.OutageAttempts, res.Applied = t.requests, t.downRequests, t.applied
	res.Lost, res.Duplicates, res.OrderViolations, res.BadRequests = res.Posted-t.applied, t.duplicates, t.outOfOrder, t.bad
	if !t.first.IsZero() {
		res.FirstSeconds = t.first.Sub(up).Seconds()
	}
	if res.Lost == 0 {
		res.DrainedSeconds = t.last.Sub(up).Seconds()
	}
	p.logf("%s: %d/%d applied; drained %.1f s after the comeback", d.name, t.applied, res.Posted, res.DrainedSeconds)
	return res, nil
}

// waitOutage waits until end, saying every 30 s how the outage goes.
func (d *deadRun) waitOutage(ctx context.Context, end time.Time) error {
	for left := time.Until(end); left > 0; left = time.Until(end) {
		if err := sleep(ctx, min(left, 30*time.Second)); err != nil {
			return err
		}
		if err := d.r.s.checkAlive(); err != nil {
			return err
		}
		r, err := d.api.EndpointStatsWithResponse(ctx, d.endpointID, nil)
		if err != nil {
			return fmt.Errorf("read the dead receiver's endpoint stats: %w", err)
		}
		h := r.JSON200
		d.r.p.logf("%s: %d attempts during the outage so far; circuit %s, %d dead letters open",
			d.name, d.rcv.tally().downRequests, h.Circuit.State, h.DeadLettersOpen)
	}
	return nil
}

// settle waits, up to deadSettle, until hookflow's ledger has nothing of
// the endpoint waiting, delivering or dead-lettered, and returns the
// endpoint's stats then.
func (d *deadRun) settle(ctx context.Context) (hfclient.EndpointHealth, error) {
	deadline := time.Now().Add(deadSettle)
	for {
		r, err := d.api.EndpointStatsWithResponse(ctx, d.endpointID, nil)
		if err != nil {
			return hfclient.EndpointHealth{}, fmt.Errorf("read the dead receiver's endpoint stats: %w", err)
		}
		h := *r.JSON200
		if h.Waiting+h.Delivering+h.DeadLettersOpen == 0 || time.Now().After(deadline) {
			return h, nil
		}
		if err := sleep(ctx, time.Second); err != nil {
			return h, err
		}
	}
}

// retriesWithin is how many attempts one delivery whose every attempt
// fails makes in d, by its retry policy (workflows.DeliverOptions: at about
// 0, 1, 5, 21, 85 s…), none after its window.
func retriesWithin(window, d time.Duration) int {
	opts := workflows.DeliverOptions(window, 0)
	p := opts.RetryPolicy
	n, at, next := 0, time.Duration(0), p.InitialInterval
	for at < min(d, opts.ScheduleToCloseTimeout) {
		n++
		at += next
		next = min(time.Duration(float64(next)*p.BackoffCoefficient), p.MaximumInterval)
	}
	return n
}

// failures says what went wrong in the case: an event lost, applied twice
// or out of order, a request that broke the contract, a dead letter that
// hookflow did not replay itself, a delivery its ledger never finished.
func (res DeadReceiverResult) failures() []string {
	var out []string
	if want := res.Correlations * res.LaneEvents; res.Posted < want {
		out = append(out, fmt.Sprintf("events not accepted: %d of %d", want-res.Posted, want))
	}
	for _, f := range []struct {
		what string
		n    int64
	}{
		{"events lost (accepted, never applied)", int64(res.Lost)},
		{"duplicates (an applied event sent again)", int64(res.Duplicates)},
		{"order violations", int64(res.OrderViolations)},
		{"requests that broke the wire contract", int64(res.BadRequests)},
		{"dead letters not auto-replayed", int64(res.DeadLetters - res.AutoReplayed)},
		{"deliveries undelivered in hookflow's ledger", res.Undelivered},
	} {
		if f.n > 0 {
			out = append(out, fmt.Sprintf("%s: %d", f.what, f.n))
		}
	}
	return out
}

// Err is the run's verdict: nil when every case applied every event once,
// in order, its dead letters auto-replayed; else what went wrong in each.
func (rep *DeadReceiverReport) Err() error {
	var errs []error
	for i, res := range rep.Cases {
		if f := res.failures(); len(f) > 0 {
			errs = append(errs, fmt.Errorf("dead receiver, case %d: %s", i+1, strings.Join(f, ", ")))
		}
	}
	return errors.Join(errs...)
}

// WriteJSON writes the report to path.
func (rep *DeadReceiverReport) WriteJSON(path string) error {
	return writeJSON(path, "dead receiver report", rep)
}

// WriteTable prints each case's figures and its summary line.
func (rep *DeadReceiverReport) WriteTable(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "hookflow bench --dead-receiver: an endpoint with auto_replay whose receiver answers 503 through an outage, then comes back\n")
	fmt.Fprintf(w, "machine: %d CPUs (%s), %.1f GiB, %s, load average %s at start, %s at end; %.0f s\n",
		m.CPUs, m.CPUModel, m.MemoryGiB, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd, rep.Seconds)
	for _, res := range rep.Cases {
		outage, window := seconds(res.OutageSeconds), seconds(res.WindowSeconds)
		fmt.Fprintf(w, "\n%d lanes × %d events, outage %s, recovery window %s; %d events posted in the outage's first %.1f s:\n",
			res.Correlations, res.LaneEvents, outage, window, res.Posted, res.PostSeconds)
		fmt.Fprintf(w, "  attempts during the outage: %d (the retry policy alone, each of %d heads from the outage's start: %d); %d requests in all\n",
			res.OutageAttempts, res.Correlations, res.WithoutBreaker, res.Requests)
		fmt.Fprintf(w, "  dead letters: %d (dead-lettered %d times), %d auto-replayed, %d open\n",
			res.DeadLetters, res.DeadLetterings, res.AutoReplayed, res.OpenDeadLetters)
		fmt.Fprintf(w, "  after the comeback: first event applied %.1f s, every lane drained %.1f s; circuit %s, %d undelivered in hookflow's ledger\n",
			res.FirstSeconds, res.DrainedSeconds, res.Circuit, res.Undelivered)
		fmt.Fprintf(w, "  receiver: %d/%d applied: %d lost, %d duplicates, %d order violations, %d bad requests\n",
			res.Applied, res.Posted, res.Lost, res.Duplicates, res.OrderViolations, res.BadRequests)
		fmt.Fprintf(w, "dead_receiver correlations=%d events=%d outage=%s window=%s attempts_outage=%d without_breaker=%d dead_letters=%d dead_letterings=%d auto_replayed=%d open_dead_letters=%d first_applied=%.1fs drained=%.1fs lost=%d duplicates=%d order_violations=%d ok=%t\n",
			res.Correlations, res.Posted, outage, window, res.OutageAttempts, res.WithoutBreaker, res.DeadLetters, res.DeadLetterings,
			res.AutoReplayed, res.OpenDeadLetters, res.FirstSeconds, res.DrainedSeconds, res.Lost, res.Duplicates, res.OrderViolations, len(res.failures()) == 0)
	}
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// deadReceiver is the dead-receiver bench's receiver, served from the
// bench's own process so that it sees every request, with its ledger in
// memory (the e2e tests' ledger receiver's rules). While down it answers
// 503 to every request, counted as an attempt during the outage. Up, it
// checks the wire contract and applies each event once (by webhook-id),
// only after the one before it in its lane.
type deadReceiver struct {
	ln  net.Listener
	srv *http.Server
	// secret is set before the first request is served (serve).
	secret string

	mu   sync.Mutex
	down bool
	t    deadTally
	// lanes are the last sequence applied per correlation, seen the events
	// applied.
	lanes map[string]int64
	seen  map[string]bool
}

// deadTally is what the receiver counted.
type deadTally struct {
	requests, downRequests      int64
	applied                     int
	duplicates, outOfOrder, bad int
	first, last                 time.Time // the first and the last event applied
}

func newDeadReceiver() *deadReceiver {
	return &deadReceiver{lanes: map[string]int64{}, seen: map[string]bool{}}
}

func (d *deadReceiver) url() string { return "http://" + d.ln.Addr().String() + "/webhook" }

// serve starts answering on the receiver's listener, deliveries signed with
// secret.
func (d *deadReceiver) serve(secret string) {
	d.secret = secret
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.srv.Serve(d.ln) }()
}

func (d *deadReceiver) close() {
	if d.srv != nil {
		_ = d.srv.Close()
	}
	_ = d.ln.Close()
}

// setDown takes the receiver down or brings it back, and returns when.
func (d *deadReceiver) setDown(down bool) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
	return time.Now()
}

func (d *deadReceiver) tally() deadTally {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.t
}

func (d *deadReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var ev contract.Envelope
	id := req.Header.Get(webhook.HeaderID)
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, 1<<20))
	if err == nil {
		err = webhook.Verify([]string{d.secret}, id, req.Header.Get(webhook.HeaderTimestamp), req.Header.Get(webhook.HeaderSignature), body, time.Now(), 0)
	}
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err == nil && ev.ID != id {
		err = fmt.Errorf("webhook-id %s is not the envelope's id %s", id, ev.ID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t.requests++
	last := d.lanes[ev.CorrelationID]
	switch {
	case d.down:
		d.t.downRequests++
		w.WriteHeader(http.StatusServiceUnavailable)
	case err != nil:
		d.t.bad++
		http.Error(w, err.Error(), http.StatusBadRequest)
	case d.seen[ev.ID]:
		d.t.duplicates++
		_, _ = io.WriteString(w, `{"status":"already_processed"}`)
	case ev.Sequence != last+1 || ev.PreviousSequence != last:
		// Every event of a lane goes to this endpoint and none is skipped,
		// so hookflow may send only the one after the last applied. Parked
		// (202): not applied, to be sent again.
		d.t.outOfOrder++
		w.WriteHeader(http.StatusAccepted)
	default:
		now := time.Now()
		d.lanes[ev.CorrelationID], d.seen[ev.ID] = ev.Sequence, true
		d.t.applied++
		if d.t.first.IsZero() {
			d.t.first = now
		}
		d.t.last = now
		_, _ = io.WriteString(w, `{"status":"applied"}`)
	}
}

// narrowFanOut subscribes the fan-out endpoints to the fan-out scenario's
// type alone: they subscribe to every type, so hookflow's own events about
// a scenario's endpoint would otherwise go to them too.
func (r *runner) narrowFanOut(ctx context.Context, api *hfclient.Client) error {
	only := nullable.NewNullableWithValue([]string{fanOutEventType})
	for _, f := range r.s.fanOut {
		if _, err := api.EndpointUpdateWithResponse(ctx, f.endpointID, nil, hfclient.EndpointUpdate{EventTypes: only}); err != nil {
			return fmt.Errorf("narrow a fan-out endpoint's event types: %w", err)
		}
	}
	return nil
}
