package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/contract"
	"github.com/hookflow/hookflow/internal/destcheck"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	"github.com/hookflow/hookflow/internal/transport/nats"
	"github.com/hookflow/hookflow/internal/transport/rabbitmq"
	"github.com/hookflow/hookflow/internal/transport/redis"
	"github.com/hookflow/hookflow/internal/transport/webhook"
	"github.com/hookflow/hookflow/lab/testenv/natstest"
	"github.com/hookflow/hookflow/lab/testenv/rabbittest"
	"github.com/hookflow/hookflow/lab/testenv/redistest"
)

// DestinationsAll stands, in Config.Destinations, for every destination
// type whose server can run on this machine.
const DestinationsAll = "all"

// procBrokerPrefix prefixes a broker's process name ("broker-nats").
const procBrokerPrefix = "broker-"

// destinationKind is one type of destination the comparison delivers
// into. A new broker type is one entry of destinationKinds.
type destinationKind struct {
	typ string
	// available says why its server cannot run here; nil when it can.
	// Nil for webhook: the stack's reference receiver is always there.
	available func(ctx context.Context) error
	// start runs its server with its data in dir.
	start func(ctx context.Context, dir string) (*broker, error)
}

// broker is a destination's server, run for the comparison as its user
// would run it.
type broker struct {
	typ string
	// addr is its host:port, which the workers are allowed to reach
	// although it is a loopback address.
	addr string
	pid  func() int
	// endpoint prepares what the user owns under prefix (the stream
	// hookflow writes into) and returns the endpoint's type, config and
	// credentials.
	endpoint func(ctx context.Context, prefix string) (map[string]any, error)
	close    func() error
}

var destinationKinds = []destinationKind{
	{typ: webhook.Type},
	{typ: nats.Type, available: func(ctx context.Context) error { _, err := natstest.Binary(ctx); return err }, start: startNATS},
	{typ: redis.Type, available: func(context.Context) error { _, err := redistest.Binary(); return err }, start: startRedis},
	{typ: rabbitmq.Type, available: func(context.Context) error { _, err := os.Stat(rabbittest.Binary); return err }, start: startRabbitMQ},
}

func startNATS(ctx context.Context, dir string) (*broker, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create nats folder: %w", err)
	}
	s, err := natstest.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &broker{typ: nats.Type, addr: s.Addr(), pid: s.Pid, close: s.Close, endpoint: func(ctx context.Context, prefix string) (map[string]any, error) {
		if err := natstest.CreateStream(ctx, s.URL(), "hf_"+prefix, []string{prefix + ".>"}); err != nil {
			return nil, err
		}
		return map[string]any{"type": nats.Type, "config": map[string]any{"url": s.URL(), "subject": prefix},
			"credentials": map[string]string{"username": natstest.Username, "password": s.Password()}}, nil
	}}, nil
}

func startRedis(ctx context.Context, dir string) (*broker, error) {
	s, err := redistest.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &broker{typ: redis.Type, addr: s.Addr(), pid: s.Pid, close: s.Close, endpoint: func(ctx context.Context, prefix string) (map[string]any, error) {
		if err := s.CreateStream(ctx, prefix, "consumers"); err != nil {
			return nil, err
		}
		return map[string]any{"type": redis.Type, "config": map[string]any{"addr": s.Addr(), "stream": prefix, "tls": false},
			"credentials": s.Credentials()}, nil
	}}, nil
}

func startRabbitMQ(ctx context.Context, dir string) (*broker, error) {
	s, err := rabbittest.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &broker{typ: rabbitmq.Type, addr: s.Addr(), pid: s.Pid, close: s.Close, endpoint: func(ctx context.Context, prefix string) (map[string]any, error) {
		// The exchange is the user's; the queue bound to every routing
		// key is what the check after the rounds reads (and drains).
		if err := s.Declare(ctx, prefix, prefix+".audit"); err != nil {
			return nil, err
		}
		return map[string]any{"type": rabbitmq.Type, "config": map[string]any{"url": s.URL(), "exchange": prefix, "audit_queue": prefix + ".audit"},
			"credentials": s.Credentials()}, nil
	}}, nil
}

// DestinationTypes lists every type the comparison knows, in its order.
func DestinationTypes() []string {
	out := make([]string, len(destinationKinds))
	for i, k := range destinationKinds {
		out[i] = k.typ
	}
	return out
}

// ParseDestinations reads a --destinations list: types separated by
// commas, "all" (every type whose server runs here) or "none".
func ParseDestinations(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "" || f == "none":
		case f == DestinationsAll || slices.Contains(DestinationTypes(), f):
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		default:
			return nil, fmt.Errorf("unknown destination type %q (known: %s, or %s)", f, strings.Join(DestinationTypes(), ", "), DestinationsAll)
		}
	}
	if slices.Contains(out, DestinationsAll) && len(out) > 1 {
		return nil, fmt.Errorf("%q stands for every type: give it alone", DestinationsAll)
	}
	return out, nil
}

// destinations are the comparison's types, in table order, and the
// brokers started for them.
type destinations struct {
	types   []string
	brokers map[string]*broker
	// skipped are the types "all" left out, with the reason.
	skipped map[string]string
	dir     string
	ownDir  bool
}

// startDestinations resolves cfg.Destinations and starts a broker per
// broker type, before the stack, so that the workers can be allowed to
// reach them. Webhook always runs first: every other type is read
// against it.
func startDestinations(ctx context.Context, cfg *Config) (_ *destinations, err error) {
	if len(cfg.Destinations) == 0 {
		return nil, nil
	}
	all := slices.Contains(cfg.Destinations, DestinationsAll)
	d := &destinations{brokers: map[string]*broker{}, skipped: map[string]string{}}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	for _, k := range destinationKinds {
		if !all && !slices.Contains(cfg.Destinations, k.typ) && k.typ != webhook.Type {
			continue
		}
		if k.start == nil {
			d.types = append(d.types, k.typ)
			continue
		}
		if err := k.available(ctx); err != nil {
			if !all {
				return d, fmt.Errorf("destination %s: %w", k.typ, err)
			}
			d.skipped[k.typ] = err.Error()
			fmt.Fprintf(cfg.Progress, "destinations: %s left out: %v\n", k.typ, err)
			continue
		}
		if d.dir == "" {
			if cfg.DataDir != "" {
				d.dir = filepath.Join(cfg.DataDir, "brokers")
			} else if d.dir, err = os.MkdirTemp("", "hookflow-bench-brokers-"); err != nil {
				return d, fmt.Errorf("create brokers folder: %w", err)
			} else {
				d.ownDir = true
			}
		}
		b, err := k.start(ctx, filepath.Join(d.dir, k.typ))
		if err != nil {
			return d, fmt.Errorf("start %s broker: %w", k.typ, err)
		}
		fmt.Fprintf(cfg.Progress, "destinations: %s broker on %s\n", k.typ, b.addr)
		d.brokers[k.typ] = b
		d.types = append(d.types, k.typ)
		cfg.ownReceivers = append(cfg.ownReceivers, b.addr)
	}
	return d, nil
}

// pids are the brokers' processes, by the name the report gives them.
func (d *destinations) pids() map[string]func() int {
	out := map[string]func() int{}
	for typ, b := range d.brokers {
		out[procBrokerPrefix+typ] = b.pid
	}
	return out
}

func (d *destinations) addrs() []string {
	var out []string
	for _, b := range d.brokers {
		out = append(out, b.addr)
	}
	return out
}

func (d *destinations) close() {
	if d == nil {
		return
	}
	for _, b := range d.brokers {
		_ = b.close()
	}
	if d.ownDir {
		_ = os.RemoveAll(d.dir)
	}
}

// DestinationsResult is the comparison: the same ordered workload into
// each destination type, on one stack, in interleaved rounds.
type DestinationsResult struct {
	Events       int `json:"events"`
	Correlations int `json:"correlations"`
	Rounds       int `json:"rounds"`
	// Skipped are the types "all" left out, with the reason.
	Skipped map[string]string   `json:"skipped,omitempty"`
	Types   []DestinationResult `json:"types"`
}

// DestinationResult is one type's figures, and the check of what its
// destination holds.
type DestinationResult struct {
	Type       string `json:"type"`
	EndpointID string `json:"endpoint_id"`
	Events     int    `json:"events"`
	Deliveries int    `json:"deliveries"`
	// DeliveriesPerSec: deliveries over the time from a round's first
	// post to its last delivery in hookflow's ledger, summed over rounds.
	DeliveriesPerSec float64 `json:"deliveries_per_sec"`
	// LatencyMS is from the API's 202 to the delivery's delivered_at in
	// hookflow's ledger, for every type alike (a broker has no receiver
	// ledger to commit in).
	LatencyMS Latency `json:"latency_ms"`
	// CPUPer1000 is CPU seconds per 1,000 deliveries by process.
	CPUPer1000 map[string]float64 `json:"cpu_seconds_per_1000"`
	// HookflowCPUPer1000 is api, worker, Temporal server and Postgres;
	// DestinationCPUPer1000 the destination's own process: the broker, or
	// the reference receiver for webhooks (whose ledger commits land in
	// the shared Postgres, so in hookflow's share); Total both.
	HookflowCPUPer1000    float64 `json:"hookflow_cpu_seconds_per_1000"`
	DestinationCPUPer1000 float64 `json:"destination_cpu_seconds_per_1000"`
	TotalCPUPer1000       float64 `json:"total_cpu_seconds_per_1000"`
	// The ratios to the webhook type's figures of the same run (1 for
	// webhook itself).
	DeliveriesPerSecVsWebhook float64          `json:"deliveries_per_sec_vs_webhook"`
	CPUVsWebhook              float64          `json:"total_cpu_vs_webhook"`
	P50VsWebhook              float64          `json:"p50_vs_webhook"`
	PerRoundVsWebhook         []float64        `json:"deliveries_per_sec_per_round_vs_webhook"`
	Check                     DestinationCheck `json:"check"`
	Rounds                    []RoundResult    `json:"rounds"`
}

// DestinationCheck is what the destination holds against hookflow's
// ledger, over every delivery of the type (warm-up included): read back
// from the broker (destcheck), or from the reference receiver's ledger
// for webhooks.
type DestinationCheck struct {
	Source       string `json:"source"`
	Lanes        int    `json:"lanes"`
	Delivered    int    `json:"delivered"`
	Stored       int    `json:"stored"`
	Missing      int    `json:"missing"`
	Repeated     int    `json:"repeated"`
	OutOfOrder   int    `json:"out_of_order"`
	ChainBreaks  int    `json:"chain_breaks"`
	BadSignature int    `json:"bad_signature"`
	Foreign      int    `json:"foreign"`
	// NotDelivered counts the type's events hookflow's ledger has not
	// delivered once the rounds are over.
	NotDelivered int    `json:"not_delivered"`
	OK           bool   `json:"ok"`
	Error        string `json:"error,omitempty"`
}

// compareDestinations runs the ordered workload (cfg.DestinationEvents
// over cfg.Correlations lanes, in cfg.Rounds rounds) into each type of d,
// interleaved round by round as the main scenarios are, and checks what
// each destination holds.
func (r *runner) compareDestinations(ctx context.Context, d *destinations) (*DestinationsResult, error) {
	out := &DestinationsResult{Events: r.cfg.DestinationEvents, Correlations: r.cfg.Correlations, Rounds: r.cfg.Rounds, Skipped: d.skipped}
	var scs []*scenario
	for _, typ := range d.types {
		sc := &scenario{name: "destination-" + typ, short: "d" + typ, kind: kindHookflow, wfType: contract.EventWorkflow, evType: benchEventType}
		sc.corr = func(n int) string { return fmt.Sprintf("%s-%s-%03d", r.tag, sc.short, n%r.cfg.Correlations) }
		if b := d.brokers[typ]; b != nil {
			prefix := "hf" + r.tag + typ
			body, err := b.endpoint(ctx, prefix)
			if err != nil {
				return nil, fmt.Errorf("prepare %s destination: %w", typ, err)
			}
			if sc.endpoint, _, err = postEndpoint(ctx, r.s.apiURL, body, []string{benchEventType}); err != nil {
				return nil, fmt.Errorf("%s endpoint: %w", typ, err)
			}
		} else {
			sc.endpoint = r.s.endpointID
		}
		sc.ledger = sc.endpoint
		scs = append(scs, sc)
	}
	r.p.logf("destinations: warm-up, one event per lane of %s", strings.Join(d.types, ", "))
	for _, sc := range scs {
		if _, err := r.burst(ctx, sc, "w", r.cfg.Correlations); err != nil {
			return nil, err
		}
	}
	for round := 1; round <= r.cfg.Rounds; round++ {
		n := roundSize(r.cfg.DestinationEvents, r.cfg.Rounds, round)
		order := slices.Clone(scs)
		if round%2 == 0 {
			slices.Reverse(order)
		}
		for _, sc := range order {
			res, err := r.burst(ctx, sc, fmt.Sprintf("r%d", round), n)
			if err != nil {
				return nil, err
			}
			res.Round = round
			sc.rounds = append(sc.rounds, res)
			r.p.logf("%s round %d/%d: %d/%d delivered in %.1fs = %.1f deliveries/s", sc.name, round, r.cfg.Rounds,
				res.Deliveries, res.Events, res.Seconds, res.DeliveriesPerSec)
		}
	}
	for i, sc := range scs {
		typ := d.types[i]
		sum := r.burstResult(sc, "")
		res := DestinationResult{Type: typ, EndpointID: sc.endpoint, Events: sum.Events, Deliveries: sum.Deliveries,
			DeliveriesPerSec: sum.DeliveriesPerSec, LatencyMS: sum.LatencyMS, CPUPer1000: sum.CPUPer1000, Rounds: sc.rounds}
		if res.CPUPer1000 == nil {
			res.CPUPer1000 = map[string]float64{}
		}
		res.HookflowCPUPer1000 = res.CPUPer1000[procAPI] + res.CPUPer1000[procWorker] + res.CPUPer1000[procTemporal] + res.CPUPer1000[procPostgres]
		// The reference receiver's alone: the row's "receiver" sums the
		// fan-out receivers too, idle here.
		own := procReceiver
		if d.brokers[typ] != nil {
			own = procBrokerPrefix + typ
		}
		for _, rd := range sc.rounds {
			res.DestinationCPUPer1000 += rd.cpu[own]
		}
		res.DestinationCPUPer1000 = ratio(1000*res.DestinationCPUPer1000, float64(res.Deliveries))
		res.TotalCPUPer1000 = res.HookflowCPUPer1000 + res.DestinationCPUPer1000
		r.p.logf("destinations: checking what %s holds", typ)
		res.Check = r.checkDestination(ctx, sc, d.brokers[typ] != nil, d)
		out.Types = append(out.Types, res)
	}
	web := out.Types[0]
	for i := range out.Types {
		t := &out.Types[i]
		t.DeliveriesPerSecVsWebhook = ratio(t.DeliveriesPerSec, web.DeliveriesPerSec)
		t.CPUVsWebhook = ratio(t.TotalCPUPer1000, web.TotalCPUPer1000)
		t.P50VsWebhook = ratio(t.LatencyMS.P50, web.LatencyMS.P50)
		t.PerRoundVsWebhook = perRound(t.Rounds, web.Rounds)
	}
	return out, nil
}

// checkDestination holds the destination of sc to the promise: each lane's
// deliveries once each, in order, none missing. A check that cannot run
// is a failed check, never a pass.
func (r *runner) checkDestination(ctx context.Context, sc *scenario, isBroker bool, d *destinations) DestinationCheck {
	var c DestinationCheck
	var err error
	if isBroker {
		c, err = r.readBroker(ctx, sc.endpoint, d)
	} else {
		c, err = r.readReceiver(ctx, sc)
	}
	if err == nil {
		err = r.s.hookflowDB.QueryRow(ctx, "SELECT count(*) FROM deliveries WHERE endpoint_id = $1 AND event_id LIKE $2 AND state <> 'delivered'",
			sc.endpoint, r.tag+"-"+sc.short+"-%").Scan(&c.NotDelivered)
	}
	if err != nil {
		c.Error = err.Error()
	}
	c.OK = err == nil && c.OK && c.NotDelivered == 0 && c.Delivered == sc.counter
	return c
}

// readBroker reads the endpoint's destination back through its transport
// and checks it against the ledger, as `hookflow conformance` does.
func (r *runner) readBroker(ctx context.Context, endpointID string, d *destinations) (DestinationCheck, error) {
	c := DestinationCheck{Source: "read back from the broker (destcheck)"}
	st, err := store.New(r.s.hookflowDB)
	if err != nil {
		return c, err
	}
	st = st.Tenant(store.DefaultTenant)
	ep, err := st.EndpointGet(ctx, endpointID)
	if err != nil {
		return c, fmt.Errorf("read endpoint: %w", err)
	}
	trs, err := app.Transports(config.Config{PrivateAllowlist: d.addrs()})
	if err != nil {
		return c, err
	}
	defer trs.Close()
	tr, err := trs.Lookup(ep.Type)
	if err != nil {
		return c, err
	}
	rd, ok := tr.(transport.Reader)
	if !ok {
		return c, fmt.Errorf("a %s destination cannot be read back", ep.Type)
	}
	ledger, err := st.EndpointDeliveries(ctx, endpointID)
	if err != nil {
		return c, err
	}
	rep, err := destcheck.Check(ctx, rd, ep.Destination(true, time.Now()), []string{ep.Secret}, destcheck.FromLedger(ledger), transport.AtLeastOnce(tr))
	if err != nil {
		return c, err
	}
	t := rep.Totals()
	c.Lanes, c.Delivered, c.Stored, c.Foreign = len(rep.Lanes), t.Delivered, t.Stored, rep.Foreign
	c.Missing, c.Repeated, c.OutOfOrder = len(t.Missing), len(t.Repeated), len(t.OutOfOrder)
	c.ChainBreaks, c.BadSignature = len(t.ChainBreaks), len(t.BadSignature)
	// As the type promises: a type that promises at least once (none
	// yet) may hold repeats, which are still counted.
	c.OK = rep.OK()
	return c, nil
}

// readReceiver checks the reference receiver's ledger, in the order it
// applied them, against the webhook lanes' deliveries in hookflow's
// ledger. The receiver verified every signature before it applied.
func (r *runner) readReceiver(ctx context.Context, sc *scenario) (DestinationCheck, error) {
	c := DestinationCheck{Source: "the reference receiver's ledger"}
	like := r.tag + "-" + sc.short + "-%"
	rows, err := r.s.receiverDB.Query(ctx, "SELECT correlation_id, sequence, event_id FROM ledger_entries WHERE event_id LIKE $1 ORDER BY entry_no", like)
	if err != nil {
		return c, fmt.Errorf("read receiver ledger: %w", err)
	}
	last := map[string]int64{}
	held := map[string]bool{}
	var corr, id string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&corr, &seq, &id}, func() error {
		c.Stored++
		switch {
		case held[id]:
			c.Repeated++
			return nil
		case seq <= last[corr]:
			c.OutOfOrder++
		default:
			last[corr] = seq
		}
		held[id] = true
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("read receiver ledger: %w", err)
	}
	c.Lanes = len(last)
	rows, err = r.s.hookflowDB.Query(ctx, "SELECT event_id FROM deliveries WHERE endpoint_id = $1 AND event_id LIKE $2 AND state = 'delivered'", sc.endpoint, like)
	if err != nil {
		return c, fmt.Errorf("read ledger deliveries: %w", err)
	}
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error {
		c.Delivered++
		if !held[id] {
			c.Missing++
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("read ledger deliveries: %w", err)
	}
	c.OK = c.Missing == 0 && c.Repeated == 0 && c.OutOfOrder == 0
	return c, nil
}

// err says which destinations broke their promise or lost deliveries.
func (d *DestinationsResult) err() error {
	if d == nil {
		return nil
	}
	var errs []error
	for _, t := range d.Types {
		if !t.Check.OK {
			errs = append(errs, fmt.Errorf("destination %s: %s", t.Type, t.Check.summary()))
		}
	}
	return errors.Join(errs...)
}

func (c DestinationCheck) summary() string {
	verdict := "PASS"
	if !c.OK {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("%s: %d lanes, %d delivered, %d held, %d missing, %d repeated, %d out of order, %d chain breaks, %d bad signatures, %d foreign, %d not delivered (%s)",
		verdict, c.Lanes, c.Delivered, c.Stored, c.Missing, c.Repeated, c.OutOfOrder, c.ChainBreaks, c.BadSignature, c.Foreign, c.NotDelivered, c.Source)
	if c.Error != "" {
		s += "; " + c.Error
	}
	return s
}

// writeTable prints the comparison: figures only, never judged by speed.
func (d *DestinationsResult) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "\ndestinations: the same ordered workload, %d events over %d lanes in %d rounds (after one event per lane of warm-up), into each type on this stack;\n",
		d.Events, d.Correlations, d.Rounds)
	fmt.Fprintln(w, "latency from the API's 202 to delivered in hookflow's ledger; hookflow CPU is api+worker+temporal+postgres, destination CPU the broker's process")
	fmt.Fprintln(w, "(for webhook, the reference receiver's: its ledger commits run in the shared Postgres, so in hookflow's share); figures only, the checks below judge the run")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tevents\tdeliveries\tdeliveries/s\tvs webhook\tp50 ms\tp99 ms\thookflow CPU s/1k\tdestination CPU s/1k\ttotal CPU s/1k\tCPU vs webhook\tper round vs webhook\t")
	for _, t := range d.Types {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", t.Type, t.Events, t.Deliveries, t.DeliveriesPerSec,
			times(t.DeliveriesPerSecVsWebhook), t.LatencyMS.P50, t.LatencyMS.P99, t.HookflowCPUPer1000, t.DestinationCPUPer1000, t.TotalCPUPer1000,
			times(t.CPUVsWebhook), joinRatios(t.PerRoundVsWebhook))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range d.Types {
		fmt.Fprintf(w, "  %s check: %s\n", t.Type, t.Check.summary())
	}
	for _, typ := range slices.Sorted(maps.Keys(d.Skipped)) {
		fmt.Fprintf(w, "  %s left out: %s\n", typ, d.Skipped[typ])
	}
	return nil
}
