ALTER TABLE dead_letters DROP COLUMN IF EXISTS window_key;
