-- name: CircuitProbeClaim :one
-- Claims the probe of the endpoint $1's open circuit for owner $2, for $3
-- seconds, when its next probe is due (or at once when $4, a replay's
-- attempt) and no other probe holds the lease (the owner's own lease, held
-- over a throttled attempt, is claimed again): one
-- UPDATE, so of concurrent attempts on any worker exactly one wins (the
-- others re-check the row the winner committed and find the lease held).
-- It answers whether this call claimed it, the circuit's state, and how
-- many seconds until the next probe may be claimed (the snapshot before the
-- claim: the caller that lost waits that long).
WITH claimed AS (
    UPDATE endpoint_circuits SET probe_owner = $2, probe_lease_until = clock_timestamp() + make_interval(secs => $3),
                                 updated_at = now()
    WHERE endpoint_id = $1 AND state IN ('open', 'half_open') AND (next_probe_at <= clock_timestamp() OR $4::boolean)
      AND (probe_lease_until IS NULL OR probe_lease_until <= clock_timestamp() OR probe_owner = $2)
    RETURNING endpoint_id
)
SELECT EXISTS (SELECT 1 FROM claimed) AS claimed, c.state,
       EXTRACT(EPOCH FROM GREATEST(c.next_probe_at, COALESCE(c.probe_lease_until, c.next_probe_at)) - clock_timestamp())::float8 AS wait_secs
FROM endpoint_circuits c WHERE c.endpoint_id = $1;

-- name: CircuitEnsure :exec
-- With its endpoint's tenant (migration 031); an unknown endpoint fails
-- on it, as it did on the foreign key.
INSERT INTO endpoint_circuits (endpoint_id, tenant_id) VALUES ($1, (SELECT e.tenant_id FROM endpoints e WHERE e.id = $1))
ON CONFLICT (endpoint_id) DO NOTHING;

-- name: CircuitForUpdate :one
-- The circuit's row, locked for a transition, with the database's clock.
SELECT state, consecutive_failures, failing_since, opened_at, next_probe_at, probe_backoff_ms,
       probe_owner, probe_lease_until, auto_replay_pending_since, closed_at, rate_counted_at,
       probe_successes, outage_failing_since, outage_backoff_ms, event_state, event_at, events_coalesced, outage_opened_at, now()::timestamptz AS now
FROM endpoint_circuits WHERE endpoint_id = $1 FOR UPDATE;

-- name: CircuitSet :exec
-- auto_replay_requested_at is stamped when an open (or half-open) circuit
-- closes with an auto-replay pending, and wake_requested_at at every close
-- of one, and at every answer of a half-open one that does not yet close
-- it (probe_successes up: its next probe is due at once, and a lane parked
-- on the circuit sends it when woken, not when its timer ends); state and
-- probe_successes on the right are the row's before this update. closed_at
-- is the close's, from the transition.
UPDATE endpoint_circuits SET state = $2, consecutive_failures = $3, failing_since = $4, opened_at = $5,
    next_probe_at = $6, probe_backoff_ms = $7, probe_owner = $8, probe_lease_until = $9,
    auto_replay_pending_since = $10, closed_at = $11, rate_counted_at = $12,
    probe_successes = $13, outage_failing_since = $14, outage_backoff_ms = $15,
    event_state = $16, event_at = $17, events_coalesced = $18, outage_opened_at = $19, updated_at = now(),
    auto_replay_requested_at = CASE WHEN state <> 'closed' AND $2 = 'closed' AND $10::timestamptz IS NOT NULL
        THEN clock_timestamp() ELSE auto_replay_requested_at END,
    wake_requested_at = CASE WHEN state <> 'closed' AND $2 = 'closed' THEN clock_timestamp()
        WHEN $2 = 'half_open' AND $13 > probe_successes THEN clock_timestamp() ELSE wake_requested_at END
WHERE endpoint_id = $1;

-- name: CircuitLateOutageDeadLetter :exec
-- A dead letter that an outage caused, of delivery (tenant $2, event $3,
-- endpoint $1) and written in this transaction, is written while the
-- circuit is closed. When the delivery was in flight at the circuit's last
-- close (its window handed out, by its release or the claim of its last
-- replay, at or before closed_at: the outage held or failed it in the
-- window that ends now) and the endpoint has auto_replay, the auto-replay
-- is scheduled again from this dead letter on, or kept from the earlier
-- time it already has. Every time compared is the database's: the
-- workflow's window start is on Temporal's clock, and moved on by the
-- lane's throttled waits. A delivery handed out after the close failed
-- with the circuit closed: the next close (or enabling) takes it, from the
-- replay point (store.Circuit.replayFrom).
UPDATE endpoint_circuits c
SET auto_replay_pending_since = LEAST(c.auto_replay_pending_since, dl.dead_lettered_at),
    auto_replay_requested_at = clock_timestamp(), updated_at = now()
FROM endpoints e, deliveries d, dead_letters dl
WHERE c.endpoint_id = $1 AND e.id = c.endpoint_id AND e.auto_replay AND NOT e.disabled AND c.state = 'closed'
  AND d.tenant_id = $2 AND d.event_id = $3 AND d.endpoint_id = c.endpoint_id
  AND dl.tenant_id = d.tenant_id AND dl.event_id = d.event_id AND dl.endpoint_id = d.endpoint_id
  AND GREATEST(d.released_at, dl.replayed_at) <= c.closed_at;

-- name: CircuitWindowAttempts :one
-- The failure rate's count (migration 015): the endpoint $1's attempts
-- started after $2, and the retryable failures among them as the breaker
-- counts them: an outcome of retry (5xx, 408, 429, a timeout, a connection
-- error) but for a 202, the receiver parking the event, which is an
-- answer. Attempts recorded as 'disabled' made no request. One range of
-- delivery_attempts_endpoint_started_idx; the status code is read from the
-- rows, which for attempts this recent (pages not vacuumed yet) even an
-- index-only scan would visit.
SELECT count(*)::int AS attempts, (count(*) FILTER (WHERE outcome = 'retry' AND status_code IS DISTINCT FROM 202))::int AS failures
FROM delivery_attempts
WHERE endpoint_id = $1 AND started_at > $2 AND outcome <> 'disabled';

-- name: CircuitGet :one
SELECT state, consecutive_failures, failing_since, opened_at, next_probe_at, probe_backoff_ms,
       probe_owner, probe_lease_until, auto_replay_pending_since, closed_at, rate_counted_at,
       probe_successes, outage_failing_since, outage_backoff_ms, event_state, event_at, events_coalesced, outage_opened_at, now()::timestamptz AS now
FROM endpoint_circuits WHERE endpoint_id = $1;

-- name: CircuitReset :exec
-- An operator enabled the endpoint again: its circuit starts closed with no
-- failure counted (its old failing_since would disable it at the next
-- failure), and its failure rate counts from now; nor is an opening soon
-- after it the outage before going on (outage_failing_since). A pending
-- auto-replay is kept; with replay_since (a closed circuit of an endpoint
-- with auto_replay: its last close) it is scheduled from there, or kept
-- from the earlier time it already has, and asked for anew.
UPDATE endpoint_circuits SET state = 'closed', consecutive_failures = 0, failing_since = NULL, opened_at = NULL,
    next_probe_at = NULL, probe_backoff_ms = 5000, probe_owner = NULL, probe_lease_until = NULL, closed_at = now(),
    probe_successes = 0, outage_failing_since = NULL, outage_backoff_ms = NULL, outage_opened_at = NULL, updated_at = now(),
    auto_replay_pending_since = LEAST(auto_replay_pending_since, sqlc.narg(replay_since)::timestamptz),
    auto_replay_requested_at = CASE WHEN sqlc.narg(replay_since)::timestamptz IS NULL THEN auto_replay_requested_at
        ELSE clock_timestamp() END
WHERE endpoint_id = sqlc.arg(endpoint_id);

-- name: CircuitsAutoReplayPending :many
-- Circuits closed with an auto-replay not yet done (endpoint_circuits_auto_replay_idx),
-- those a pass served part way (auto_replay_turn_at) behind the others, in
-- the order they were served: the endpoints take turns. So do tenants:
-- each tenant's circuits are ranked in that order, and the batch takes
-- every tenant's first before anyone's second, so a tenant with more
-- endpoints to replay than a batch delays only itself. Each turn reads one
-- tenant's range of endpoint_circuits_auto_replay_idx, in that order, at
-- most $1 rows of it. One that opened
-- again before its passes were done waits, its auto-replay kept, for its
-- next close (which stamps auto_replay_requested_at again): a replay into
-- the open circuit would only be dead-lettered again, and picked again.
SELECT p.endpoint_id, p.auto_replay_pending_since, p.auto_replay_requested_at, p.tenant_id
FROM (
    SELECT q.*, row_number() OVER (PARTITION BY q.tenant_id
               ORDER BY q.auto_replay_turn_at NULLS FIRST, q.auto_replay_pending_since, q.endpoint_id) AS turn
    FROM tenants t CROSS JOIN LATERAL (
        SELECT c.tenant_id, c.endpoint_id, c.auto_replay_pending_since, c.auto_replay_requested_at, c.auto_replay_turn_at
        FROM endpoint_circuits c
        WHERE c.tenant_id = t.id AND c.auto_replay_pending_since IS NOT NULL AND c.state = 'closed'
        ORDER BY c.auto_replay_turn_at NULLS FIRST, c.auto_replay_pending_since, c.endpoint_id
        LIMIT $1
    ) q
) p
ORDER BY p.turn, p.auto_replay_turn_at NULLS FIRST, p.auto_replay_pending_since, p.endpoint_id
LIMIT $1;

-- name: CircuitAutoReplayTurn :exec
-- A pass replayed its share of endpoint $1's dead letters and left the
-- rest: the endpoint goes behind the others.
UPDATE endpoint_circuits SET auto_replay_turn_at = clock_timestamp(), updated_at = now()
WHERE endpoint_id = $1 AND auto_replay_pending_since IS NOT NULL;

-- name: CircuitAutoReplayDone :exec
-- Clears the pending auto-replay of endpoint $1 that a pass read stamped
-- $2, unless a close or a late dead letter asked for it again meanwhile.
UPDATE endpoint_circuits SET auto_replay_pending_since = NULL, auto_replay_turn_at = NULL, updated_at = now()
WHERE endpoint_id = $1 AND auto_replay_requested_at IS NOT DISTINCT FROM $2;

-- name: CircuitsProbeReplayClaim :many
-- Open circuits of enabled endpoints with auto_replay whose probe is due,
-- with no probe holding the lease and no probe replay within $2 seconds:
-- up to $1 of them are stamped (probe_replayed_at) and returned with the
-- outage's first failure. The sweep replays one of the outage's dead
-- letters of each, whose attempt probes. Tenants are served in turn: each
-- tenant's circuits are ranked by when their probe became due, and the
-- batch takes every tenant's first before anyone's second, so a tenant
-- with more open circuits than a batch delays only its own probes. Each
-- turn reads one tenant's range of endpoint_circuits_probe_due_idx, up to
-- $1 circuits that qualify.
WITH due AS (
    -- Each tenant's turn locks what it reads, skipping circuits another
    -- sweep or a probe holds, so an overlapping claim takes the next ones;
    -- ranked outside, as a window function's query cannot lock.
    SELECT q.endpoint_id, q.next_probe_at,
           row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.next_probe_at, q.endpoint_id) AS turn
    FROM tenants t CROSS JOIN LATERAL (
        SELECT c2.tenant_id, c2.endpoint_id, c2.next_probe_at FROM endpoint_circuits c2
        JOIN endpoints e ON e.id = c2.endpoint_id
        WHERE c2.tenant_id = t.id AND e.auto_replay AND NOT e.disabled AND c2.state IN ('open', 'half_open') AND c2.next_probe_at <= now()
          AND (c2.probe_lease_until IS NULL OR c2.probe_lease_until <= now())
          AND (c2.probe_replayed_at IS NULL OR c2.probe_replayed_at < now() - make_interval(secs => $2))
        ORDER BY c2.next_probe_at, c2.endpoint_id
        LIMIT $1
        FOR UPDATE OF c2 SKIP LOCKED
    ) q
)
UPDATE endpoint_circuits c SET probe_replayed_at = now(), updated_at = now()
FROM (SELECT endpoint_id FROM due ORDER BY turn, next_probe_at, endpoint_id LIMIT $1) picked
WHERE c.endpoint_id = picked.endpoint_id
RETURNING c.endpoint_id, COALESCE(c.failing_since, c.opened_at, now()), c.auto_replay_requested_at, c.tenant_id;

-- name: CircuitsWakePending :many
-- Circuits that closed or had an answer while half-open (CircuitSet), or
-- whose endpoint's rate_limit changed
-- (EndpointRateSlotsReset), with their lanes not yet signalled
-- (endpoint_circuits_wake_idx), oldest first, those a pass woke part way
-- (wake_turn_at) behind the others: the endpoints take turns. So do
-- tenants, as in CircuitsAutoReplayPending: every tenant's first before
-- anyone's second, a turn reading one tenant's range of
-- endpoint_circuits_wake_idx. With each, the last event a pass signalled for this
-- stamp ('' for none yet).
SELECT w.endpoint_id, w.wake_requested_at, w.after, w.tenant_id
FROM (
    SELECT q.*, row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.wake_turn_at NULLS FIRST, q.wake_requested_at, q.endpoint_id) AS turn
    FROM tenants t CROSS JOIN LATERAL (
        SELECT c.tenant_id, c.endpoint_id, c.wake_requested_at, c.wake_turn_at,
               CASE WHEN c.wake_after_stamp = c.wake_requested_at THEN COALESCE(c.wake_after, '') ELSE '' END::text AS after
        FROM endpoint_circuits c
        WHERE c.tenant_id = t.id AND c.wake_requested_at IS NOT NULL
        ORDER BY c.wake_turn_at NULLS FIRST, c.wake_requested_at, c.endpoint_id
        LIMIT $1
    ) q
) w
ORDER BY w.turn, w.wake_turn_at NULLS FIRST, w.wake_requested_at, w.endpoint_id
LIMIT $1;

-- name: CircuitWakeProgress :exec
-- A pass signalled endpoint $1's lanes for stamp $2 up to event $3 and left
-- the rest: the next goes on from there, once the other endpoints had a
-- turn. A close meanwhile (a new stamp) makes the cursor stale.
UPDATE endpoint_circuits SET wake_after = $3, wake_after_stamp = $2, wake_turn_at = clock_timestamp(), updated_at = now()
WHERE endpoint_id = $1 AND wake_requested_at = $2;

-- name: CircuitWakeDone :exec
-- Clears the wake of endpoint $1 that a pass read stamped $2, unless the
-- circuit closed again meanwhile.
UPDATE endpoint_circuits SET wake_requested_at = NULL, wake_after = NULL, wake_after_stamp = NULL, wake_turn_at = NULL,
    updated_at = now()
WHERE endpoint_id = $1 AND wake_requested_at = $2;

-- name: DeliveringAt :many
-- Up to $3 events delivering to endpoint $1 (released, not finished: each
-- the head of its lane), after event $2, by event ID
-- (deliveries_delivering_idx).
SELECT event_id FROM deliveries
WHERE endpoint_id = $1 AND state = 'delivering' AND event_id > $2
ORDER BY event_id
LIMIT $3;

-- name: CircuitsEventCatchUp :many
-- Circuits whose transitions published nothing within
-- store.CircuitEventEvery of the last event (events_coalesced), that
-- interval ($1 seconds) now over: the sweep tells their subscribers the
-- state in force if it is not the one last told
-- (endpoint_circuits_event_catch_up_idx).
-- Tenants in turn, as in CircuitsAutoReplayPending: every tenant's
-- longest-waiting first, so one tenant's flapping endpoints do not hold
-- back another's news.
SELECT u.endpoint_id, u.tenant_id
FROM (
    SELECT q.*, row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.event_at, q.endpoint_id) AS turn
    FROM tenants t CROSS JOIN LATERAL (
        SELECT c.tenant_id, c.endpoint_id, c.event_at FROM endpoint_circuits c
        WHERE c.tenant_id = t.id AND c.events_coalesced > 0 AND c.event_at <= now() - make_interval(secs => $1)
        ORDER BY c.event_at, c.endpoint_id
        LIMIT $2
    ) q
) u
ORDER BY u.turn, u.event_at, u.endpoint_id
LIMIT $2;
