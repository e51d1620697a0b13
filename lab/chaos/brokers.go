package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hookflow/hookflow/activities"
	"github.com/hookflow/hookflow/cmd/hookflow/app"
	"github.com/hookflow/hookflow/internal/config"
	"github.com/hookflow/hookflow/internal/destcheck"
	"github.com/hookflow/hookflow/internal/store"
	"github.com/hookflow/hookflow/internal/transport"
	hfclient "github.com/hookflow/hookflow/kit/client"
	"github.com/hookflow/hookflow/lab/testenv/natstest"
	"github.com/hookflow/hookflow/lab/testenv/redistest"
)

// The run's brokers, by the endpoint type of their destinations.
const (
	BrokerNATS  = "nats"
	BrokerRedis = "redis"
)

// brokerKinds are the brokers a run with Config.Brokers starts, in the
// order the fault schedule takes turns at them.
var brokerKinds = []string{BrokerNATS, BrokerRedis}

// BrokerSubscriber is a broker destination of each tenant: the broker it
// writes into and the event types it is sent, so that it holds a share of
// every correlation beside the webhook endpoints' lanes. The shares are
// narrow (a fifth of the events each), so that the brokers add few
// deliveries to the run.
type BrokerSubscriber struct {
	Kind       string
	EventTypes []string
}

// BrokerSubscribers are the broker destinations each tenant of a run with
// Config.Brokers gets.
func BrokerSubscribers() []BrokerSubscriber {
	return []BrokerSubscriber{
		{Kind: BrokerNATS, EventTypes: []string{"order.created"}},
		{Kind: BrokerRedis, EventTypes: []string{"invoice.issued"}},
	}
}

// brokerDest is one tenant's broker destination as the stack created it.
type brokerDest struct {
	Kind, Tenant, ID string
}

// name is how the lines name it: "nats@tenant-1".
func (d brokerDest) name() string { return d.Kind + "@" + d.Tenant }

// brokerProc is a broker process the faults kill and restart.
type brokerProc interface {
	Addr() string
	Kill() error
	Restart(ctx context.Context) error
	Close() error
}

// brokers are the run's broker processes (real nats-server and
// redis-server processes, their data under the run's data folder, which
// outlives a kill) and the tenants' destinations on them.
type brokers struct {
	nats  *natstest.Server
	redis *redistest.Server
	dests []brokerDest
}

// startBrokers starts a nats-server (JetStream) and a redis-server under
// dir, on 127.0.0.1.
func startBrokers(ctx context.Context, dir string) (*brokers, error) {
	b := &brokers{}
	natsDir := filepath.Join(dir, "nats")
	if err := os.MkdirAll(natsDir, 0o700); err != nil {
		return nil, fmt.Errorf("make nats-server's folder: %w", err)
	}
	var err error
	if b.nats, err = natstest.Start(ctx, natsDir); err != nil {
		return nil, fmt.Errorf("start nats-server: %w", err)
	}
	if b.redis, err = redistest.Start(ctx, filepath.Join(dir, "redis")); err != nil {
		_ = b.nats.Close()
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	return b, nil
}

// proc is the broker of kind, or nil.
func (b *brokers) proc(kind string) brokerProc {
	switch {
	case b == nil:
		return nil
	case kind == BrokerNATS:
		return b.nats
	case kind == BrokerRedis:
		return b.redis
	}
	return nil
}

// addrs are the brokers' host:ports: the private targets the stack's
// egress allowlist lets through beside the fault proxy.
func (b *brokers) addrs() []string {
	if b == nil {
		return nil
	}
	return []string{b.nats.Addr(), b.redis.Addr()}
}

// stop stops both brokers, their folders kept with the run's.
func (b *brokers) stop() {
	if b == nil {
		return
	}
	_ = b.nats.Close()
	_ = b.redis.Close()
}

// dest is the destination with hookflow id id, or false.
func (b *brokers) dest(id string) (brokerDest, bool) {
	if b == nil {
		return brokerDest{}, false
	}
	i := slices.IndexFunc(b.dests, func(d brokerDest) bool { return d.ID == id })
	if i < 0 {
		return brokerDest{}, false
	}
	return b.dests[i], true
}

// ids are the destinations' hookflow ids.
func (b *brokers) ids() []string {
	if b == nil {
		return nil
	}
	out := make([]string, len(b.dests))
	for i, d := range b.dests {
		out[i] = d.ID
	}
	return out
}

// createDests creates each tenant's broker destinations as their user
// would: the stream first (a broker's streams are its user's; hookflow
// checks that it exists and never creates one), then the endpoint, with the
// tenant's key. Each tenant writes under a prefix of its own, since the
// tenants share correlation IDs.
func (b *brokers) createDests(ctx context.Context, tenants []string, api func(tenant string) *hfclient.Client) error {
	for _, t := range tenants {
		prefix := "chaos_" + strings.ReplaceAll(t, "-", "_")
		for _, sub := range BrokerSubscribers() {
			req := hfclient.EndpointCreate{Type: hfclient.EndpointType(sub.Kind), EventTypes: eventTypes(sub.EventTypes)}
			switch sub.Kind {
			case BrokerNATS:
				if err := natstest.CreateStream(ctx, b.nats.URL(), "hf_"+prefix, []string{prefix + ".>"}); err != nil {
					return err
				}
				req.Config = map[string]any{"url": b.nats.URL(), "subject": prefix}
				req.Credentials = map[string]string{"username": natstest.Username, "password": b.nats.Password()}
			case BrokerRedis:
				if err := b.redis.CreateStream(ctx, prefix, "consumers"); err != nil {
					return err
				}
				req.Config = map[string]any{"addr": b.redis.Addr(), "stream": prefix, "tls": false}
				req.Credentials = b.redis.Credentials()
			}
			r, err := api(t).EndpointCreateWithResponse(ctx, req)
			if err != nil {
				return fmt.Errorf("create %s destination of %s: %w", sub.Kind, t, err)
			}
			b.dests = append(b.dests, brokerDest{Kind: sub.Kind, Tenant: t, ID: r.JSON201.ID})
		}
	}
	return nil
}

// BrokerObserved is what one broker destination holds against hookflow's
// ledger once quiet (destcheck), and how many of its deliveries the ledger
// has neither delivered nor skipped.
type BrokerObserved struct {
	Name       string
	Report     destcheck.Report
	Unfinished int
	// DeadLettered counts its deliveries with a dead letter row (a broker
	// down past the recovery window), replayed since; FailedAttempts its
	// attempts that failed and were retried (the broker down, or its
	// answer lost): the kills' mark on it.
	DeadLettered, FailedAttempts int
}

// readBrokers reads every broker destination back through its transport's
// Reader, as a consumer would, and judges it against the endpoint's
// deliveries in hookflow's ledger: what `hookflow conformance
// --destination` does.
func (o *observer) readBrokers(ctx context.Context) ([]BrokerObserved, error) {
	b := o.st.brokers
	if b == nil {
		return nil, nil
	}
	transports, err := app.Transports(config.Config{PrivateAllowlist: b.addrs()})
	if err != nil {
		return nil, err
	}
	defer transports.Close()
	st, err := store.New(o.st.hf)
	if err != nil {
		return nil, err
	}
	var out []BrokerObserved
	for _, d := range b.dests {
		ledger := st.Tenant(d.Tenant)
		ep, err := ledger.EndpointGet(ctx, d.ID)
		if err != nil {
			return nil, err
		}
		tr, err := transports.Lookup(ep.Type)
		if err != nil {
			return nil, err
		}
		rd, ok := tr.(transport.Reader)
		if !ok {
			return nil, fmt.Errorf("a %s destination cannot be read back", ep.Type)
		}
		deliveries, err := ledger.EndpointDeliveries(ctx, d.ID)
		if err != nil {
			return nil, err
		}
		secrets := []string{ep.Secret}
		for _, p := range ep.Previous {
			secrets = append(secrets, p.Secret)
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		r, err := destcheck.Check(rctx, rd, ep.Destination(true, time.Now()), secrets, destcheck.FromLedger(deliveries), transport.AtLeastOnce(tr))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", d.name(), err)
		}
		bo := BrokerObserved{Name: d.name(), Report: r}
		for _, dl := range deliveries {
			if dl.State != stateDelivered && dl.State != stateSkipped {
				bo.Unfinished++
			}
		}
		if err := o.st.hf.QueryRow(ctx, `SELECT (SELECT count(*) FROM dead_letters WHERE tenant_id = $1 AND endpoint_id = $2),
				(SELECT count(*) FROM delivery_attempts WHERE tenant_id = $1 AND endpoint_id = $2 AND outcome = $3)`,
			d.Tenant, d.ID, activities.OutcomeRetry).Scan(&bo.DeadLettered, &bo.FailedAttempts); err != nil {
			return nil, fmt.Errorf("count %s's dead letters and failed attempts: %w", d.name(), err)
		}
		out = append(out, bo)
	}
	return out, nil
}

// checkBrokers holds each broker destination to its promise, exactly once
// and in order per lane as the broker holds them: nothing delivered in the
// ledger missing from it, nothing held twice, out of order, with a broken
// previous_sequence chain, badly signed or written by another endpoint,
// and nothing left unfinished in the ledger.
func checkBrokers(bs []BrokerObserved, v *Verdict) {
	for _, b := range bs {
		t := b.Report.Totals()
		v.BrokerLanes += len(b.Report.Lanes)
		v.BrokerDelivered += t.Delivered
		v.BrokerDeadLettered += b.DeadLettered
		v.BrokerFailedAttempts += b.FailedAttempts
		v.BrokerMissing += len(t.Missing)
		v.BrokerRepeated += len(t.Repeated)
		v.BrokerOutOfOrder += len(t.OutOfOrder)
		v.BrokerChainBreaks += len(t.ChainBreaks)
		v.BrokerBadSignatures += len(t.BadSignature) + b.Report.Foreign
		v.BrokerUnfinished += b.Unfinished
		for _, l := range b.Report.Lanes {
			for _, f := range []struct {
				what string
				seqs []int64
			}{{"missing", l.Missing}, {"repeated", l.Repeated}, {"out of order", l.OutOfOrder}, {"chain breaks", l.ChainBreaks}, {"bad signatures", l.BadSignature}} {
				if len(f.seqs) > 0 {
					v.note("broker: %s lane %s: %s at sequences %v (delivered %d, stored %d)", b.Name, l.Lane, f.what, f.seqs, l.Delivered, l.Stored)
				}
			}
		}
		if b.Report.Foreign > 0 {
			v.note("broker: %s holds %d messages of another endpoint", b.Name, b.Report.Foreign)
		}
		if b.Unfinished > 0 {
			v.note("broker: %s has %d deliveries neither delivered nor skipped once quiet", b.Name, b.Unfinished)
		}
	}
}

// killBroker SIGKILLs a broker, leaves it down for a.For and starts it
// again on its folder and port. It is started again even when the run is
// ending, since the checks read it back.
func (f *injector) killBroker(ctx context.Context, a Action) (outcome, string) {
	b := f.st.brokers.proc(a.Broker)
	if b == nil {
		return skipped, "the run has no such broker"
	}
	t0 := time.Now()
	if err := b.Kill(); err != nil {
		return failed, err.Error()
	}
	select {
	case <-ctx.Done():
	case <-time.After(a.For):
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := b.Restart(rctx); err != nil {
		return failed, fmt.Sprintf("restart: %v", err)
	}
	return injected, fmt.Sprintf("SIGKILL, down %s, back in %s", a.For.Round(100*time.Millisecond), time.Since(t0).Round(100*time.Millisecond))
}
