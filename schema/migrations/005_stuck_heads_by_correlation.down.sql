DROP INDEX IF EXISTS correlations_due_idx;
ALTER TABLE correlations DROP COLUMN IF EXISTS swept_at, DROP COLUMN IF EXISTS high_water;
