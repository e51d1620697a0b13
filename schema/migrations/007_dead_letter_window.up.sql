-- window_key names the delivery window a dead letter ends (the workflow run
-- and the window's number in it). The write of a dead letter is an activity
-- that Temporal retries: a retry whose first try committed (its result lost
-- on the way back) must not count as a new dead letter, or it bumps the
-- generation past one an operator may already have claimed, and the
-- workflow then ignores that operator's signal. Rows written before this
-- column have none; the next window of their event sets it.
ALTER TABLE dead_letters ADD COLUMN window_key text;
