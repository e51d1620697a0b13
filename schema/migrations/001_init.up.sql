-- hookflow's sender-side ledger. Temporal holds the workflows; these tables
-- hold what must outlive Temporal's retention: which keys were accepted (the
-- dedup of record), every attempt, and the dead letters operators act on.

CREATE TABLE endpoints (
    id                  text PRIMARY KEY,
    url                 text NOT NULL,
    secret              text NOT NULL,
    -- During a rotation the previous secret keeps signing (a second
    -- signature) until it expires, so receivers can roll over without a gap.
    previous_secret     text,
    previous_expires_at timestamptz,
    disabled            boolean NOT NULL DEFAULT false,
    disabled_reason     text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- One row per correlation: the sequence the receiver needs next. Advanced
-- with a compare-and-swap when an event is delivered or skipped; the
-- sequencer workflow reloads it when it starts afresh.
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
    -- queued: stored, workflow not started yet; waiting: started, not released;
    -- delivering; delivered; dead_lettered; skipped.
    state          text NOT NULL DEFAULT 'queued',
    accepted_at    timestamptz NOT NULL DEFAULT now(),
    released_at    timestamptz,
    delivered_at   timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- A sequence number belongs to one key only: a second key claiming it is
    -- a producer bug that would break ordering, so it is refused (409).
    UNIQUE (correlation_id, sequence)
);

-- The starter finds accepted events whose workflow is not started yet.
CREATE INDEX events_queued_idx ON events (accepted_at) WHERE state = 'queued';

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
    -- open: waiting for an operator; replayed; skipped.
    status           text NOT NULL DEFAULT 'open',
    replayed_at      timestamptz,
    replay_count     integer NOT NULL DEFAULT 0,
    skipped_by       text,
    skipped_at       timestamptz,
    skip_note        text
);

CREATE INDEX dead_letters_open_idx ON dead_letters (dead_lettered_at, event_id) WHERE status = 'open';
CREATE INDEX dead_letters_correlation_idx ON dead_letters (correlation_id, sequence);
