# syntax=docker/dockerfile:1
#
# hookflow: one static binary (api, worker, migrate, receiver, ...) on a small
# Debian runtime. Build with `docker build -t hookflow .` or `docker compose build`.
# It is the deploy build (-tags deploy): without dev, temporal, chaos and bench,
# and so without the embedded Temporal server and Web UI they carry, which a
# deployed process never runs (the binary is a fraction of the size, and the
# first build takes far less than the full one). The cache mounts make later
# builds take seconds.

# go.mod's `go` line, exactly. With GOTOOLCHAIN=local the toolchain is the
# image's, and a floating tag (golang:1.26) can be an older 1.26.x, cached or
# mirrored, which refuses go.mod; internal/composecheck checks the two agree.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
COPY kit/go.mod kit/go.sum ./kit/
COPY kit/client/go.mod kit/client/go.sum ./kit/client/
COPY kit/receiver/otelreceiver/go.mod kit/receiver/otelreceiver/go.sum ./kit/receiver/otelreceiver/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -tags deploy -trimpath -ldflags="-s -w" -o /hookflow ./cmd/hookflow

FROM debian:bookworm-slim
# ca-certificates: deliveries to https:// endpoints verify the receiver's certificate.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 hookflow \
    && useradd --system --uid 10001 --gid hookflow --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin hookflow
COPY --from=build /hookflow /usr/local/bin/hookflow
USER 10001:10001
# api (8080), the /metrics listener of api and worker (9090, when
# HOOKFLOW_METRICS_ADDR sets it) and the reference receiver (8090); compose sets
# the listen addresses.
EXPOSE 8080 8090 9090
ENTRYPOINT ["/usr/local/bin/hookflow"]
CMD ["--help"]
