-- GET /v1/stats, `hookflow status` and the /metrics gauges read the events
-- still in play (queued, waiting, delivering, dead-lettered) and those
-- delivered in the last five minutes. Both are a sliver of a ledger that
-- keeps every delivered event, so without these they scanned all of events
-- on every call and every scrape.
--
-- Events not delivered or skipped: the summary's counts and oldest lag, and
-- the blocked-correlations list (oldest first). The index stays as small as
-- the backlog; accepted_at orders it by lag.
CREATE INDEX IF NOT EXISTS events_undelivered_idx ON events (accepted_at)
    WHERE state NOT IN ('delivered', 'skipped');

-- Delivered events by delivery time: the summary's "delivered in the last
-- 5 minutes" reads a range at the end of it.
CREATE INDEX IF NOT EXISTS events_delivered_at_idx ON events (delivered_at)
    WHERE state = 'delivered';

-- Migrations run in one transaction, so these are plain CREATE INDEX: on a
-- large events table the build blocks writes to it (new events, state
-- changes) while it runs. To avoid that, create them beforehand with
-- CREATE INDEX CONCURRENTLY, same names and definitions, outside a
-- transaction; IF NOT EXISTS then makes this migration a no-op.
