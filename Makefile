# The few commands a newcomer needs. `make run` starts hookflow locally,
# `make test` runs every test against real Postgres and Temporal.
GO       ?= go
BIN      := bin/hookflow
# Packages whose tests need no Temporal server run under the race detector;
# the end-to-end, CLI, chaos and bench tests start the stack (the embedded
# server, or the hookflow binary as processes) and run without it. The
# packages that link the Temporal server have no tests of their own (go vet
# checks them); building them under -race would compile the server again.
# chaos and bench have end-to-end tests of their own (TestChaosShort, the
# short bench); they are not in `make test` yet: run them with `make chaos`
# and `make bench` until they have been seen to pass on a quiet machine.
SERVER_PKGS := ./e2e/... ./cmd/...
UNIT_PKGS    = $(shell $(GO) list ./... | grep -v -e /e2e -e /cmd/ -e /chaos -e /bench -e /temporaldev -e /temporaltest)

.PHONY: all build run test lint test-unit test-integration deps clean bench chaos

all: build

deps:
	@scripts/deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/hookflow

run: deps build
	./$(BIN) dev

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...

test-unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

test-integration: build
	$(GO) test -count=1 -timeout 40m $(SERVER_PKGS)

test: deps lint test-unit test-integration

bench: build
	./$(BIN) bench

chaos: build
	./$(BIN) chaos

clean:
	rm -rf bin .hookflow
