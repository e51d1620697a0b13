DROP INDEX IF EXISTS endpoints_destination_key;
ALTER TABLE endpoints DROP COLUMN IF EXISTS credentials;
ALTER TABLE endpoints DROP COLUMN IF EXISTS config;
