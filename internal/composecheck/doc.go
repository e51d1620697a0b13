// Package composecheck holds only tests: they read the repository's
// docker-compose.yml and Dockerfile, which no Docker engine checks in CI, and
// assert that they match the code: every hookflow service runs a real
// subcommand, takes only settings config.Settings() lists (with values that
// parse), runs after migrate, and that the image builds ./cmd/hookflow.
package composecheck
