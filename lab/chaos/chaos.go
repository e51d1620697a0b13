// Package chaos runs hookflow as real processes — Postgres, the Temporal
// server, the API, several workers and a reference receiver per kind of endpoint —
// under injected faults, then checks hookflow's promises against the
// receivers' ledgers. Events are published once each and fanned out by
// type to five endpoints with different subscriptions, so each endpoint
// sees its own subset of every correlation; every promise is checked per
// (correlation, endpoint) lane: every delivery an accepted event is owed
// applied exactly once, or dead-lettered with a row, or skipped by an
// operator, in the lane's sequence order (the receiver's compare-and-swap on
// previous_sequence), nothing left in flight.
//
// Faults come from a seeded schedule: SIGKILLed workers, a Postgres crash and
// restart, a Temporal server outage (killed, down a few seconds while
// events are posted out of order, which the API accepts queued), and, in a proxy between the
// workers and the receiver, held requests past the HTTP timeout, lost
// acknowledgements (the receiver committed, the sender's connection is
// reset), 5xx bursts, one endpoint (C) down for longer than the recovery
// window, healed and replayed afterwards, while the others go on, and one
// (B) that flaps: down for a few seconds, up again, down again, so that its
// circuit breaker opens and closes and its auto_replay replays the dead
// letters of its outages. The schedule also presses the buttons the Web UI
// and the API give any operator: double clicks on a dead letter's replay
// (or a replay and a skip at once), and Terminate and Reset of event
// workflows and sequencers. Once quiet, every lane must be
// complete, or wait on a dead letter an operator can still act on.
//
// Besides the faults, the run has situations an operator and a producer
// bring about in a running hookflow (Situations): one endpoint (A) is
// paused, disabled for a few seconds while events of its types are posted,
// then enabled, which replays what its being disabled dead-lettered; one
// (S) has a slow receiver and a small max_in_flight; one (D) is deleted
// mid-run, after which its lanes end (delivered or skipped) and routing
// passes it by; and a few correlations lose a sequence that the producer
// never posts, which the operator voids (POST /v1/correlations/{id}/skip)
// and then posts once more, to be refused. The checks hold each of them
// to what hookflow promises of it (checkSituations, checkDeleted).
//
// Beside the webhooks, each tenant has broker destinations (Config.Brokers,
// BrokerSubscribers): a NATS JetStream and a Redis Streams endpoint, each
// sent a share of every correlation, written into a nats-server and a
// redis-server the stack runs as real processes, each SIGKILLed and
// restarted a few seconds later on the schedule. Once quiet each is read
// back from its broker, as a consumer would, and held to its promise
// (destcheck): every delivered event held once, in order, its chain of
// previous_sequence unbroken and its signature good (checkBrokers).
//
// The run serves several tenants at once (Config.Tenants), each with its
// own key and its own endpoints of each kind, its correlations dealt out
// to them with the same IDs in every tenant; every check holds per
// (tenant, correlation, endpoint) lane, and one more holds that nothing of
// one tenant reached another's endpoint (Verdict.CrossTenant).
//
// A run is a small composition of parts, each a type of its own with its
// own state, one file each: the stack (stack.go) starts, supervises and
// stops the processes and holds the clients of them; the producer
// (workload.go) posts the seeded workload and counts the API's answers; the
// injector (faults.go) carries out the timed fault schedule and tallies it;
// the operator (operator.go) presses the operator's buttons and remembers
// what it replayed, skipped and double-clicked; the observer (observe.go)
// reads the ledgers, during the run for the progress and once quiet for
// the checks of check.go. run.go wires them together and runs the phases.
package chaos

import (
	"cmp"
	"errors"
	"io"
	"time"

	"github.com/hookflow/hookflow/internal/contract"
)

// Config is one chaos run.
type Config struct {
	// Binary is the hookflow executable the child processes run.
	Binary string
	// DataDir holds the Postgres cluster and every log. It must be empty or
	// hold an earlier chaos run (which is wiped).
	DataDir string
	// Seed makes the workload and the fault schedule repeatable.
	Seed uint64
	// Events are spread over Correlations; DuplicateRate of them are posted twice.
	Events, Correlations int
	DuplicateRate        float64
	// Workers is the number of hookflow worker processes.
	Workers int
	// Tenants is how many tenants the run creates (ChaosTenants) and deals
	// its correlations out to, each with an endpoint of each kind (0: the
	// default tenant alone).
	Tenants int
	// Subscribers are the endpoints the stack creates, each with a receiver
	// of its own; Down is the index of the one that is down from the start
	// until its lanes' heads have dead-lettered (-1: none). Run sets them
	// from the workload.
	Subscribers []Subscriber
	Down        int
	// Flapping is the index of the endpoint whose receiver goes down and up
	// again during the fault phase (-1: none), created with a low circuit
	// breaker threshold (flapThreshold) and auto_replay, so that its
	// breaker opens and closes and hookflow replays its outages' dead
	// letters itself. Run sets it.
	Flapping int
	// Situations names the endpoints of the run's situations (Run sets
	// them); nil for none, as in the operator model's stack.
	Situations *Situations
	// FaultPhase is how long the timed faults (kills, restarts, bursts) go
	// on; events are posted over its first 70 %. The per-request faults of
	// the proxy go on until quiet.
	FaultPhase time.Duration
	// RecoveryWindow and DeliveryTimeout are given to the API and workers.
	RecoveryWindow, DeliveryTimeout time.Duration
	// RepairAfter is the API's HOOKFLOW_REPAIR_AFTER; zero leaves its
	// default (30 s).
	RepairAfter time.Duration
	// EventMaxHistory is the API's and the workers' HOOKFLOW_EVENT_MAX_HISTORY; zero leaves
	// its default.
	EventMaxHistory int
	// KillEvery is the mean gap between worker SIGKILLs; BurstEvery between
	// 5xx bursts; OperatorEvery between the operator's actions (double
	// clicks, Terminate, Reset).
	KillEvery, BurstEvery, OperatorEvery time.Duration
	// Brokers gives each tenant broker destinations beside its webhook
	// endpoints (BrokerSubscribers), written into a nats-server and a
	// redis-server the stack runs as real processes, and read back once
	// quiet (checkBrokers); BrokerEvery is the mean gap between the kills
	// (SIGKILL, then a restart a few seconds later) of one of them, in
	// turn (zero: none).
	Brokers     bool
	BrokerEvery time.Duration
	// Latency and LostAck are the per-request odds of those proxy faults.
	Latency, LostAck float64
	// QuietTimeout bounds the wait for every event to reach a final state
	// once the posts are done. The wait also ends after a few minutes
	// without any progress.
	QuietTimeout time.Duration
	// Posters is the number of goroutines posting events.
	Posters int
	// Calm runs the same workload and checks with no fault at all: the
	// baseline a chaos run is compared with.
	Calm bool
	// Stdout gets the result lines; Stderr the progress.
	Stdout, Stderr io.Writer
}

// Situations are the endpoints, by index, of what an operator and a
// producer do to a running hookflow besides its faults (-1: none): one
// endpoint is paused (disabled for a few seconds while events of its types
// are posted, then enabled), one is slow (its receiver holds each request
// most of the delivery timeout, under a small max_in_flight), one is
// deleted mid-run. The fourth situation, sequences the producer lost and
// the operator voids, is the workload's (Workload.Voided).
type Situations struct {
	Paused, Slow, Deleted int
}

// tenantList names cfg's tenants.
func (cfg Config) tenantList() []string {
	if cfg.Tenants < 1 {
		return []string{contract.DefaultTenant}
	}
	return ChaosTenants(cfg.Tenants)
}

// situations returns cfg's, or none.
func (cfg Config) situations() Situations {
	if cfg.Situations == nil {
		return Situations{Paused: -1, Slow: -1, Deleted: -1}
	}
	return *cfg.Situations
}

// chaosEventMaxHistory is the runs' HOOKFLOW_EVENT_MAX_HISTORY: low, so
// that events whose lanes wait their turn at the slow endpoint's
// max_in_flight, or on a dead letter, continue as new during a run.
const chaosEventMaxHistory = 40

// Short is the short preset: 1,000 events (about 2,300 deliveries to the
// five endpoints) over 50 correlations, 90 s of faults; about 3 minutes on
// a 2-core machine of its own.
func Short() Config {
	return Config{
		Seed: 1, Events: 1000, Correlations: 50, DuplicateRate: 0.10, Workers: 3, Tenants: 3,
		FaultPhase: 90 * time.Second, RecoveryWindow: 15 * time.Second, DeliveryTimeout: 2 * time.Second,
		KillEvery: 10 * time.Second, BurstEvery: 15 * time.Second, OperatorEvery: 6 * time.Second,
		Brokers: true, BrokerEvery: 30 * time.Second,
		Latency: 0.03, LostAck: 0.05, QuietTimeout: 20 * time.Minute, Posters: 8, EventMaxHistory: chaosEventMaxHistory,
	}
}

// Long is the default run: 10,000 events over 200 correlations.
func Long() Config {
	return Config{
		Seed: 1, Events: 10000, Correlations: 200, DuplicateRate: 0.10, Workers: 3, Tenants: 3,
		FaultPhase: 10 * time.Minute, RecoveryWindow: 30 * time.Second, DeliveryTimeout: 2 * time.Second,
		KillEvery: 10 * time.Second, BurstEvery: 20 * time.Second, OperatorEvery: 20 * time.Second,
		Brokers: true, BrokerEvery: 90 * time.Second,
		Latency: 0.03, LostAck: 0.05, QuietTimeout: time.Hour, Posters: 8, EventMaxHistory: chaosEventMaxHistory,
	}
}

// Result is what a run found.
type Result struct {
	Verdict Verdict
	// Faults is the breakdown line; Tenants the tenants' line (what
	// passed of each); Summary the one-line verdict.
	Faults, Tenants, Summary string
	Wall                     time.Duration
}

// marker names the file that says a folder holds a chaos run.
const marker = ".hookflow-chaos"

// ErrDataDirInUse is returned for a data folder that holds something other
// than an earlier chaos run.
var ErrDataDirInUse = errors.New("the data folder is not empty and holds no earlier chaos run; choose an empty one")

func validate(cfg *Config) error {
	switch {
	case cfg.Binary == "":
		return errors.New("chaos: the hookflow binary is required")
	case cfg.DataDir == "":
		return errors.New("chaos: a data folder is required")
	case cfg.Workers < 1:
		return errors.New("chaos: at least one worker is required")
	case cfg.FaultPhase < 10*time.Second:
		return errors.New("chaos: the fault phase must last at least 10s")
	case cfg.RecoveryWindow <= 0 || cfg.DeliveryTimeout <= 0:
		return errors.New("chaos: recovery window and delivery timeout must be positive")
	}
	cfg.Posters = cmp.Or(cfg.Posters, 8)
	cfg.QuietTimeout = cmp.Or(cfg.QuietTimeout, 5*time.Minute)
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	return nil
}
