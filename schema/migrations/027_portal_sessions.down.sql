ALTER TABLE tenants DROP COLUMN portal_origins;
DROP TABLE portal_session_endpoints;
DROP TABLE portal_sessions;
