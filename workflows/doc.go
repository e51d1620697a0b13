// Package workflows holds hookflow's two workflows: EventWorkflow, one per
// accepted event (workflow ID = the event's idempotency key), and
// SequencerWorkflow, one per correlation ID, the only authority on when an
// event may deliver: it releases each one only after its predecessor is
// delivered or skipped. Their names, messages and search attributes are in
// internal/contract.
package workflows
