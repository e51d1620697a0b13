DROP INDEX events_voided_idx;
