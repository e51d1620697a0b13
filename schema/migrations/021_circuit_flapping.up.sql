-- A flapping receiver rests. Before this migration any
-- answer to a probe closed the circuit and forgot failing_since, so a
-- receiver that answered once every few seconds was never disabled, and
-- each close woke every lane and replayed every outage dead letter.
--
-- half_open: a probe answered, and the circuit needs more answers in a row
-- (HOOKFLOW_CIRCUIT_CLOSE_SUCCESSES, default 3, on the workers) before it
-- closes. It behaves as open for the attempts (one probe at a time holds
-- the lease), with the next probe due at once; a failure in it opens the
-- circuit again with the backoff doubled, and failing_since kept: the
-- outage never ended. probe_successes counts the answers in a row.
ALTER TABLE endpoint_circuits DROP CONSTRAINT endpoint_circuits_state_check;
ALTER TABLE endpoint_circuits ADD CONSTRAINT endpoint_circuits_state_check CHECK (state IN ('closed', 'half_open', 'open'));
ALTER TABLE endpoint_circuits ADD COLUMN probe_successes integer NOT NULL DEFAULT 0;

-- A close keeps the outage it ended: outage_failing_since and
-- outage_backoff_ms are its failing_since and probe backoff. When the
-- circuit opens again within store.FlapReopenMultiple times that backoff
-- after closed_at, the new outage is the old one going on: failing_since
-- is restored (so disable_after counts from the first failure and trips
-- on a flapper) and the backoff doubles from where it was.
ALTER TABLE endpoint_circuits
    ADD COLUMN outage_failing_since timestamptz,
    ADD COLUMN outage_backoff_ms bigint;

-- The opened and closed operational events, coalesced per endpoint: at
-- most one every store.CircuitEventEvery. event_state is the state the
-- last one published told (open or closed), event_at when, and
-- events_coalesced the transitions left unpublished since. A transition
-- within the interval publishes nothing; the API's sweep publishes the
-- state in force once the interval is over if it is not the one told
-- (CircuitsEventCatchUp), so the subscribers' picture is never left wrong
-- for longer than the interval.
ALTER TABLE endpoint_circuits
    ADD COLUMN event_state text CHECK (event_state IN ('closed', 'open')),
    ADD COLUMN event_at timestamptz,
    ADD COLUMN events_coalesced integer NOT NULL DEFAULT 0;

CREATE INDEX endpoint_circuits_event_catch_up_idx ON endpoint_circuits (event_at)
    WHERE events_coalesced > 0;

-- The wake and the auto-replay go round the endpoints: a
-- pass signals or replays at most a page (starter) of each endpoint's
-- lanes, then serves the next endpoint, so one endpoint with thousands of
-- lanes no longer holds up the others. An endpoint left with work keeps
-- its request and is put behind the others (wake_turn_at,
-- auto_replay_turn_at: when a pass last served it part way). The wake
-- goes on after wake_after, the last event it signalled, for the stamp
-- wake_after_stamp; a new close stamps wake_requested_at anew, so the
-- cursor no longer matches and the wake starts over. The auto-replay needs
-- no cursor: what it replayed is no longer open.
ALTER TABLE endpoint_circuits
    ADD COLUMN wake_after text,
    ADD COLUMN wake_after_stamp timestamptz,
    ADD COLUMN wake_turn_at timestamptz,
    ADD COLUMN auto_replay_turn_at timestamptz;

-- A dead letter's generation holds only its own attempts: last_attempt_id
-- is the last delivery_attempts row it holds, and the
-- next generation takes the attempts after it. Before, each generation
-- copied every attempt so far, so a replayed flapper's row grew with
-- every generation.
ALTER TABLE dead_letters ADD COLUMN last_attempt_id bigint;
