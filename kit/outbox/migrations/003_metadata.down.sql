ALTER TABLE outbox DROP COLUMN metadata;
