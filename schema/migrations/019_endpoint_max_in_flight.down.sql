DROP TABLE endpoint_leases;
DROP TABLE endpoint_in_flight;
ALTER TABLE endpoints DROP COLUMN max_in_flight;
