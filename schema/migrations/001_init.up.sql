-- hookflow's sender-side ledger. Temporal runs the workflows and decides the
-- order (one SequencerWorkflow per correlation); these tables hold what must
-- outlive Temporal's retention and what the API answers from: which keys were
-- accepted (the dedup of record), each correlation's cursor as its sequencer
-- last moved it, every attempt, and the dead letters operators act on.

CREATE TABLE endpoints (
    id                  text PRIMARY KEY,
    url                 text NOT NULL,
    secret              text NOT NULL,
    -- During a rotation the secrets it replaced keep signing (more
    -- signatures) until each one's grace period ends, so receivers can roll
    -- over without a gap, even through a second rotation within the grace
    -- period: [{"secret": …, "expires_at": …}], oldest first.
    previous_secrets    jsonb NOT NULL DEFAULT '[]',
    disabled            boolean NOT NULL DEFAULT false,
    disabled_reason     text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- One row per correlation: the sequence its sequencer releases next, mirrored
-- here in the transaction that marks the event before it delivered or
-- skipped (a compare-and-swap, so a repeat changes nothing). A sequencer
-- starting afresh (after an idle end, or after an operator terminated it)
-- loads it; the API answers from it when no sequencer runs.
CREATE TABLE correlations (
    correlation_id text PRIMARY KEY,
    next_sequence  bigint NOT NULL DEFAULT 1,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE events (
    id             text PRIMARY KEY,
    correlation_id text NOT NULL,
    sequence       bigint NOT NULL CHECK (sequence >= 1),
    endpoint_id    text NOT NULL REFERENCES endpoints (id),
    type           text NOT NULL,
    data           jsonb NOT NULL,
    payload_hash   bytea NOT NULL,
    -- queued: stored, workflow not started yet; waiting: its workflow waits
    -- for the sequencer's release; delivering; delivered; dead_lettered;
    -- skipped.
    state          text NOT NULL DEFAULT 'queued',
    accepted_at    timestamptz NOT NULL DEFAULT now(),
    released_at    timestamptz,
    delivered_at   timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- The run of its workflow started last (by the API or a sweep): a
    -- release that finds a different one started it again (an operator
    -- terminated the held event), and says so in restarts below.
    run_id         text,
    -- When a sweep last took the event in hand (starting a queued one,
    -- checking a head that does not move): a lease, so API processes share
    -- the sweeps without holding a lock while they call Temporal.
    swept_at       timestamptz,
    -- How often a sweep had to start its workflow again (an operator
    -- terminated it, say), when last and why: GET /v1/events shows it.
    restarts       integer NOT NULL DEFAULT 0,
    restarted_at   timestamptz,
    restart_reason text,
    -- A sequence number belongs to one key only: a second key claiming it is
    -- a producer bug that would break ordering, so it is refused (409).
    UNIQUE (correlation_id, sequence)
);

-- The sweep finds accepted events whose workflow is not started yet.
CREATE INDEX events_queued_idx ON events (accepted_at) WHERE state = 'queued';

-- Events not delivered or skipped, by correlation in sequence order: what a
-- sequencer starting afresh loads and GET /v1/correlations reads, and the
-- backlog that the stats summary, the blocked-correlations list and the
-- sweep for heads that do not move go through. It stays as small as the
-- backlog, however long the history.
CREATE INDEX events_pending_idx ON events (correlation_id, sequence)
    WHERE state NOT IN ('delivered', 'skipped');

-- Delivered events by delivery time: the summary's "delivered in the last
-- 5 minutes" reads a range at the end of it.
CREATE INDEX events_delivered_at_idx ON events (delivered_at) WHERE state = 'delivered';

CREATE TABLE delivery_attempts (
    id          bigserial PRIMARY KEY,
    event_id    text NOT NULL REFERENCES events (id),
    attempt     integer NOT NULL,
    started_at  timestamptz NOT NULL,
    latency_ms  integer NOT NULL,
    status_code integer,
    error       text,
    outcome     text NOT NULL
);

CREATE INDEX delivery_attempts_event_idx ON delivery_attempts (event_id, id);

CREATE TABLE dead_letters (
    event_id         text PRIMARY KEY REFERENCES events (id),
    correlation_id   text NOT NULL,
    sequence         bigint NOT NULL,
    endpoint_id      text NOT NULL,
    envelope         jsonb NOT NULL,
    attempts         jsonb NOT NULL,
    reason           text NOT NULL,
    first_failure_at timestamptz,
    dead_lettered_at timestamptz NOT NULL,
    -- Counts the times the event was dead-lettered: a replay or skip names
    -- the generation it is for, so one aimed at an earlier dead letter (a
    -- double click) changes nothing.
    generation       integer NOT NULL DEFAULT 1,
    -- open: waiting for an operator; replayed; skipped.
    status           text NOT NULL DEFAULT 'open',
    replayed_at      timestamptz,
    replayed_by      text,
    replay_count     integer NOT NULL DEFAULT 0,
    skipped_by       text,
    skipped_at       timestamptz,
    skip_note        text
);

CREATE INDEX dead_letters_open_idx ON dead_letters (dead_lettered_at, event_id) WHERE status = 'open';
CREATE INDEX dead_letters_correlation_idx ON dead_letters (correlation_id, sequence);
