// Package composecheck holds only tests: they read the repository's
// docker-compose.yml and Dockerfile, which no Docker engine checks in CI, and
// assert that they match the code: every hookflow service runs a real
// subcommand, takes only settings config.Settings() lists (with values that
// parse), runs after migrate, and that the image builds ./cmd/hookflow.
//
// They also hold the compose defaults to what is safe beyond a laptop: api,
// worker and relay demand HOOKFLOW_API_TOKEN (${HOOKFLOW_API_TOKEN:?...}, no
// default); Temporal's frontend and Web UI are published on 127.0.0.1 only; no
// DSN connects as the Postgres superuser, and hookflow's DSNs use the role an
// init script of the postgres service creates, owning their databases; the
// private-target allowlist names the reference receiver and the old
// allow-every-private-target switch is gone; the API's /metrics has its own
// listener, off the API's port and not published beyond loopback.
package composecheck
