DROP INDEX endpoints_deleted_idx;
ALTER TABLE endpoints DROP COLUMN deleted_by;
ALTER TABLE endpoints DROP COLUMN deleted_at;
