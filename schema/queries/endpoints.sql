-- name: EndpointInsert
INSERT INTO endpoints (id, url, secret)
VALUES ($1, $2, $3)
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at;

-- name: EndpointGet
SELECT id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at
FROM endpoints WHERE id = $1;

-- name: EndpointUpdate
-- NULL leaves a field as it is. Re-enabling clears the reason it was disabled.
UPDATE endpoints SET
    url             = COALESCE($2, url),
    disabled        = COALESCE($3, disabled),
    disabled_reason = CASE WHEN $3::boolean IS NULL THEN disabled_reason
                           WHEN $3::boolean THEN COALESCE($4, 'disabled by operator')
                           ELSE NULL END,
    updated_at      = now()
WHERE id = $1
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at;

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
RETURNING id, url, secret, previous_secrets, disabled, disabled_reason, created_at, updated_at;

-- name: EndpointDisable
UPDATE endpoints SET disabled = true, disabled_reason = $2, updated_at = now() WHERE id = $1;
