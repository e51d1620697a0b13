-- The skipped tail (the sequences an operator skipped since the
-- correlation's last delivered event, which a sequencer starting afresh owes
-- the receiver in its next release's skipped_sequences) is kept on the
-- correlation's row, moved in the transaction that moves the cursor. It was
-- read from the events rows, against the last delivered one still stored:
-- once the cleaner deleted that row (HOOKFLOW_KEY_RETENTION), skips from
-- long before it came back into skipped_sequences.
ALTER TABLE correlations ADD COLUMN skipped_tail bigint[] NOT NULL DEFAULT '{}';

-- Existing correlations: every sequence below the cursor was delivered or
-- skipped, and a skipped event's row is never pruned (it has a dead
-- letter), so the tail is the run of skipped rows that ends just below the
-- cursor; a missing row is a delivered event whose key was pruned, and ends
-- the run like a delivered one. Read once, per correlation, by its unique
-- (correlation_id, sequence) index.
UPDATE correlations c SET skipped_tail = t.tail
FROM (
    SELECT r.correlation_id, array_agg(r.sequence ORDER BY r.sequence) AS tail
    FROM (
        SELECT e.correlation_id, e.sequence, c2.next_sequence,
               row_number() OVER (PARTITION BY e.correlation_id ORDER BY e.sequence DESC) AS rn
        FROM events e JOIN correlations c2 ON c2.correlation_id = e.correlation_id
        WHERE e.sequence < c2.next_sequence AND e.state = 'skipped'
    ) r
    WHERE r.sequence = r.next_sequence - r.rn
    GROUP BY r.correlation_id
) t
WHERE c.correlation_id = t.correlation_id;
