-- Waking the lanes an open circuit holds when it closes.
-- A lane whose attempt found its endpoint's circuit open waits on one timer,
-- until the next probe time it was told (up to the backoff's 5 minutes) or
-- until the probe lease of another attempt ends. When the circuit closes
-- sooner (that probe answered, or an operator enabled the endpoint), those
-- lanes may send at once: the API's sweep signals each of them.
--
-- wake_requested_at is stamped by every close of an open circuit, in the
-- transaction of the close (CircuitSet), so a crash between the close and
-- the signals loses none: the sweep signals the lanes delivering to the
-- endpoint, then clears the stamp only if it is still the one it read, so a
-- close during its pass gets a pass of its own.
ALTER TABLE endpoint_circuits ADD COLUMN wake_requested_at timestamptz;

CREATE INDEX endpoint_circuits_wake_idx ON endpoint_circuits (wake_requested_at)
    WHERE wake_requested_at IS NOT NULL;

-- The deliveries in flight at one endpoint (released, not finished: each the
-- head of its lane), which the wake signals. Only as large as the lanes in
-- flight. Built in the migration's transaction, as 011's index is: writes of
-- deliveries wait while it is built, which takes moments on a table whose
-- delivered rows are pruned; an operator can build it beforehand with
-- CREATE INDEX CONCURRENTLY under this name, and IF NOT EXISTS then keeps
-- this migration from failing on it.
CREATE INDEX IF NOT EXISTS deliveries_delivering_idx ON deliveries (endpoint_id, event_id) WHERE state = 'delivering';
