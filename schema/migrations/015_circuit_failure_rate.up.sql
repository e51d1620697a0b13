-- The circuit breaker's failure rate, beside 013's
-- consecutive failures: an endpoint that fails every other request never
-- fails five times in a row, yet half of what is sent to it is wasted and
-- every lane behind it crawls. The circuit opens the same way (same state,
-- probe and backoff) when, at a failure, the retryable failures among the
-- endpoint's attempts of the last circuit_window reach circuit_failure_rate
-- percent, once the window holds at least circuit_min_attempts of them
-- (fewer say nothing of a rate).
--
-- Settings, in the endpoint's row beside circuit_failure_threshold. NULL is
-- the default: 50 percent over 60 s, at least 20 attempts. The bounds are
-- the API's: a rate from 1 to 100 percent, a window from 10 s (shorter
-- than a few retries of one delivery is no window) to 1 h (the longest the
-- count at a failure reads), at least 1 to 10000 attempts.
ALTER TABLE endpoints
    ADD COLUMN circuit_failure_rate integer
        CONSTRAINT endpoints_circuit_failure_rate_range CHECK (circuit_failure_rate BETWEEN 1 AND 100),
    ADD COLUMN circuit_window_ms bigint
        CONSTRAINT endpoints_circuit_window_range CHECK (circuit_window_ms BETWEEN 10000 AND 3600000),
    ADD COLUMN circuit_min_attempts integer
        CONSTRAINT endpoints_circuit_min_attempts_range CHECK (circuit_min_attempts BETWEEN 1 AND 10000);

-- The rate is counted from delivery_attempts, which record every attempt's
-- outcome already (delivery_attempts_endpoint_started_idx, migration 011),
-- and only when a failure is recorded: a success writes and reads nothing
-- more than it did, so a healthy endpoint pays nothing for the rate. The
-- window starts no earlier than the breaker's closed_at (013: when the
-- circuit last closed, or an operator enabled the endpoint again), so the
-- failures of an outage the breaker has dealt with do not open it again at
-- the first failure after it. One column of the breaker's row, which the
-- failure's transition writes anyway:
--
-- rate_counted_at is when a failure last counted the window: at most once
-- a second per endpoint, whatever its volume, so that many failures a
-- second at a rate under the threshold cost one count of the window a
-- second, not one per failure under the row's lock.
ALTER TABLE endpoint_circuits ADD COLUMN rate_counted_at timestamptz;
