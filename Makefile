# leasehold: `make help` lists the targets.
GO        ?= go
PKGS      ?= ./...
TEST_TIMEOUT ?= 45m

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the documented targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build every package and the worker binary into bin/
	$(GO) build ./...
	$(GO) build -o bin/worker ./cmd/worker

.PHONY: deps
deps: ## install (Debian packages) and start Redis and PostgreSQL on loopback if they do not answer
	@tools/services/up.sh

.PHONY: deps-test
deps-test: ## deps, and Debian's chromium for the console's browser tests
	@BROWSER=1 tools/services/up.sh

.PHONY: run
run: deps ## the demo: embedded Kafka, local Redis, producer, workers, live view (Ctrl-C drains)
	$(GO) run ./cmd/worker demo

# The packages whose tests talk to Kafka: run a second time on Apache Kafka.
KAFKA_PKGS ?= . ./internal/cli ./tracing ./cmd/worker

.PHONY: test
test: deps-test ## every test under -race against real Redis, PostgreSQL, Jaeger and kfake, then the Kafka-facing ones on Apache Kafka
	$(GO) vet $(PKGS)
	@jaeger=$$(tools/jaeger/build.sh) && libs=$$(tools/kafka/fetch.sh) && \
	echo "== every package (Kafka: kfake in process; chaos: kfake and Apache Kafka)" && \
	JAEGER_BIN=$$jaeger KAFKA_LIBS=$$libs $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS) && \
	echo "== Kafka-facing packages on Apache Kafka (TEST_KAFKA=apache)" && \
	TEST_KAFKA=apache JAEGER_BIN=$$jaeger KAFKA_LIBS=$$libs $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(KAFKA_PKGS)

.PHONY: test-short
# The short tests mostly wait on Redis TTLs, not on the CPU: more packages at once than cores.
SHORT_P ?= 8
test-short: deps ## the fast loop (under 2 min): unit and fake-store tests with Redis and PostgreSQL; no Kafka (kfake included), Jaeger, chaos or browser
	$(GO) test -short -count=1 -p $(SHORT_P) -timeout 5m $(PKGS)

FLAKES_COUNT ?= 3
.PHONY: flakes
flakes: deps ## the root package, internal/cli and internal/devkafka under -race, FLAKES_COUNT (3) runs each, beside two busy loops; names every failed test
	FLAKES_COUNT=$(FLAKES_COUNT) tools/flakes/run.sh

.PHONY: test-kafka
test-kafka: deps ## only the Kafka-facing tests, on Apache Kafka (or on KAFKA_BROKERS=host:port if set)
	libs=$$(tools/kafka/fetch.sh) && TEST_KAFKA=apache KAFKA_LIBS=$$libs $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(KAFKA_PKGS)

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint (.golangci.yml)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run --allow-parallel-runners

.PHONY: chaos
chaos: deps ## chaos run: real workers, kills, zombies, partitions, Redis restart, history check; env CHAOS_KAFKA=kfake|apache|apache-cluster CHAOS_SEED CHAOS_JOBS CHAOS_WORKERS CHAOS_KILL_EVERY CHAOS_PAUSE
	$(GO) build -o bin/worker ./cmd/worker
	libs=$$(tools/kafka/fetch.sh) && KAFKA_LIBS=$$libs CHAOS_WORKER_BIN=$(CURDIR)/bin/worker $(GO) run ./cmd/chaos

.PHONY: soak
soak: deps ## soak: the chaos schedule at a steady pace, resources checked flat; env SOAK_DURATION (10m) SOAK_RATE (50 jobs/s) SOAK_RETENTION (2m) SOAK_SAMPLE_EVERY (10s), CHAOS_* as for chaos
	$(GO) build -o bin/worker ./cmd/worker
	libs=$$(tools/kafka/fetch.sh) && KAFKA_LIBS=$$libs CHAOS_WORKER_BIN=$(CURDIR)/bin/worker \
	SOAK_DURATION=$${SOAK_DURATION:-10m} CHAOS_RATE=$${SOAK_RATE:-50} CHAOS_RETENTION=$${SOAK_RETENTION:-2m} $(GO) run ./cmd/chaos

.PHONY: takeover
takeover: deps ## takeover time after kill -9 and SIGSTOP of worker processes with the defaults, kfake then Apache Kafka: takeover_p50_*/takeover_p99_* lines; env TAKEOVER_TRIALS (10 a case)
	libs=$$(tools/kafka/fetch.sh) && for k in kfake apache; do \
	TEST_KAFKA=$$k KAFKA_LIBS=$$libs TAKEOVER_TRIALS=$${TAKEOVER_TRIALS:-10} \
	$(GO) test -count=1 -timeout 60m -run 'TestTakeoverWithinLease$$' -v ./cmd/worker || exit 1; done

.PHONY: kafka
kafka: ## Apache Kafka (KRaft) on loopback, one node or BROKERS=3 for a cluster; prints its bootstrap address; Ctrl-C stops it. env KAFKA_PORT (one node)
	$(GO) build -o bin/kafka ./tools/kafka
	bin/kafka -brokers $${BROKERS:-1} -port $${KAFKA_PORT:-0}

.PHONY: bench
bench: ## benchmark programs of this module (not bench/compare: make compare); one figure a line, name=value unit
	@for d in $$(ls -d bench/*/ 2>/dev/null); do [ -f $$d/go.mod ] && continue; [ -f $$d/main.go ] && $(GO) run ./$$d || exit 1; done

.PHONY: compare
compare: deps ## leasehold beside asynq, DBOS and the SET NX pattern in one run; rewrites the table in docs/benchmarks.md; ARGS passes flags (ARGS='-kafka apache': on Apache Kafka beside a bare consumer)
	cd bench/compare && $(GO) run . -table=../../docs/benchmarks.md $(ARGS)

.PHONY: redisperf
redisperf: deps ## where Redis spends a leasehold job, by function: perf on a frame-pointer build of the installed redis-server (Debian's source); redis_pct_*/redis_us_* lines
	@tools/redisperf/run.sh

.PHONY: jaeger
jaeger: ## build the pinned Jaeger v2 binary into the user cache (once per version); prints its path
	@tools/jaeger/build.sh
