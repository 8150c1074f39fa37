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

.PHONY: run
run: ## the demo: embedded Kafka, local Redis, producer, workers, live view (Ctrl-C drains)
	$(GO) run ./cmd/worker demo

.PHONY: test
test: ## every test against real Redis, PostgreSQL, kfake and Jaeger, under -race
	$(GO) vet $(PKGS)
	bin=$$(tools/jaeger/build.sh) && JAEGER_BIN=$$bin $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint (.golangci.yml)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0 run

.PHONY: chaos
chaos: ## chaos run: real workers, kills, zombies, Redis restart; env CHAOS_SEED CHAOS_JOBS CHAOS_WORKERS CHAOS_KILL_EVERY CHAOS_PAUSE
	$(GO) build -o bin/worker ./cmd/worker
	CHAOS_WORKER_BIN=$(CURDIR)/bin/worker $(GO) run ./cmd/chaos

.PHONY: bench
bench: ## benchmark programs; one figure a line, name=value unit
	@for d in $$(ls -d bench/*/ 2>/dev/null); do [ -f $$d/main.go ] && $(GO) run ./$$d || exit 1; done

.PHONY: jaeger
jaeger: ## build the pinned Jaeger v2 binary into the user cache (once per version); prints its path
	@tools/jaeger/build.sh
