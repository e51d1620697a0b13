-- The rate limiter counts the attempts it held back (GET
-- /v1/endpoints/{id}/stats "throttled"). The count lives on the
-- limiter's own row and is moved by the statement that reserves the slot
-- (EndpointRateReserve), so it costs no write of its own and survives every
-- crash: a reservation is counted exactly when it is made. It is a total
-- since the endpoint's first rate-limited attempt (the row is created then),
-- not a windowed figure: a window would need a row per throttle.
ALTER TABLE endpoint_rate_slots
    ADD COLUMN throttled bigint NOT NULL DEFAULT 0;
