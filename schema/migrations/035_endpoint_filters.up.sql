-- An endpoint's filter narrows what its event_types let in, on the event's
-- data and metadata (the language is internal/filter's). It is read at
-- acceptance, beside the types, and a change applies to events accepted
-- after it: routing is decided once and kept with the event. It is json,
-- not jsonb: the text the API compiled is kept as it is, so that it
-- compiles the same at acceptance (jsonb would spell 1e99 out in a hundred
-- digits and push a filter at its size cap past it).
ALTER TABLE endpoints ADD COLUMN filter json
    CONSTRAINT endpoints_filter_object CHECK (filter IS NULL OR json_typeof(filter) = 'object');

-- The producer's metadata, kept with the event so that its routing can be
-- explained after the fact; NULL when it sent none. json, kept as the
-- producer's canonical text, as it was matched and hashed.
ALTER TABLE events ADD COLUMN metadata json
    CONSTRAINT events_metadata_object CHECK (metadata IS NULL OR json_typeof(metadata) = 'object');

-- The endpoints subscribed to the event's type whose filter left it out,
-- decided at acceptance with the deliveries (which are the endpoints that
-- took it). An event that no filter left out has NULL, so that the common
-- case costs nothing. These endpoints have no delivery of the event: it
-- never enters their lanes, and the next event there names the one before
-- it as its previous sequence.
ALTER TABLE events ADD COLUMN filtered_out text[];
