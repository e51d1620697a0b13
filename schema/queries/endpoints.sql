-- name: EndpointInsert
INSERT INTO endpoints (id, url, secret, event_types)
VALUES ($1, $2, $3, $4)
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types;

-- name: EndpointGet
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types
FROM endpoints WHERE id = $1;

-- name: EndpointUpdate
-- NULL leaves a field as it is, but for event_types, where NULL is every
-- type: $5 says whether $6 replaces them. Re-enabling clears the reason it
-- was disabled.
UPDATE endpoints SET
    url             = COALESCE($2, url),
    event_types     = CASE WHEN $5::boolean THEN $6::text[] ELSE event_types END,
    disabled        = COALESCE($3, disabled),
    disabled_reason = CASE WHEN $3::boolean IS NULL THEN disabled_reason
                           WHEN $3::boolean THEN COALESCE($4, 'disabled by operator')
                           ELSE NULL END,
    updated_at      = now()
WHERE id = $1
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types;

-- name: EndpointRotateSecret
-- The current secret joins the previous ones, to sign for $3 seconds more;
-- previous ones whose grace has ended are dropped.
UPDATE endpoints SET
    previous_secrets = COALESCE((
        SELECT jsonb_agg(p ORDER BY p->>'expires_at')
        FROM jsonb_array_elements(previous_secrets) p
        WHERE (p->>'expires_at')::timestamptz > now()), '[]'::jsonb)
        || jsonb_build_array(jsonb_build_object('secret', secret, 'expires_at', now() + make_interval(secs => $3))),
    secret     = $2,
    updated_at = now()
WHERE id = $1
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types;

-- name: EndpointDisable
UPDATE endpoints SET disabled = true, disabled_reason = $2, updated_at = now() WHERE id = $1;

-- name: EndpointsList
-- A page in id order, after $1 ('' for the first).
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types
FROM endpoints WHERE id > $1 ORDER BY id LIMIT $2;

-- name: EndpointsSubscribed
-- The enabled endpoints whose event_types match type $1, by id. The same
-- rule as eventtypes.Matches: NULL is every type, "*" too, "prefix.*" every
-- type starting with "prefix." (compared as text, not LIKE, so % and _ in a
-- prefix are themselves), anything else that exact type.
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at, event_types
FROM endpoints
WHERE NOT disabled
  AND (event_types IS NULL
       OR $1 = ANY (event_types)
       OR EXISTS (SELECT 1 FROM unnest(event_types) p
                  WHERE p = '*' OR (right(p, 2) = '.*' AND starts_with($1, left(p, -1)))))
ORDER BY id;
