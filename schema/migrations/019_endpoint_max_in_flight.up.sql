-- A cap on an endpoint's attempts in flight at once, across all workers, so
-- each lane hands over on its own: a receiver that answers slowly (a tarpit)
-- holds a worker's slot for each attempt, and without a cap it could take
-- every slot and starve the other endpoints. NULL is the default (100, store
-- DefaultMaxInFlight); the API bounds it as the constraint does.
ALTER TABLE endpoints
    ADD COLUMN max_in_flight integer
        CONSTRAINT endpoints_max_in_flight_range CHECK (max_in_flight BETWEEN 1 AND 10000);

-- One row per endpoint whose attempts have been capped: the row an
-- attempt locks (EndpointLeaseAcquire) so that the attempts of every
-- worker count the leases one after another. Its own table, as
-- endpoint_rate_slots, keeps this hot row out of the endpoints row that
-- every attempt reads.
CREATE TABLE endpoint_in_flight (
    endpoint_id text PRIMARY KEY REFERENCES endpoints (id)
);

-- The attempts in flight: one lease per attempt, taken before it sends and
-- given back when it has its answer (EndpointLeaseRelease). A lease
-- expires a little after its attempt's HTTP timeout, so that one a crashed
-- worker never gave back frees itself; an expired lease is dropped by the
-- next attempt that counts them. owner is the attempt (event, endpoint,
-- attempt number), so a retried try renews its own lease.
CREATE TABLE endpoint_leases (
    endpoint_id text NOT NULL REFERENCES endpoint_in_flight (endpoint_id) ON DELETE CASCADE,
    owner       text NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (endpoint_id, owner)
);
