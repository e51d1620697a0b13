-- The event-type catalog: per tenant, each type's description and the
-- JSON Schema (draft 2020-12) its events' data must match, checked at
-- acceptance. A type without a row is accepted as before; the catalog
-- describes, it does not enumerate.
--
-- Keyed by (tenant_id, name): a type is named by its producer, and two
-- tenants may use one name for different payloads. The schema and the
-- example are kept as json, the text the API judged: written canonically
-- (intake.Canonical: keys sorted, no whitespace, numbers as written), so
-- a PUT of the same schema written differently is the same text and keeps
-- its version. jsonb would rewrite it (1e99 spelled out in 100 digits,
-- spaces added, numbers past numeric's range refused), and what acceptance
-- compiles would no longer be what the API checked. version is the server's,
-- from 1, raised by every change of what the entry says (schema,
-- description, example), so a reader can tell which contract it saw. No
-- history of earlier versions is kept: validation uses the current one,
-- and events already accepted were judged by the one current then.
-- The row is small and read by primary key on every acceptance of a
-- catalogued type; the count per tenant is capped by the API
-- (catalog.MaxTypes), as the schema's size is (catalog.MaxSchemaBytes, of
-- the canonical text stored here, held again below so that no writer can
-- store a larger one).
CREATE TABLE event_types (
    tenant_id   text NOT NULL REFERENCES tenants (id),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 255),
    description text NOT NULL DEFAULT '' CHECK (length(description) <= 2000),
    schema      json NOT NULL CHECK (json_typeof(schema) IN ('object', 'boolean') AND octet_length(schema::text) <= 65536),
    -- An example of the data, valid against the schema when stored; NULL
    -- when none was given.
    example     json,
    version     integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);
