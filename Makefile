# The few commands a newcomer needs. `make run` starts hookflow locally,
# `make test` lints and runs every test (docs/reliability.md says what each runs against).
GO       ?= go
BIN      := bin/hookflow
# The unit tests run under the race detector, and so do the end-to-end tests
# (API, workers, sweeps, relay and the embedded Temporal server in one
# process). The CLI tests start the hookflow binary as processes and run
# without it. The packages that link the Temporal server have no tests of
# their own (go vet checks them). chaos and bench have unit tests (race) and
# one whole-stack run each (TestChaosShort: the short chaos run, the
# reliability suite's proof; TestOperatorModelShort: the model-based
# operator test's fixed seeds; TestBenchShortRun: the short bench, figures
# printed, no speed asserted; TestBenchDeadReceiverShortRun: the short dead
# receiver, failing on loss, duplicates, disorder or dead letters left
# open), which run last and one at a time so that none shares the two cores
# with the other suites.
STACK_RUNS  := TestChaosShort|TestOperatorModelShort|TestBenchShortRun|TestBenchDeadReceiverShortRun
# The sequencer's model and its size test are one goroutine each and run
# many thousands of steps: they run without the race detector, which would
# make them seven times slower and has nothing to find in them.
NORACE_RUNS := TestSequencerModel|TestSequencerSizesStayUnderTheBudget
# The end-to-end tests mostly wait (on receivers, windows, timers), each on
# a stack of its own (database, task queue, API) beside one Temporal server:
# this many run at once, every one of them (t.Parallel). One about time or
# order holds its receivers until it lets them answer and reads windows and
# rate limits from the ledger's recorded times, so load makes it slower, not
# red.
E2E_PARALLEL ?= 4
# cmd/hookflow's own tests are the CLI tests (test-integration); its wiring,
# cmd/hookflow/app, runs with the unit tests.
UNIT_PKGS    = $(shell $(GO) list ./... | grep -v -e /e2e -e '/cmd/hookflow$$' -e /temporaldev -e /temporaltest)
# The linter, built once from the module proxy at this version into bin/.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck-$(STATICCHECK_VERSION)
# sqlc writes the Go of every query file (sqlc.yaml), likewise built once,
# without cgo: its analysis needs no database.
SQLC_VERSION := v1.31.1
SQLC := bin/sqlc-$(SQLC_VERSION)
# The Go client's generator, built once the same way.
OAPI_CODEGEN_VERSION := v2.8.2
OAPI_CODEGEN := bin/oapi-codegen-$(OAPI_CODEGEN_VERSION)
# Debian's python3 (scripts/deps.sh installs its psycopg, httpx and pytest),
# not whichever python3 comes first on PATH: the Python receiver kit and
# client are built on Debian's packages.
PYTHON := /usr/bin/python3

.PHONY: all build run test lint model test-unit test-fuzz test-integration test-stack deps deps-test clean bench chaos generate generate-sql generate-ts generate-go-client generate-server generate-portal generate-py-client check-generated node ts-client kits lint-openapi

all: build

deps:
	@scripts/deps.sh

# deps-test is deps and the browser the portal's tests drive.
deps-test:
	@scripts/deps.sh --browser

build:
	$(GO) build -o $(BIN) ./cmd/hookflow

run: deps build
	./$(BIN) dev

$(STATICCHECK):
	GOBIN=$(CURDIR)/bin/.staticcheck $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/.staticcheck/staticcheck $@

$(SQLC):
	CGO_ENABLED=0 GOBIN=$(CURDIR)/bin/.sqlc $(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION)
	mv bin/.sqlc/sqlc $@

$(OAPI_CODEGEN):
	GOBIN=$(CURDIR)/bin/.oapi-codegen $(GO) install github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@$(OAPI_CODEGEN_VERSION)
	mv bin/.oapi-codegen/oapi-codegen $@

# gofmt, go vet and staticcheck (staticcheck.conf) over the four modules:
# hookflow, the kit, and two of the kit's parts that are modules of their
# own so that a receiver does not inherit their requirements: the API
# client (the generated client's runtime) and the receiver's OpenTelemetry
# tracer (OpenTelemetry).
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi
	$(GO) vet ./...
	cd kit && $(GO) vet ./...
	cd kit/client && $(GO) vet ./...
	cd kit/receiver/otelreceiver && $(GO) vet ./...
	$(STATICCHECK) ./...
	cd kit && ../$(STATICCHECK) ./...
	cd kit/client && ../../$(STATICCHECK) ./...
	cd kit/receiver/otelreceiver && ../../../$(STATICCHECK) ./...

# Generated code is checked in, so the API's types, clients and queries cannot
# drift from their sources: `make generate` writes it from its
# one source each, and check-generated (in make test) fails when what is
# checked in differs from what it would write.
GENERATED := schema/dbsqlc kit/receiver/internal/dbsqlc kit/outbox/internal/dbsqlc \
	services/refreceiver/internal/dbsqlc lab/bench/internal/dbsqlc \
	clients/typescript/src/schema.ts clients/python/src/hookflow/_generated.py \
	kit/client/client.gen.go api/apigen/server.gen.go api/portal/main.js
generate: generate-sql generate-ts generate-go-client generate-server generate-portal generate-py-client

# The queries' Go, from schema/queries and each package's queries/ (sqlc.yaml).
generate-sql: $(SQLC)
	$(SQLC) generate

# The Go client's types and operations (kit/client, its own module), from api/openapi.json,
# with kit/client/oapi-codegen.yaml's options and overlay.yaml's Go names.
generate-go-client: $(OAPI_CODEGEN)
	cd kit/client && ../../$(OAPI_CODEGEN) -config oapi-codegen.yaml ../../api/openapi.json

# The Python client's types and operations, from api/openapi.json, by the
# client's own generator (standard library only).
generate-py-client:
	$(PYTHON) clients/python/generate.py api/openapi.json clients/python/src/hookflow/_generated.py

# The API's server interface, routes and types (api/apigen), from the same
# document with api/apigen/oapi-codegen.yaml's options and the client's
# overlay.
generate-server: $(OAPI_CODEGEN)
	cd api/apigen && ../../$(OAPI_CODEGEN) -config oapi-codegen.yaml ../openapi.json

# The TypeScript client's types and operations, from api/openapi.json.
generate-ts: node
	cd clients/typescript && npx --no-install openapi-typescript ../../api/openapi.json --output src/schema.ts --silent

# The customer portal's script (api/portal/main.js, which the API embeds
# beside the page's index.html and portal.css), compiled by the TypeScript
# client's tsc from portal/src, whose calls are typed by the client's
# schema.ts: a plain ES module, no bundler. It is checked in, so go build
# and make run need no Node.js.
generate-portal: generate-ts
	rm -rf .portal-build
	clients/typescript/node_modules/.bin/tsc -p portal/tsconfig.json
	cp .portal-build/portal/src/main.js api/portal/main.js
	rm -rf .portal-build

check-generated: generate
	@if [ -n "$(GENERATED)" ] && ! git diff --quiet -- $(GENERATED); then \
		git --no-pager diff --stat -- $(GENERATED); \
		echo "generated code is not what make generate writes: run make generate and commit it"; exit 1; fi
	@if [ -n "$(GENERATED)" ] && [ -n "$$(git ls-files --others --exclude-standard -- $(GENERATED))" ]; then \
		git ls-files --others --exclude-standard -- $(GENERATED); \
		echo "make generate wrote files that are not checked in"; exit 1; fi

# Node.js and the TypeScript client's packages (scripts/node.sh).
node:
	@scripts/node.sh

# The TypeScript client built (dist/), which its end-to-end tests run.
ts-client: node
	cd clients/typescript && npm run --silent build

# The receiver kits and the Python client, beyond Go: the TypeScript kit
# built (dist/, whose example receiver the end-to-end tests run) and its
# unit tests, then the Python kit's and client's unit tests, then the three
# packages as a registry would get them (scripts/packages.sh). The kits'
# conformance runs, their mutants and their real deliveries are end-to-end
# tests (e2e/kits_test.go), as is the Python client's run against the API.
kits: node
	cd kit/receiver-ts && npm run --silent build && npm test --silent
	cd kit/receiver-py && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=src $(PYTHON) -m pytest -q -p no:cacheprovider
	cd clients/python && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=src $(PYTHON) -m pytest -q -p no:cacheprovider
	scripts/packages.sh

# The OpenAPI document against Redocly's recommended rules
# (api/redocly.yaml): no error and no warning.
lint-openapi: node
	cd clients/typescript && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no-install redocly lint --config ../../api/redocly.yaml --max-problems 50 ../../api/openapi.json

# The layout test builds a scratch consumer of the kit with no proxy: the
# kit's whole module graph is fetched into the module cache first.
test-unit:
	cd kit && $(GO) mod download all
	$(GO) test -race -count=1 -skip '$(STACK_RUNS)|$(NORACE_RUNS)' $(UNIT_PKGS)
	$(GO) test -count=1 -run '^($(NORACE_RUNS))$$' ./workflows/
	cd kit && $(GO) test -race -count=1 ./...
	cd kit/client && $(GO) test -race -count=1 ./...
	cd kit/receiver/otelreceiver && $(GO) test -race -count=1 ./...

# A short fuzz run of the SSRF guard, one target at a time (go test fuzzes one
# per run), from the corpus in internal/egress/testdata/fuzz; test-unit runs
# that corpus as plain tests too. New finds land in the same folder: commit
# them with the fix.
FUZZTIME ?= 10s
test-fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCheckURL$$' -fuzztime $(FUZZTIME) ./internal/egress/
	$(GO) test -run '^$$' -fuzz '^FuzzForbidden$$' -fuzztime $(FUZZTIME) ./internal/egress/

test-integration: build ts-client kits
	$(GO) test -race -count=1 -timeout 40m -parallel $(E2E_PARALLEL) ./e2e/...
	$(GO) test -count=1 -timeout 40m ./cmd/hookflow/

# The four stack runs, each hookflow as real processes on its own Postgres,
# Temporal and ports: the chaos package's two (the short chaos run, then the
# operator model) beside the bench package's two (the short bench, then the
# dead receiver), one package each at a time (go test runs packages side by
# side). Much of each run is waiting (fault phases, outages, settles), so
# side by side they take little more than the longer pair; the short bench
# asserts what it delivered, not how fast.
test-stack: build
	$(GO) test -count=1 -p 2 -timeout 40m -run '^($(STACK_RUNS))$$' ./lab/chaos/ ./lab/bench/

test: deps-test lint lint-openapi check-generated test-unit test-fuzz test-integration test-stack

bench: build
	./$(BIN) bench

chaos: build
	./$(BIN) chaos --short

# The sequencer's model, long: MODEL_CHECKS runs from a seed the clock
# picks (the seed is printed), with steps, states per second and the
# transitions reached.
MODEL_CHECKS ?= 20000
model:
	$(GO) test -count=1 -timeout 0 -run '^TestSequencerModel$$' -v ./workflows/ -model.checks $(MODEL_CHECKS) -model.seed 0

clean:
	rm -rf bin .hookflow
