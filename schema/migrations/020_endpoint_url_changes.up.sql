-- An endpoint's URL and what follows it when it changes.
--
-- url_path_public: whether the URL's path holds no secret. Slack- and
-- Discord-style webhook URLs carry their token in the path, so by default
-- (false) the path is redacted wherever the URL is shown to a read-only key
-- or quoted in an error, a Temporal failure or a log; true shows it. A
-- change of URL sets it back to false unless the same request sets it.
ALTER TABLE endpoints ADD COLUMN url_path_public boolean NOT NULL DEFAULT false;

-- Every change of an endpoint's URL: who (the API key's id and name, as a
-- replay's by and a delete's deleted_by name it), when, and the URL before
-- and after, each redacted as a read-only key is shown it (no userinfo,
-- query or fragment; the path only when it was public), so the audit holds
-- no credential. headers_replaced says the change sent headers again: a
-- change of origin (scheme, host or port) must, when the endpoint has
-- custom headers, or their values would reach the new origin. Read by
-- admin keys only (GET /v1/endpoints/{id}/url-changes). One row per PATCH
-- that changes a URL: it grows with operators' changes, not with traffic,
-- and is kept with the endpoint's row (a deleted endpoint's too).
CREATE TABLE endpoint_url_changes (
    id               bigserial PRIMARY KEY,
    endpoint_id      text NOT NULL REFERENCES endpoints (id),
    changed_at       timestamptz NOT NULL DEFAULT now(),
    changed_by_id    text NOT NULL,
    changed_by       text NOT NULL,
    old_url          text NOT NULL,
    new_url          text NOT NULL,
    headers_replaced boolean NOT NULL
);

CREATE INDEX endpoint_url_changes_endpoint_idx ON endpoint_url_changes (endpoint_id, id);
