-- The circuit breaker per endpoint, automatic recovery and auto-disable.
--
-- Settings, in the endpoint's row beside the other delivery settings. NULL
-- is the default: circuit_failure_threshold 5 consecutive retryable
-- failures, disable_after 5 days (120 h). auto_replay is off unless asked.
ALTER TABLE endpoints
    ADD COLUMN circuit_failure_threshold integer
        CONSTRAINT endpoints_circuit_failure_threshold_range CHECK (circuit_failure_threshold BETWEEN 1 AND 1000),
    ADD COLUMN auto_replay boolean NOT NULL DEFAULT false,
    ADD COLUMN disable_after_ms bigint
        CONSTRAINT endpoints_disable_after_range CHECK (disable_after_ms BETWEEN 60000 AND 7776000000);

-- The breaker's state, one row per endpoint that has ever failed, shared by
-- every worker and surviving any crash. Its own table, like the rate
-- limiter's, keeps the writes of a failing endpoint off the endpoints row
-- every attempt reads.
--
-- consecutive_failures counts retryable failures (5xx, 429, 408, 202,
-- timeouts, connection errors) since the last answer that was not one;
-- failing_since is the first of them (NULL while the endpoint answers).
-- At circuit_failure_threshold the circuit opens: attempts send nothing
-- until next_probe_at, when one attempt, and only one, claims the probe
-- lease (probe_owner until probe_lease_until) and sends. Its success
-- closes the circuit; its failure opens it again for twice probe_backoff_ms
-- (5 s doubling to 5 min). A probe that crashed loses its lease when it
-- expires.
--
-- An outage longer than the recovery window dead-letters every lane's head,
-- and then no attempt is left to probe: for an endpoint with auto_replay
-- the API's sweep replays one of the outage's dead letters when a probe is
-- due and no probe holds the lease (probe_replayed_at, at most one such
-- replay per probe interval), and that replay's attempt is the probe.
--
-- auto_replay_pending_since is set, in the transaction that closes the
-- circuit of an endpoint with auto_replay, to the outage's failing_since:
-- the API's sweep replays the dead letters written since then and clears
-- it, so a crash between the close and the replay loses no replay. A dead
-- letter the outage caused that is written after the close (its window's
-- last look came before it, and its write after a worker's crash or after
-- the sweep's pass) sets it again, to its window's start, when the circuit
-- closed (closed_at: its last close, or the endpoint enabled again) after
-- that. auto_replay_requested_at is stamped by
-- each close and each such late dead letter: the sweep clears the pending
-- replay only when the stamp is still the one its pass read, so a close or
-- a dead letter that came during the pass gets a pass of its own.
CREATE TABLE endpoint_circuits (
    endpoint_id               text PRIMARY KEY REFERENCES endpoints (id),
    state                     text NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open')),
    consecutive_failures      integer NOT NULL DEFAULT 0,
    failing_since             timestamptz,
    opened_at                 timestamptz,
    closed_at                 timestamptz,
    next_probe_at             timestamptz,
    probe_backoff_ms          bigint NOT NULL DEFAULT 5000,
    probe_owner               text,
    probe_lease_until         timestamptz,
    auto_replay_pending_since timestamptz,
    auto_replay_requested_at  timestamptz,
    probe_replayed_at         timestamptz,
    updated_at                timestamptz NOT NULL DEFAULT now()
);

-- The auto-replay sweep reads only the circuits with a replay pending.
CREATE INDEX endpoint_circuits_auto_replay_idx ON endpoint_circuits (auto_replay_pending_since)
    WHERE auto_replay_pending_since IS NOT NULL;
