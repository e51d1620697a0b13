// Package composecheck holds only tests: they read the repository's
// docker-compose.yml and Dockerfile, which no Docker engine checks in CI, and
// assert that they match the code: every hookflow service runs a real
// subcommand, takes only settings config.Settings() lists (with values that
// parse), runs after migrate, and that the image builds ./cmd/hookflow.
//
// They also hold the compose defaults to what is safe beyond a laptop: api
// demands HOOKFLOW_API_TOKEN (${HOOKFLOW_API_TOKEN:?...}, no default) and no
// other hookflow service carries it; no password has a default or a literal
// value, the superuser's included; Temporal's frontend and Web UI are
// published on 127.0.0.1 only, the API and the reference receiver on
// 127.0.0.1 unless the operator names another address; .env.example sets out
// every variable compose demands and mentions every one it reads; no
// DSN connects as the Postgres superuser, and hookflow's DSNs use the role an
// init script of the postgres service creates, owning their databases; the
// private-target allowlist names the reference receiver and the old
// allow-every-private-target switch is gone; the API's /metrics has its own
// listener, off the API's port and not published beyond loopback.
//
// And that the first `docker compose up` comes up: Postgres's max_connections
// holds every pool at its largest (hookflow's pool_max_conns times replicas,
// Temporal's four services' pools, plus headroom); its healthcheck is
// pg_isready over TCP; every one-shot retries a bounded number of times and is
// waited out with service_completed_successfully; the reference receiver is in
// a profile, its secret from the operator with no default, and no profiled
// service demands a variable nothing else does (compose would refuse every
// `up`); the image is the deploy build (-tags deploy) by go.mod's Go version.
package composecheck
