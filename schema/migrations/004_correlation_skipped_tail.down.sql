ALTER TABLE correlations DROP COLUMN IF EXISTS skipped_tail;
