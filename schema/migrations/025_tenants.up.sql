-- Tenants: one hookflow serves a SaaS and each of its customers.
-- Every row of the ledger belongs to one tenant, and the IDs a producer
-- chooses (events, correlations) are unique per tenant, so order is per
-- (tenant, correlation) and a lane is (tenant, correlation, endpoint).
-- Endpoint IDs are the server's (ep_ and 24 random characters), unique
-- across tenants; an endpoint carries its tenant, and deliveries name the
-- pair, so the database itself refuses a delivery routed to another
-- tenant's endpoint. The rows that exist go to the reserved tenant
-- `default`. Each tenant_id column has no default once filled: a write that
-- does not bind its tenant fails rather than landing in `default`.
DROP VIEW events_routed;

CREATE TABLE tenants (
    id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_:-]{1,200}$'),
    name        text NOT NULL DEFAULT '',
    metadata    jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    disabled    boolean NOT NULL DEFAULT false,
    -- Limits; NULL is the server's default for each.
    events_per_second      double precision CHECK (events_per_second > 0 AND events_per_second <= 100000),
    max_endpoints          integer CHECK (max_endpoints >= 0 AND max_endpoints <= 100000),
    max_recovery_window_ms bigint CHECK (max_recovery_window_ms >= 1000 AND max_recovery_window_ms <= 259200000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO tenants (id, name) VALUES ('default', 'default');

-- Keys: NULL is an operator key, which names the tenant it acts on (and
-- acts on `default` when it names none); a tenant's key reaches only it.
ALTER TABLE api_keys ADD COLUMN tenant_id text REFERENCES tenants (id);

ALTER TABLE endpoints ADD COLUMN tenant_id text NOT NULL DEFAULT 'default' REFERENCES tenants (id);
ALTER TABLE endpoints ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_tenant_id_key UNIQUE (tenant_id, id);
CREATE INDEX endpoints_tenant_idx ON endpoints (tenant_id, id) WHERE deleted_at IS NULL;

ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_event_id_endpoint_id_fkey;
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_event_id_endpoint_id_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_endpoint_id_fkey;

ALTER TABLE events ADD COLUMN tenant_id text NOT NULL DEFAULT 'default' REFERENCES tenants (id);
ALTER TABLE events ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD PRIMARY KEY (tenant_id, id);
ALTER TABLE events DROP CONSTRAINT events_correlation_id_sequence_key;
ALTER TABLE events ADD CONSTRAINT events_correlation_sequence_key UNIQUE (tenant_id, correlation_id, sequence);
DROP INDEX events_voided_idx;
CREATE INDEX events_voided_idx ON events (tenant_id, correlation_id, sequence) WHERE type = 'hookflow.voided';

ALTER TABLE correlations ADD COLUMN tenant_id text NOT NULL DEFAULT 'default' REFERENCES tenants (id);
ALTER TABLE correlations ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE correlations DROP CONSTRAINT correlations_pkey;
ALTER TABLE correlations ADD PRIMARY KEY (tenant_id, correlation_id);

ALTER TABLE deliveries ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE deliveries ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey;
ALTER TABLE deliveries ADD PRIMARY KEY (tenant_id, event_id, endpoint_id);
ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_fkey FOREIGN KEY (tenant_id, event_id) REFERENCES events (tenant_id, id);
ALTER TABLE deliveries ADD CONSTRAINT deliveries_endpoint_fkey FOREIGN KEY (tenant_id, endpoint_id) REFERENCES endpoints (tenant_id, id);
DROP INDEX deliveries_pending_idx;
CREATE INDEX deliveries_pending_idx ON deliveries (tenant_id, correlation_id, endpoint_id, sequence) WHERE state NOT IN ('delivered', 'skipped');

ALTER TABLE lanes ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE lanes ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE lanes DROP CONSTRAINT lanes_pkey;
ALTER TABLE lanes ADD PRIMARY KEY (tenant_id, correlation_id, endpoint_id);
ALTER TABLE lanes ADD CONSTRAINT lanes_correlation_fkey FOREIGN KEY (tenant_id, correlation_id) REFERENCES correlations (tenant_id, correlation_id);

ALTER TABLE dead_letters ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE dead_letters ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_pkey;
ALTER TABLE dead_letters ADD PRIMARY KEY (tenant_id, event_id, endpoint_id);
ALTER TABLE dead_letters ADD CONSTRAINT dead_letters_delivery_fkey FOREIGN KEY (tenant_id, event_id, endpoint_id) REFERENCES deliveries (tenant_id, event_id, endpoint_id);
DROP INDEX dead_letters_lane_idx;
CREATE INDEX dead_letters_lane_idx ON dead_letters (tenant_id, correlation_id, endpoint_id, sequence, event_id);

ALTER TABLE delivery_attempts ADD COLUMN tenant_id text NOT NULL DEFAULT 'default';
ALTER TABLE delivery_attempts ALTER COLUMN tenant_id DROP DEFAULT;
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_delivery_fkey FOREIGN KEY (tenant_id, event_id, endpoint_id) REFERENCES deliveries (tenant_id, event_id, endpoint_id);
DROP INDEX delivery_attempts_delivery_idx;
CREATE INDEX delivery_attempts_delivery_idx ON delivery_attempts (tenant_id, event_id, endpoint_id, id);

CREATE INDEX dead_letters_tenant_open_idx ON dead_letters (tenant_id, dead_lettered_at, event_id, endpoint_id) WHERE status = 'open';

CREATE VIEW events_routed AS
SELECT e.id, e.correlation_id, e.sequence, e.type, e.data, e.payload_hash, e.state, e.accepted_at,
       e.released_at, e.delivered_at, e.updated_at, e.run_id, e.restarts, e.restarted_at, e.restart_reason,
       COALESCE((
           SELECT json_agg(json_build_object(
                      'endpoint_id', d.endpoint_id, 'state', d.state, 'released_at', d.released_at,
                      'delivered_at', d.delivered_at, 'updated_at', d.updated_at,
                      'attempts', (SELECT count(*) FROM delivery_attempts a
                                   WHERE a.tenant_id = d.tenant_id AND a.event_id = d.event_id AND a.endpoint_id = d.endpoint_id),
                      'dead_letter_generation', dl.generation, 'dead_letter_status', dl.status,
                      'recovery_window_ms', d.recovery_window_ms, 'timeout_ms', d.timeout_ms)
                  ORDER BY d.endpoint_id)
           FROM deliveries d
           LEFT JOIN dead_letters dl ON dl.tenant_id = d.tenant_id AND dl.event_id = d.event_id AND dl.endpoint_id = d.endpoint_id
           WHERE d.tenant_id = e.tenant_id AND d.event_id = e.id), '[]') AS deliveries,
       e.tenant_id
FROM events e;
