-- An endpoint's type names the transport its deliveries go through
-- (package transport): every endpoint made before there were types is a
-- webhook, which the default makes them without rewriting a row. The
-- check keeps a type a plain name; which names a worker serves is the
-- API's to check, since a new transport needs no migration.
ALTER TABLE endpoints ADD COLUMN type text NOT NULL DEFAULT 'webhook'
    CONSTRAINT endpoints_type_name CHECK (type ~ '^[a-z][a-z0-9_]{0,31}$');
