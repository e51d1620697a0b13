-- Portal sessions: a tenant's own people use the same /v1 routes
-- from the page hookflow api serves at /portal/. The tenant's backend asks
-- for a session (tenants:write) and hands its link to one person (actor);
-- the link's one-time code is exchanged once, within a minute, for a
-- short-lived bearer token. Only the SHA-256 of the code and of the token
-- are kept, as for API keys: a leaked table grants nothing. The exchange
-- is one UPDATE ... WHERE code_used_at IS NULL, so two API processes
-- racing on one code let only one through. Auth reads the session by its
-- token's hash on every request: a revocation holds from the next request
-- in every API process.
CREATE TABLE portal_sessions (
    tenant_id       text NOT NULL REFERENCES tenants (id),
    id              text NOT NULL,
    actor           text NOT NULL CHECK (actor <> ''),
    capabilities    text[] NOT NULL,
    -- endpoints_limited: the session reaches only the endpoints listed in
    -- portal_session_endpoints (false: all of the tenant's). A column of
    -- its own, so that a session limited to endpoints later deleted never
    -- widens to all of them.
    endpoints_limited boolean NOT NULL DEFAULT false,
    return_url      text NOT NULL DEFAULT '',
    code_hash       bytea NOT NULL UNIQUE,
    code_expires_at timestamptz NOT NULL,
    code_used_at    timestamptz,
    token_hash      bytea UNIQUE,
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CHECK ((code_used_at IS NULL) = (token_hash IS NULL))
);
-- Revoking an actor's sessions finds them by actor.
CREATE INDEX portal_sessions_actor_idx ON portal_sessions (tenant_id, actor) WHERE revoked_at IS NULL;

-- The endpoints a limited session reaches: the composite keys make the
-- database refuse a session of one tenant limited to another's endpoint.
CREATE TABLE portal_session_endpoints (
    tenant_id   text NOT NULL,
    session_id  text NOT NULL,
    endpoint_id text NOT NULL,
    PRIMARY KEY (tenant_id, session_id, endpoint_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES portal_sessions (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES endpoints (tenant_id, id)
);

-- The origins that may frame the tenant's portal page (its CSP
-- frame-ancestors): scheme://host[:port] each, checked by the API.
ALTER TABLE tenants ADD COLUMN portal_origins text[] NOT NULL DEFAULT '{}';
