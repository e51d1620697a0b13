ALTER TABLE endpoints DROP COLUMN type;
