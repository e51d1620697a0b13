// Package workflows holds hookflow's two workflows: EventWorkflow, one per
// accepted event (workflow ID = the event's idempotency key), which runs a
// lane per endpoint the event was routed to, and SequencerWorkflow, one per
// correlation ID, the only authority on when a delivery may go: it releases
// an event to an endpoint only once every earlier event of the correlation
// has arrived and every earlier one meant for that endpoint is delivered or
// skipped there. Their names, messages and search attributes are in
// internal/contract.
package workflows
