-- name: CorrelationLockOrMake :exec
-- Takes correlation $1's row lock (CorrelationLock), making its row (high_water 0) if it has
-- none, before an acceptance stores its event. A void takes this lock
-- first and then stores its tombstones under the events' unique keys;
-- an acceptance that stored its event first and only then waited for the
-- lock (EventInsertRouted's high-water upsert) closed a cycle with it,
-- which Postgres broke by aborting one of the two. Taking the lock first
-- here gives both the same order.
INSERT INTO correlations AS c (tenant_id, correlation_id) VALUES (sqlc.arg(tenant_id), $1)
ON CONFLICT (tenant_id, correlation_id) DO UPDATE SET updated_at = c.updated_at;

-- name: EventInsertRouted :one
-- Stores the event and its deliveries (one per endpoint of $7, which may be
-- empty) in one statement, so no reader ever sees an event without its
-- routing. DO NOTHING covers both unique keys: the caller tells a repeated
-- id from a sequence taken by another id by reading the row back. A sequence
-- behind its correlation's cursor is refused as well, though its event's row
-- may be gone (HOOKFLOW_KEY_RETENTION): the cursor outlives the keys. A
-- stored event raises its correlation's high-water mark (creating the row of
-- a new correlation), which puts the correlation in the heads sweep's index.
WITH ins AS (
    INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, metadata, filtered_out)
    SELECT sqlc.arg(tenant_id), $1, $2, $3, $4, $5, $6, sqlc.narg(metadata)::json, sqlc.narg(filtered_out)::text[]
    WHERE NOT EXISTS (SELECT 1 FROM correlations WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $2 AND next_sequence > $3)
    ON CONFLICT DO NOTHING
    RETURNING tenant_id, id, correlation_id, sequence, type, data, payload_hash, state, accepted_at, released_at, delivered_at, updated_at, run_id, restarts, restarted_at, restart_reason
), routed AS (
    -- Each delivery keeps its endpoint's window and timeout as they are at
    -- routing (NULL: the server's), as the routing itself is kept.
    INSERT INTO deliveries (tenant_id, event_id, endpoint_id, correlation_id, sequence, type, recovery_window_ms, timeout_ms, accepted_at)
    SELECT ins.tenant_id, ins.id, r.endpoint_id, ins.correlation_id, ins.sequence, ins.type, ep.recovery_window_ms, ep.timeout_ms, ins.accepted_at
    FROM ins CROSS JOIN (SELECT DISTINCT unnest(sqlc.arg(endpoints)::text[]) AS endpoint_id) r
    LEFT JOIN endpoints ep ON ep.tenant_id = ins.tenant_id AND ep.id = r.endpoint_id
    RETURNING endpoint_id, state, updated_at, recovery_window_ms, timeout_ms
), high AS (
    INSERT INTO correlations AS c (tenant_id, correlation_id, high_water)
    SELECT tenant_id, correlation_id, sequence FROM ins
    ON CONFLICT (tenant_id, correlation_id) DO UPDATE SET high_water = GREATEST(c.high_water, EXCLUDED.high_water)
)
SELECT ins.id, ins.correlation_id, ins.sequence, ins.type, ins.data, ins.payload_hash, ins.state, ins.accepted_at, ins.released_at, ins.delivered_at, ins.updated_at, ins.run_id, ins.restarts, ins.restarted_at, ins.restart_reason,
       COALESCE((SELECT json_agg(json_build_object('endpoint_id', endpoint_id, 'state', state, 'updated_at', updated_at,
                                                   'recovery_window_ms', recovery_window_ms, 'timeout_ms', timeout_ms) ORDER BY endpoint_id)
                 FROM routed), '[]')::json AS deliveries,
       ins.tenant_id
FROM ins;

-- name: EventGet :one
-- The event with its deliveries, and what its routing was decided on
-- beside them: the producer's metadata, and the endpoints whose filter
-- left it out.
SELECT sqlc.embed(events_routed), e.metadata, e.filtered_out
FROM events_routed JOIN events e ON e.tenant_id = events_routed.tenant_id AND e.id = events_routed.id
WHERE events_routed.tenant_id = sqlc.arg(tenant_id) AND events_routed.id = $1;

-- name: EventMarkStarted :one
-- A queued event with deliveries moves to waiting; a later state is never
-- rolled back, and one a delivery moved already is left alone. $2 is the
-- run started, empty when the workflow existed already. Answers the event's
-- correlation, its state before and whether it has deliveries: a queued one
-- without any is finished once started, which is a finish
-- (EventMarkStartedUnrouted, under the correlation's lock).
WITH e AS (
    SELECT id, correlation_id, state, EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $1) AS routed
    FROM events WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1
), started AS (
    UPDATE events SET state = 'waiting', run_id = COALESCE(NULLIF($2::text, ''), run_id), updated_at = now()
    FROM e
    WHERE events.tenant_id = sqlc.arg(tenant_id) AND events.id = e.id AND e.routed AND events.state = 'queued'
)
SELECT correlation_id, state, routed FROM e;

-- name: EventMarkStartedUnrouted :exec
-- An event routed to no endpoint is delivered as soon as its workflow
-- exists: there is nothing to send, and the correlation's cursor must not
-- wait on it.
UPDATE events SET state = 'delivered', delivered_at = now(), run_id = COALESCE(NULLIF($2, ''), run_id), updated_at = now()
WHERE events.tenant_id = sqlc.arg(tenant_id) AND events.id = $1 AND events.state = 'queued'
  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $1);

-- name: EventsQueuedClaim :many
-- Takes up to $1 events queued for more than $2 seconds that no sweep took
-- within as long, and stamps them, in one statement: the sweep then starts
-- their workflows with no transaction open, and another API process's sweep
-- leaves them alone for $2 seconds. Tenants are served in turn: each
-- tenant's events are ranked in the order they became due (accepted, or
-- last taken in hand, so one the sweep could not start goes to the back of
-- its tenant's line), and the batch takes every tenant's first before
-- anyone's second; a tenant's backlog delays only itself. Each turn reads
-- one tenant's range of events_queued_idx, at most $1 rows of it.
-- Each comes with its deliveries (events_routed) and its tenant: the sweep
-- takes every tenant's.
WITH due AS (
    -- Each tenant's turn locks what it reads, skipping rows another sweep
    -- holds, so an overlapping claim takes the next rows rather than
    -- ranking the same ones and finding them locked; the ranking is done
    -- outside, as a window function's query cannot lock. Rows a turn
    -- locked but the batch leaves out stay unstamped, for the next pass.
    SELECT q.tenant_id, q.id, q.due, row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.due, q.id) AS turn
    FROM tenants t CROSS JOIN LATERAL (
        SELECT e.tenant_id, e.id, GREATEST(e.accepted_at, e.swept_at) AS due FROM events e
        WHERE e.tenant_id = t.id AND e.state = 'queued' AND GREATEST(e.accepted_at, e.swept_at) < now() - make_interval(secs => $2)
        ORDER BY GREATEST(e.accepted_at, e.swept_at)
        LIMIT $1
        FOR UPDATE OF e SKIP LOCKED
    ) q
), claimed AS (
    UPDATE events e SET swept_at = now()
    FROM (SELECT tenant_id, id FROM due ORDER BY turn, due LIMIT $1) q
    WHERE e.tenant_id = q.tenant_id AND e.id = q.id
    RETURNING e.tenant_id, e.id
)
SELECT v.id, v.correlation_id, v.sequence, v.type, v.data, v.payload_hash, v.state, v.accepted_at, v.released_at, v.delivered_at, v.updated_at, v.run_id, v.restarts, v.restarted_at, v.restart_reason, v.deliveries, v.tenant_id
FROM claimed JOIN events_routed v ON v.tenant_id = claimed.tenant_id AND v.id = claimed.id;

-- name: EventSweepDeferred :exec
-- The queued sweep could not start the event: it goes to the back of the
-- line (EventsQueuedClaim's order), its lease counted from now.
UPDATE events SET swept_at = now() WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1 AND state = 'queued';

-- name: LanesStuckHeadsClaim :many
-- The heads of the lanes (the lowest sequence not finished in each
-- (correlation, endpoint)) of correlations whose cursor has not moved, and
-- that no sweep took in hand, for $1 seconds, whose delivery has not changed
-- for as long either; up to $2 correlations are taken, tenants in turn
-- (every tenant's first due correlation before anyone's second, each
-- tenant's in the order they became due: EventsQueuedClaim), and stamped
-- (swept_at) in one statement, so the sweep then
-- calls Temporal with no transaction open and another API process's sweep
-- leaves them alone for $1 seconds. A head that does not move may be fine (a
-- dead letter waits for its operator; a retry waits for its timer), or its
-- workflow may have been terminated, or its sequencer reset: the sweep finds
-- out which. Queued heads are the other sweep's, and a head behind a
-- sequence that has not arrived is rightly held: a correlation whose heads
-- are all such, or changed within $1 seconds, is stamped all the same and
-- looked at again a lease later.
-- correlations_due_idx holds only correlations with an event not finished,
-- by tenant in due order, so a tenant's turn reads at most $2 of them;
-- each lane's head is one probe of deliveries_pending_idx: the recursive walk skips
-- from one endpoint to the next rather than reading a lane's backlog. The
-- planner guesses ten rounds of it for every correlation, which costs the
-- query past jit_above_cost: LanesStuckHeadsClaim runs it with JIT off, or
-- every call would spend ~80 ms compiling a plan that runs in under one.
WITH RECURSIVE ranked AS (
    -- Each tenant's turn locks what it reads, skipping correlations
    -- another sweep holds, so an overlapping claim takes the next ones;
    -- ranked outside, as a window function's query cannot lock.
    SELECT r.tenant_id, r.correlation_id, r.due, row_number() OVER (PARTITION BY r.tenant_id ORDER BY r.due, r.correlation_id) AS turn
    FROM tenants t CROSS JOIN LATERAL (
        SELECT c.tenant_id, c.correlation_id, GREATEST(c.updated_at, c.swept_at) AS due FROM correlations c
        WHERE c.tenant_id = t.id AND c.high_water >= c.next_sequence
          AND GREATEST(c.updated_at, c.swept_at) < now() - make_interval(secs => $1)
        ORDER BY GREATEST(c.updated_at, c.swept_at)
        LIMIT $2
        FOR UPDATE OF c SKIP LOCKED
    ) r
), due AS (
    UPDATE correlations c SET swept_at = now()
    FROM (SELECT tenant_id, correlation_id FROM ranked ORDER BY turn, due LIMIT $2) d
    WHERE c.tenant_id = d.tenant_id AND c.correlation_id = d.correlation_id
    RETURNING c.tenant_id, c.correlation_id, c.next_sequence
), heads AS (
    SELECT due.tenant_id, due.correlation_id, due.next_sequence, f.*
    FROM due CROSS JOIN LATERAL (
        SELECT d.endpoint_id, d.sequence, d.event_id, d.state, d.updated_at FROM deliveries d
        WHERE d.tenant_id = due.tenant_id AND d.correlation_id = due.correlation_id AND d.state NOT IN ('delivered', 'skipped')
        ORDER BY d.endpoint_id, d.sequence LIMIT 1
    ) f
    UNION ALL
    SELECT h.tenant_id, h.correlation_id, h.next_sequence, n.*
    FROM heads h CROSS JOIN LATERAL (
        SELECT d.endpoint_id, d.sequence, d.event_id, d.state, d.updated_at FROM deliveries d
        WHERE d.tenant_id = h.tenant_id AND d.correlation_id = h.correlation_id AND d.state NOT IN ('delivered', 'skipped')
          AND d.endpoint_id > h.endpoint_id
        ORDER BY d.endpoint_id, d.sequence LIMIT 1
    ) n
)
SELECT v.id, v.correlation_id, v.sequence, v.type, v.data, v.payload_hash, v.state, v.accepted_at, v.released_at, v.delivered_at, v.updated_at, v.run_id, v.restarts, v.restarted_at, v.restart_reason, v.deliveries, v.tenant_id,
       h.endpoint_id, h.state
FROM heads h JOIN events_routed v ON v.tenant_id = h.tenant_id AND v.id = h.event_id
WHERE v.state <> 'queued'
  AND h.updated_at < now() - make_interval(secs => $1)
  -- Every sequence from the cursor to the head has arrived (the cursor's
  -- own included): a range of the unique index, empty when the head is on
  -- the cursor.
  AND (SELECT count(*) FROM events x
       WHERE x.tenant_id = h.tenant_id AND x.correlation_id = h.correlation_id AND x.sequence >= h.next_sequence AND x.sequence < h.sequence) = h.sequence - h.next_sequence
ORDER BY h.tenant_id, h.correlation_id, h.endpoint_id;

-- name: JITOff :exec
-- For the rest of the transaction: see LanesStuckHeadsClaim.
SET LOCAL jit = off;

-- name: CorrelationSweepDeferred :exec
-- The heads sweep could not look at the correlation's heads: it goes to the
-- back of the line (LanesStuckHeadsClaim's order), its lease counted from
-- now.
UPDATE correlations SET swept_at = now() WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1;

-- name: EventRestarted :exec
-- A sweep, a release or a replay started the event's workflow again (run
-- $3): say when and why.
UPDATE events SET restarts = restarts + 1, restarted_at = now(), restart_reason = $2, run_id = $3 WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1;

-- name: CorrelationLock :exec
-- Taken first by every transaction that finishes a delivery (or an event
-- with none): lanes of one correlation finish concurrently on different
-- workers, and each recomputes the correlation's cursor from the events'
-- states. Under READ COMMITTED each statement after this lock sees the
-- finishes committed before it was granted, so of two finishes of one
-- correlation the second always sees the first.
SELECT next_sequence FROM correlations WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1 FOR UPDATE;

-- name: EventLock :exec
-- Taken by every transaction that changes a delivery, before it does (after
-- CorrelationLock when it takes that): the event's aggregate state is
-- recomputed from all its deliveries, which must include the other lanes'
-- committed changes.
SELECT state FROM events WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1 FOR UPDATE;

-- name: DeliveryStartAttempt :one
-- Marks the delivery delivering (when its endpoint is usable) and reads its
-- endpoint, its state before this attempt and its dead letter's status and
-- generation, in one round trip (the CTEs and the sub-selects see the same
-- snapshot, from before the update). A dead-lettered delivery is sent again
-- only once a replay of its dead letter is claimed: a Reset of its workflow
-- to before the dead letter must not deliver it behind its operator, who
-- may be skipping it.
--
-- The ledger's backstop of the lane's order: a delivery is not marked (and
-- the attempt sends nothing) while an earlier delivery routed to its lane
-- (tenant, correlation, endpoint) is still open, not delivered or skipped.
-- Only a sequencer that lost track of the lane, or a release signalled by
-- hand, asks for one; held names the lane's first open delivery. It is one
-- probe of deliveries_pending_idx (migration 025), the lane's open
-- deliveries in sequence order, whatever the lane's backlog.
WITH dl AS (
    SELECT status, generation FROM dead_letters WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2
), held AS (
    SELECT p.sequence, p.event_id, p.state
    FROM deliveries me
    CROSS JOIN LATERAL (
        SELECT o.sequence, o.event_id, o.state FROM deliveries o
        WHERE o.tenant_id = me.tenant_id AND o.correlation_id = me.correlation_id AND o.endpoint_id = me.endpoint_id
          AND o.state NOT IN ('delivered', 'skipped')
        ORDER BY o.sequence LIMIT 1
    ) p
    WHERE me.tenant_id = sqlc.arg(tenant_id) AND me.event_id = $1 AND me.endpoint_id = $2 AND p.sequence < me.sequence
), marked AS (
    UPDATE deliveries SET state = 'delivering', released_at = COALESCE(released_at, now()), updated_at = now()
    WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2 AND state IN ('waiting', 'delivering', 'dead_lettered')
      AND (state <> 'dead_lettered' OR EXISTS (SELECT 1 FROM dl WHERE status = 'replayed'))
      AND EXISTS (SELECT 1 FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND id = $2 AND NOT disabled)
      AND NOT EXISTS (SELECT 1 FROM held)
), tenant AS (
    SELECT disabled, deliveries_per_second, COALESCE(allow_private_targets, id = 'default') AS allow_private_targets
    FROM tenants WHERE id = sqlc.arg(tenant_id)
)
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at,
       headers, recovery_window_ms, timeout_ms, rate_limit, circuit_failure_threshold, auto_replay, disable_after_ms,
       circuit_failure_rate, circuit_window_ms, circuit_min_attempts, max_in_flight, url_path_public,
       -- The endpoint's type (migration 032): the transport the attempt
       -- goes through; and a broker destination's config and credentials
       -- (migration 034), which only the attempt reads.
       type, config, credentials,
       COALESCE((SELECT d.state FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $1 AND d.endpoint_id = $2), ''),
       COALESCE((SELECT status FROM dl), ''), COALESCE((SELECT generation FROM dl), 0),
       -- The endpoint's circuit (migration 013), read in the same round
       -- trip: a closed circuit with no failure counted (or no row) is the
       -- happy path, and the attempt writes nothing more for it.
       COALESCE((SELECT state FROM endpoint_circuits WHERE endpoint_id = $2), 'closed'),
       COALESCE((SELECT consecutive_failures FROM endpoint_circuits WHERE endpoint_id = $2), 0),
       -- Who deleted the endpoint (migration 017), NULL while it is not:
       -- the attempt then ends the delivery skipped, sending nothing.
       deleted_by,
       -- The event's payload: the workflow does not carry it in every
       -- activity input (each would copy up to 1 MiB into the history).
       -- The cleaner prunes it only once every delivery is finished.
       (SELECT data FROM events WHERE tenant_id = sqlc.arg(tenant_id) AND id = $1),
       -- The tenant's (migrations 025, 026): a disabled tenant's heads
       -- wait, its deliveries_per_second paces them, and the allowlist
       -- applies to its targets only when granted.
       (SELECT disabled FROM tenant), (SELECT deliveries_per_second FROM tenant), (SELECT allow_private_targets FROM tenant),
       -- The earlier open delivery of the lane that holds this one back
       -- (0, '' and '' when none does).
       COALESCE((SELECT sequence FROM held), 0)::bigint, COALESCE((SELECT event_id FROM held), ''), COALESCE((SELECT state FROM held), '')
FROM endpoints WHERE tenant_id = sqlc.arg(tenant_id) AND id = $2;

-- name: DeliveryMarkFinal :exec
-- delivered or skipped; $4 = delivered_at (NULL when skipped). A final
-- state is never overwritten: a delivered delivery stays delivered.
UPDATE deliveries SET state = $3, delivered_at = $4, updated_at = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2 AND state NOT IN ('delivered', 'skipped');

-- name: LaneAdvance :exec
-- Moves the lane ($1, $2) to sequence $3 once the delivery ($4, $2) is in
-- state $5 (delivered or skipped): delivered sets the previous sequence and
-- empties the skipped tail (the receiver has moved its cursor past every
-- skip before it); skipped adds $3 to the tail. Only forward: a repeat, or
-- a call for a delivery that is not so, changes nothing.
INSERT INTO lanes AS l (tenant_id, correlation_id, endpoint_id, last_finished, previous, skipped_tail)
SELECT sqlc.arg(tenant_id), $1, $2, $3::bigint,
       CASE WHEN $5::text = 'delivered' THEN $3::bigint ELSE 0 END,
       CASE WHEN $5::text = 'delivered' THEN '{}' ELSE ARRAY[$3::bigint] END
WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $4 AND d.endpoint_id = $2 AND d.state = $5)
ON CONFLICT (tenant_id, correlation_id, endpoint_id) DO UPDATE SET
    last_finished = EXCLUDED.last_finished,
    previous = CASE WHEN $5::text = 'delivered' THEN EXCLUDED.previous ELSE l.previous END,
    skipped_tail = CASE WHEN $5::text = 'delivered' THEN '{}' ELSE l.skipped_tail || $3::bigint END,
    updated_at = now()
WHERE l.last_finished < EXCLUDED.last_finished;

-- name: EventAggregate :exec
-- The event's state from its deliveries': dead_lettered if any is, else
-- delivering if any is, else waiting if any is, else delivered if any is
-- (or there are none), else skipped. A queued event stays queued while
-- every delivery still waits (its workflow is not known to exist); once one
-- moved, its workflow runs. Run under EventLock, after the delivery changed.
UPDATE events e SET state = a.state,
    released_at = COALESCE(e.released_at, a.released_at),
    delivered_at = CASE WHEN a.state = 'delivered' THEN a.delivered_at ELSE e.delivered_at END,
    updated_at = now()
FROM (
    SELECT CASE WHEN bool_or(state = 'dead_lettered') THEN 'dead_lettered'
                WHEN bool_or(state = 'delivering') THEN 'delivering'
                WHEN bool_or(state = 'waiting') THEN 'waiting'
                WHEN bool_or(state = 'delivered') OR count(*) = 0 THEN 'delivered'
                ELSE 'skipped' END AS state,
           bool_and(state = 'waiting') AS untouched,
           min(released_at) AS released_at, max(delivered_at) AS delivered_at
    FROM deliveries WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1
) a
WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.id = $1
  AND NOT (e.state = 'queued' AND a.untouched)
  AND (e.state <> a.state OR e.released_at IS DISTINCT FROM COALESCE(e.released_at, a.released_at));

-- name: CorrelationAdvance :exec
-- Moves the correlation's cursor to the first sequence from it on that is
-- missing or whose event is not finished (every delivery delivered or
-- skipped, or none and started): a walk up the unique (correlation_id,
-- sequence) index that stops at the first such, so it reads the run of
-- finished events at the cursor and not the backlog behind it. Run after
-- CorrelationLock; a repeat finds the cursor where it left it.
WITH RECURSIVE walk(s) AS (
    SELECT next_sequence FROM correlations WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1
    UNION ALL
    SELECT w.s + 1 FROM walk w
    WHERE EXISTS (SELECT 1 FROM events e
                  WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.correlation_id = $1 AND e.sequence = w.s AND e.state IN ('delivered', 'skipped'))
)
UPDATE correlations c SET next_sequence = n.s, updated_at = now()
FROM (SELECT max(s) AS s FROM walk) n
WHERE c.tenant_id = sqlc.arg(tenant_id) AND c.correlation_id = $1 AND n.s > c.next_sequence;

-- name: CorrelationHighWater :one
-- Highest sequence accepted for the correlation, 0 when none.
SELECT COALESCE(max(sequence), 0)::bigint FROM events WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1;

-- name: LaneGet :one
SELECT endpoint_id, last_finished, previous, skipped_tail FROM lanes WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1 AND endpoint_id = $2;

-- name: LaneReleaseGet :one
-- The position a release of sequence $3 in lane ($1, $2) names: the lane's
-- previous sequence and skipped tail (0 and none without a row), and the
-- newest 16 (contract.MaxSkippedListed) voided sequences between them.
SELECT COALESCE(l.previous, 0)::bigint AS previous, COALESCE(l.skipped_tail, '{}')::bigint[] AS skipped_tail,
       ARRAY(SELECT x.sequence FROM (SELECT v.sequence FROM events v
                                     WHERE v.tenant_id = sqlc.arg(tenant_id) AND v.correlation_id = $1 AND v.type = 'hookflow.voided'
                                       AND v.sequence > COALESCE(l.previous, 0) AND v.sequence < sqlc.arg(before)::bigint
                                     ORDER BY v.sequence DESC LIMIT 16) x
             ORDER BY x.sequence)::bigint[] AS voided
FROM (SELECT 1) one
LEFT JOIN lanes l ON l.tenant_id = sqlc.arg(tenant_id) AND l.correlation_id = $1 AND l.endpoint_id = $2;

-- name: CorrelationLoad :one
-- What a sequencer loads (a fresh run, a resync) and GET /v1/correlations
-- reads, in one statement, so one snapshot: the cursor; the runs of
-- sequences that have arrived from it on (events from the cursor on are
-- never pruned, EventsPruneKeys, so a sequence missing here has not
-- arrived), at most 1,001, each [from, to]; the lanes with an open
-- delivery, and, when every_lane, every lane with a row too (a sequencer
-- asks only for the first: the lanes ever routed grow with the
-- correlation's life, and it loads another's position when an event for it
-- arrives), each with its position and its first $2 + 1 open deliveries in
-- order (the caller keeps $2, and knows from the one more that there are
-- more); and the newest 10,000 voided sequences. The
-- runs read the correlation's events from the cursor on once, as an index
-- range; the lanes with open deliveries are found by a skip scan of
-- deliveries_pending_idx, one probe per lane, and each lane's deliveries
-- are a range of it.
WITH RECURSIVE c AS (
    SELECT COALESCE((SELECT next_sequence FROM correlations WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1), 1) AS next
), runs AS (
    SELECT min(t.sequence) AS lo, max(t.sequence) AS hi
    FROM (SELECT e.sequence, e.sequence - row_number() OVER (ORDER BY e.sequence) AS g
          FROM events e WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.correlation_id = $1 AND e.sequence >= (SELECT next FROM c)) t
    GROUP BY t.g ORDER BY lo LIMIT 1001
), open_eps(ep) AS (
    (SELECT d.endpoint_id FROM deliveries d
     WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.correlation_id = $1 AND d.state NOT IN ('delivered', 'skipped') ORDER BY d.endpoint_id LIMIT 1)
    UNION ALL
    SELECT (SELECT d.endpoint_id FROM deliveries d
            WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.correlation_id = $1 AND d.state NOT IN ('delivered', 'skipped') AND d.endpoint_id > o.ep
            ORDER BY d.endpoint_id LIMIT 1)
    FROM open_eps o WHERE o.ep IS NOT NULL
), eps AS (
    SELECT ep FROM open_eps WHERE ep IS NOT NULL
    UNION
    SELECT endpoint_id FROM lanes WHERE tenant_id = sqlc.arg(tenant_id) AND correlation_id = $1 AND sqlc.arg(every_lane)::bool
)
SELECT c.next,
       COALESCE((SELECT json_agg(json_build_array(r.lo, r.hi) ORDER BY r.lo) FROM runs r), '[]'),
       COALESCE((
           SELECT json_agg(json_build_object(
                      'endpoint_id', eps.ep, 'last_finished', COALESCE(l.last_finished, 0),
                      'previous', COALESCE(l.previous, 0), 'skipped', COALESCE(l.skipped_tail, '{}'),
                      'open', COALESCE((
                          SELECT json_agg(json_build_object('sequence', o.sequence, 'event_id', o.event_id, 'state', o.state) ORDER BY o.sequence)
                          FROM (SELECT d.sequence, d.event_id, d.state FROM deliveries d
                                WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.correlation_id = $1 AND d.endpoint_id = eps.ep AND d.state NOT IN ('delivered', 'skipped')
                                ORDER BY d.sequence LIMIT $2::int + 1) o), '[]'))
                  ORDER BY eps.ep)
           FROM eps LEFT JOIN lanes l ON l.tenant_id = sqlc.arg(tenant_id) AND l.correlation_id = $1 AND l.endpoint_id = eps.ep), '[]'),
       -- The voided sequences (their tombstones, migration 018's index):
       -- operators make them, a few at a time.
       ARRAY(SELECT x.sequence FROM (SELECT v.sequence FROM events v
                                     WHERE v.tenant_id = sqlc.arg(tenant_id) AND v.correlation_id = $1 AND v.type = 'hookflow.voided'
                                     ORDER BY v.sequence DESC LIMIT 10000) x
             ORDER BY x.sequence)
FROM c;

-- name: LanesLoad :many
-- The lanes $2 of correlation $1, each with its position, its first
-- $4 + 1 open deliveries after sequence $3 (the same index of both
-- arrays), in order, and the newest 16 (contract.MaxSkippedListed) voided
-- sequences after its previous one: a sequencer's lane that ran out of the
-- events it kept reads its next ones here, a range of
-- deliveries_pending_idx, and so does a lane it dropped when idle, which
-- names those voided sequences in its next release as a lane it kept
-- would.
SELECT q.ep, COALESCE(l.last_finished, 0), COALESCE(l.previous, 0), COALESCE(l.skipped_tail, '{}'),
       ARRAY(SELECT x.sequence FROM (SELECT v.sequence FROM events v
                                     WHERE v.tenant_id = sqlc.arg(tenant_id) AND v.correlation_id = $1 AND v.type = 'hookflow.voided'
                                       AND v.sequence > COALESCE(l.previous, 0)
                                     ORDER BY v.sequence DESC LIMIT 16) x
             ORDER BY x.sequence)::bigint[],
       COALESCE((
           SELECT json_agg(json_build_object('sequence', o.sequence, 'event_id', o.event_id, 'state', o.state) ORDER BY o.sequence)
           FROM (SELECT d.sequence, d.event_id, d.state FROM deliveries d
                 WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.correlation_id = $1 AND d.endpoint_id = q.ep AND d.state NOT IN ('delivered', 'skipped')
                   AND d.sequence > q.after
                 ORDER BY d.sequence LIMIT $4::int + 1) o), '[]')
FROM (SELECT unnest($2::text[]) AS ep, unnest($3::bigint[]) AS after) q
LEFT JOIN lanes l ON l.tenant_id = sqlc.arg(tenant_id) AND l.correlation_id = $1 AND l.endpoint_id = q.ep
ORDER BY q.ep;

-- name: AttemptInsert :exec
INSERT INTO delivery_attempts (tenant_id, event_id, endpoint_id, attempt, started_at, latency_ms, status_code, error, outcome)
VALUES (sqlc.arg(tenant_id), $1, $2, $3, $4, $5, $6, $7, $8);

-- name: AttemptsList :many
SELECT attempt, started_at, latency_ms, status_code, error, outcome
FROM delivery_attempts WHERE tenant_id = sqlc.arg(tenant_id) AND event_id = $1 AND endpoint_id = $2 ORDER BY id;

-- name: AttemptsLastByEvent :many
-- The last $2 attempts of each of event $1's deliveries, oldest first; a
-- delivery with none has one row whose attempt columns are NULL. They come
-- from delivery_attempts_delivery_idx (event_id, endpoint_id, id) read
-- backwards, so the rows read follow $2 per delivery, not its history.
-- (events_routed counts each delivery's attempts.)
SELECT d.endpoint_id, a.id, a.attempt, a.started_at, a.latency_ms, a.status_code, a.error, a.outcome
FROM deliveries d
LEFT JOIN LATERAL (
    SELECT x.id, x.attempt, x.started_at, x.latency_ms, x.status_code, x.error, x.outcome
    FROM delivery_attempts x
    WHERE x.tenant_id = d.tenant_id AND x.event_id = d.event_id AND x.endpoint_id = d.endpoint_id
    ORDER BY x.id DESC
    LIMIT $2
) a ON true
WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $1
ORDER BY d.endpoint_id, a.id;

-- name: AttemptsPage :many
-- Up to $4 attempts of the delivery (event $1, endpoint $2) after the one
-- with row ID $3 (0 for the first), oldest first. No row: the delivery does
-- not exist; one whose attempt columns are NULL: it has none past $3.
SELECT a.id, a.attempt, a.started_at, a.latency_ms, a.status_code, a.error, a.outcome
FROM deliveries d
LEFT JOIN LATERAL (
    SELECT x.id, x.attempt, x.started_at, x.latency_ms, x.status_code, x.error, x.outcome
    FROM delivery_attempts x
    WHERE x.tenant_id = d.tenant_id AND x.event_id = d.event_id AND x.endpoint_id = d.endpoint_id AND x.id > $3
    ORDER BY x.id
    LIMIT $4
) a ON true
WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.event_id = $1 AND d.endpoint_id = $2
ORDER BY a.id;

-- name: CorrelationVoidCheck :one
-- Of sequences $2 of correlation $1, those that have arrived (stored as an
-- event that is not a tombstone, or behind the cursor with no row: theirs
-- was pruned) and those voided already, after locking the correlation's row,
-- made if it has none: a void and an event's acceptance of one sequence
-- wait for each other here, and the unique (correlation_id, sequence)
-- decides between them.
WITH c AS (
    INSERT INTO correlations AS c (tenant_id, correlation_id) VALUES (sqlc.arg(tenant_id), $1)
    ON CONFLICT (tenant_id, correlation_id) DO UPDATE SET updated_at = c.updated_at
    RETURNING next_sequence
), asked AS (
    SELECT DISTINCT unnest($2::bigint[]) AS sequence
)
SELECT
    ARRAY(SELECT a.sequence FROM asked a
          WHERE EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.correlation_id = $1 AND e.sequence = a.sequence AND e.type <> 'hookflow.voided')
             OR (a.sequence < (SELECT next_sequence FROM c)
                 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.correlation_id = $1 AND e.sequence = a.sequence))
          ORDER BY a.sequence),
    ARRAY(SELECT a.sequence FROM asked a
          WHERE EXISTS (SELECT 1 FROM events e WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.correlation_id = $1 AND e.sequence = a.sequence AND e.type = 'hookflow.voided')
          ORDER BY a.sequence);

-- name: CorrelationVoidInsert :one
-- Stores the tombstones of sequences $2 of correlation $1 (ids $3, in the
-- same order), skipped from the start and routed to nobody, their data
-- $4 (who, when, why), and raises the correlation's high-water mark. Run
-- after CorrelationVoidCheck in its transaction; the caller then moves the
-- cursor (CorrelationAdvance). Answers how many it stored: the caller
-- answers those sequences as voided, so one the unique keys dropped must
-- fail the void rather than go unnoticed.
WITH ins AS (
    INSERT INTO events (tenant_id, id, correlation_id, sequence, type, data, payload_hash, state)
    SELECT sqlc.arg(tenant_id), v.id, $1, v.sequence, 'hookflow.voided', $4::jsonb, sha256(convert_to($4::text, 'UTF8')), 'skipped'
    FROM (SELECT unnest($2::bigint[]) AS sequence, unnest($3::text[]) AS id) v
    ON CONFLICT DO NOTHING
    RETURNING sequence
), high AS (
    UPDATE correlations c SET high_water = GREATEST(c.high_water, (SELECT max(sequence) FROM ins)), updated_at = now()
    WHERE c.tenant_id = sqlc.arg(tenant_id) AND c.correlation_id = $1 AND EXISTS (SELECT 1 FROM ins)
)
SELECT count(*) FROM ins;

-- name: TestSequenceNext :one
-- The next sequence of an endpoint's test events' correlation $1
-- (store.TestCorrelation): past every sequence it holds (its high-water
-- mark and cursor), 1 the first time. The upsert creates the correlation's
-- row (high_water 0 until the event's insert raises it, in the same
-- transaction) or locks it: a concurrent test of the same endpoint waits
-- for this transaction and then reads the number after this one.
INSERT INTO correlations AS c (tenant_id, correlation_id) VALUES (sqlc.arg(tenant_id), $1)
ON CONFLICT (tenant_id, correlation_id) DO UPDATE SET high_water = c.high_water
RETURNING (GREATEST(c.high_water, c.next_sequence - 1) + 1)::bigint;

-- name: EventList :many
-- A page of the tenant's event log, newest first, keyset-paged on
-- (accepted_at, id) below the cursor's (events_log_idx; events_log_type_idx
-- by type). Empty filters match all; an endpoint's events, and a portal
-- session's, are EventListByEndpoints'. Voided sequences' tombstones are
-- no events. The payload is left out (NULL): a page shows what happened,
-- GET /v1/events/{id} the rest.
SELECT e.id, e.correlation_id, e.sequence, e.type, NULL::jsonb AS data, e.payload_hash, e.state, e.accepted_at, e.released_at,
       e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason, e.deliveries, e.tenant_id
FROM events_routed e
WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.type <> 'hookflow.voided'
  AND (sqlc.narg(correlation_id)::text IS NULL OR e.correlation_id = sqlc.narg(correlation_id))
  AND (sqlc.narg(type)::text IS NULL OR e.type = sqlc.narg(type))
  AND (sqlc.narg(before_time)::timestamptz IS NULL
       OR (e.accepted_at, e.id) < (sqlc.narg(before_time), sqlc.arg(before_id)::text))
ORDER BY e.accepted_at DESC, e.id DESC
LIMIT sqlc.arg(max_rows);

-- name: EventListByEndpoints :many
-- EventList's page of the events routed to one of endpoints (the one an
-- endpoint_id filter names, or a portal session's), read along each
-- endpoint's deliveries in the log's order (deliveries_log_idx: a delivery
-- keeps its event's accepted_at), at most a page of each, merged: its cost
-- is a page per endpoint, however few of the tenant's events go there.
-- only_endpoints (a portal session's) keeps the events routed to one of
-- them and, of hookflow's own (a hookflow: correlation), those about one of
-- them.
SELECT e.id, e.correlation_id, e.sequence, e.type, NULL::jsonb AS data, e.payload_hash, e.state, e.accepted_at, e.released_at,
       e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason, e.deliveries, e.tenant_id
FROM (
    -- An event routed to two of them is one row.
    SELECT DISTINCT p.accepted_at, p.event_id
    FROM unnest(sqlc.arg(endpoints)::text[]) ep CROSS JOIN LATERAL (
        SELECT r.accepted_at, r.event_id FROM deliveries r JOIN events x ON x.tenant_id = r.tenant_id AND x.id = r.event_id
        WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.endpoint_id = ep AND x.type <> 'hookflow.voided'
          AND (sqlc.narg(correlation_id)::text IS NULL OR x.correlation_id = sqlc.narg(correlation_id))
          AND (sqlc.narg(type)::text IS NULL OR x.type = sqlc.narg(type))
          AND (sqlc.narg(only_endpoints)::text[] IS NULL OR EXISTS (
               SELECT 1 FROM deliveries d WHERE d.tenant_id = x.tenant_id AND d.event_id = x.id AND d.endpoint_id = ANY(sqlc.narg(only_endpoints)::text[])))
          AND (sqlc.narg(only_endpoints)::text[] IS NULL OR NOT starts_with(x.correlation_id, 'hookflow:')
               OR x.correlation_id IN (SELECT 'hookflow:' || o FROM unnest(sqlc.narg(only_endpoints)::text[]) o)
               OR x.correlation_id IN (SELECT 'hookflow:test:' || o FROM unnest(sqlc.narg(only_endpoints)::text[]) o))
          AND (sqlc.narg(before_time)::timestamptz IS NULL
               OR (r.accepted_at, r.event_id) < (sqlc.narg(before_time), sqlc.arg(before_id)::text))
        ORDER BY r.accepted_at DESC, r.event_id DESC
        LIMIT sqlc.arg(max_rows)
    ) p
    ORDER BY p.accepted_at DESC, p.event_id DESC
    LIMIT sqlc.arg(max_rows)
) page JOIN events_routed e ON e.tenant_id = sqlc.arg(tenant_id) AND e.id = page.event_id
ORDER BY page.accepted_at DESC, page.event_id DESC;

-- name: EventTypeList :many
-- The types of the tenant's events after after ('' for the first), in
-- name order, each with its latest event (by accepted_at) and that
-- event's payload as a sample when it is at most sample_max bytes of JSON (NULL past it, or once retention pruned
-- it). The types are walked one index probe each (events_log_type_idx: a
-- loose index scan), so the cost is the number of types, not of events.
-- A portal session limited to some endpoints reads EventTypeListByEndpoints.
-- Voided sequences' tombstones are no events.
WITH RECURSIVE types AS (
    (SELECT e.type FROM events e WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.type > sqlc.arg(after)::text AND e.type <> 'hookflow.voided'
     ORDER BY e.type LIMIT 1)
    UNION ALL
    SELECT (SELECT e.type FROM events e WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.type > t.type AND e.type <> 'hookflow.voided'
            ORDER BY e.type LIMIT 1)
    FROM types t WHERE t.type IS NOT NULL
)
SELECT t.type::text AS type, l.id AS last_event_id, l.accepted_at AS last_seen_at,
       (CASE WHEN octet_length(l.data::text) <= sqlc.arg(sample_max)::int THEN l.data END)::jsonb AS sample,
       COALESCE(octet_length(l.data::text), 0)::int AS sample_bytes
FROM types t CROSS JOIN LATERAL (
    SELECT e.id, e.accepted_at, e.data FROM events e
    WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.type = t.type
    ORDER BY e.accepted_at DESC, e.id DESC
    LIMIT 1
) l
WHERE t.type IS NOT NULL
ORDER BY t.type
LIMIT sqlc.arg(max_rows);

-- name: EventTypeListByEndpoints :many
-- EventTypeList for a portal session limited to endpoints: the types of
-- the events routed to one of them and, of hookflow's own (a hookflow:
-- correlation), those about one of them (EventListByEndpoints), each with
-- the latest such event. Walked along the deliveries, which keep their
-- event's type: a stream is one endpoint's deliveries of producers' events
-- (deliveries_type_idx) or of one operational correlation about one of the
-- endpoints (deliveries_operational_type_idx); each stream's types are
-- walked one index probe each (a loose index scan) and each type's latest
-- delivery in it is one more, so the cost is the number of types times
-- streams, however many events the tenant holds and however few of them go
-- there. The operational streams are the hookflow: correlations each
-- endpoint was sent, found by a loose index scan too (an endpoint's own
-- test events, and at an operators' endpoint every endpoint's notices:
-- the tenant's endpoints bound them), of which those about one of the
-- session's endpoints are walked.
WITH RECURSIVE about AS (
    SELECT 'hookflow:' || x AS correlation_id FROM unnest(sqlc.arg(endpoints)::text[]) x
    UNION SELECT 'hookflow:test:' || x FROM unnest(sqlc.arg(endpoints)::text[]) x
), received AS (
    SELECT ep, (SELECT d.correlation_id FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = ep
                  AND starts_with(d.correlation_id, 'hookflow:') ORDER BY d.correlation_id LIMIT 1) AS corr
    FROM unnest(sqlc.arg(endpoints)::text[]) ep
    UNION ALL
    SELECT r.ep, (SELECT d.correlation_id FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = r.ep
                    AND starts_with(d.correlation_id, 'hookflow:') AND d.correlation_id > r.corr ORDER BY d.correlation_id LIMIT 1)
    FROM received r WHERE r.corr IS NOT NULL
), streams AS (
    -- corr NULL: the producers' events; otherwise that correlation's.
    SELECT ep, NULL::text AS corr FROM unnest(sqlc.arg(endpoints)::text[]) ep
    UNION ALL SELECT r.ep, r.corr FROM received r WHERE r.corr IN (SELECT a.correlation_id FROM about a)
), types AS (
    SELECT s.ep, s.corr, CASE WHEN s.corr IS NULL THEN
        (SELECT d.type FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = s.ep
           AND NOT starts_with(d.correlation_id, 'hookflow:') AND d.type > sqlc.arg(after)::text AND d.type <> 'hookflow.voided' ORDER BY d.type LIMIT 1)
    ELSE
        (SELECT d.type FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = s.ep
           AND starts_with(d.correlation_id, 'hookflow:') AND d.correlation_id = s.corr AND d.type > sqlc.arg(after)::text AND d.type <> 'hookflow.voided'
         ORDER BY d.type LIMIT 1)
    END AS type
    FROM streams s
    UNION ALL
    SELECT t.ep, t.corr, CASE WHEN t.corr IS NULL THEN
        (SELECT d.type FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = t.ep
           AND NOT starts_with(d.correlation_id, 'hookflow:') AND d.type > t.type AND d.type <> 'hookflow.voided' ORDER BY d.type LIMIT 1)
    ELSE
        (SELECT d.type FROM deliveries d WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = t.ep
           AND starts_with(d.correlation_id, 'hookflow:') AND d.correlation_id = t.corr AND d.type > t.type AND d.type <> 'hookflow.voided'
         ORDER BY d.type LIMIT 1)
    END
    FROM types t WHERE t.type IS NOT NULL
), latest AS (
    -- Each type's latest event over every stream.
    SELECT DISTINCT ON (t.type) t.type, l.event_id
    FROM types t CROSS JOIN LATERAL (
        (SELECT d.accepted_at, d.event_id FROM deliveries d
         WHERE t.corr IS NULL AND d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = t.ep AND d.type = t.type
           AND NOT starts_with(d.correlation_id, 'hookflow:')
         ORDER BY d.accepted_at DESC, d.event_id DESC LIMIT 1)
        UNION ALL
        (SELECT d.accepted_at, d.event_id FROM deliveries d
         WHERE t.corr IS NOT NULL AND d.tenant_id = sqlc.arg(tenant_id) AND d.endpoint_id = t.ep AND d.type = t.type
           AND starts_with(d.correlation_id, 'hookflow:') AND d.correlation_id = t.corr
         ORDER BY d.accepted_at DESC, d.event_id DESC LIMIT 1)
    ) l
    WHERE t.type IS NOT NULL
    ORDER BY t.type, l.accepted_at DESC, l.event_id DESC
)
SELECT l.type::text AS type, e.id AS last_event_id, e.accepted_at AS last_seen_at,
       (CASE WHEN octet_length(e.data::text) <= sqlc.arg(sample_max)::int THEN e.data END)::jsonb AS sample,
       COALESCE(octet_length(e.data::text), 0)::int AS sample_bytes
FROM latest l JOIN events e ON e.tenant_id = sqlc.arg(tenant_id) AND e.id = l.event_id
ORDER BY l.type
LIMIT sqlc.arg(max_rows);
