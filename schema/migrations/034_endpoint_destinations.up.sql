-- A destination that is not reached by URL (a broker) is set by its
-- type's config, a JSON object of settings that are not secret (address,
-- subject or stream prefix, exchange), and its credentials, a JSON object
-- of secrets kept as the signing secret and the custom headers' values
-- are: in this row alone, never copied into the ledger's other tables, a
-- log, a span or a workflow's input. A webhook has neither. The url
-- column holds such a destination's canonical address (no credentials),
-- which is what is shown, audited and compared.
ALTER TABLE endpoints ADD COLUMN config jsonb
    CONSTRAINT endpoints_config_object CHECK (config IS NULL OR jsonb_typeof(config) = 'object');
ALTER TABLE endpoints ADD COLUMN credentials jsonb
    CONSTRAINT endpoints_credentials_object CHECK (credentials IS NULL OR jsonb_typeof(credentials) = 'object');

-- Two live endpoints writing the same lanes of one broker destination
-- would refuse each other's writes (each lane's tail would be the other's):
-- a broker destination's canonical address belongs to one endpoint of the
-- deployment. Webhooks may share a URL: their receivers keep lanes apart
-- by endpoint id.
CREATE UNIQUE INDEX endpoints_destination_key ON endpoints (url) WHERE type <> 'webhook' AND deleted_at IS NULL;
