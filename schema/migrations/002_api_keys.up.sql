-- Scoped API keys. The key itself is shown once, when it is created; only
-- its SHA-256 is kept (a key is 256 random bits, so a slow hash would buy
-- nothing). A revoked key stays, for the audit trail of what it did, and is
-- refused from the next request on, by every API process: each request
-- looks its key up here.
CREATE TABLE api_keys (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    scopes     text[] NOT NULL,
    key_hash   bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
