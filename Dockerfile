# syntax=docker/dockerfile:1
#
# hookflow: one static binary (api, worker, migrate, receiver, ...) on a small
# Debian runtime. Build with `docker build -t hookflow .` or `docker compose build`.
# The first build compiles the embedded Temporal server (hookflow dev) and takes
# several minutes; the cache mounts make later builds take seconds.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
COPY kit/go.mod kit/go.sum ./kit/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /hookflow ./cmd/hookflow

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
