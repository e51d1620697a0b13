DROP TABLE endpoint_url_changes;
ALTER TABLE endpoints DROP COLUMN url_path_public;
