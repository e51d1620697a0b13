ALTER TABLE endpoint_circuits DROP COLUMN outage_opened_at;
