# eos: common tasks. `make help` lists them.
GO ?= go
BIN ?= bin/eosctl

.PHONY: help build test quickstart lint vet fmt clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/eosctl
	$(GO) build -o $(BIN) ./cmd/eosctl

test: ## run every test (the README's test command)
	$(GO) test ./...

quickstart: ## the main job on an embedded broker: produce, copy with crashes, verify
	$(GO) run ./cmd/eosctl quickstart

lint: vet fmt ## go vet and a gofmt check
	@command -v duplicates >/dev/null && duplicates || true

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

clean: ## remove build output and the default broker data dir
	rm -rf bin .eosctl
