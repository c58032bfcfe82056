# eos: common tasks. `make help` lists them.
GO ?= go
BIN ?= bin/eosctl

.PHONY: help build test test-embedded test-kafka test-short quickstart lint vet fmt clean chaos soak up down dashboards kafka kafka-stop kafka-status db db-stop registry registry-stop

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/eosctl
	$(GO) build -o $(BIN) ./cmd/eosctl

# The packages whose tests run again against Apache Kafka (EOS_TEST_BROKER=kafka):
# every test there that talks to a broker gets the real one.
KAFKA_PKGS ?= ./cmd/eosctl/internal/e2e ./cmd/eosctl/internal/chaos ./internal/committed ./inspect ./metrics ./topologies ./verify

test: test-embedded test-kafka ## every test: the suite on the embedded broker, then again on Apache Kafka 4.4 (the README's test command)

test-embedded: ## every test against the embedded broker (and the Kafka launcher's own tests)
	$(GO) test ./... -count=1 -timeout 30m

test-kafka: ## the broker-facing tests against a 3-node Apache Kafka 4.4 cluster each package starts (Java 17+, Maven)
	EOS_TEST_BROKER=kafka $(GO) test -p 1 -count=1 -timeout 75m $(KAFKA_PKGS)
	EOS_TEST_BROKER=kafka $(GO) test -count=1 -timeout 20m -run 'KStreams' ./cmd/eosctl/internal/bench

test-short: ## the inner loop, about two minutes on 2 cores: skips the long tests (kill loops, demos, most chaos rows) and Apache Kafka
	$(GO) test -short ./...

quickstart: ## the main job on an embedded broker: produce, copy with crashes, verify
	$(GO) run ./cmd/eosctl quickstart

kafka: ## start a real Apache Kafka 4.4 cluster: 3 nodes on 127.0.0.1:9092-9094, jars from Maven Central (NODES=1 for one)
	scripts/kafka start --nodes $(or $(NODES),3)

kafka-stop: ## stop the cluster `make kafka` started
	scripts/kafka stop

kafka-status: ## the nodes of that cluster, their PIDs and logs
	scripts/kafka status

chaos: ## the fault suite in its long form; prints the RELIABILITY.md table
	$(GO) run ./cmd/eosctl chaos

soak: ## 30 minutes of steady copying: throughput, RSS and goroutines must stay flat (not in CI)
	$(GO) run ./cmd/eosctl chaos --soak 30m --rate 5000

lint: vet fmt ## go vet and a gofmt check
	@command -v duplicates >/dev/null && duplicates || true

vet:
	$(GO) vet ./...

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed: $$out"; exit 1; fi

registry: ## start a real Schema Registry (Apicurio, Confluent-compatible API) on 127.0.0.1:8081 from Maven Central; prints the URL for --schema-registry
	@scripts/registry start

registry-stop: ## stop the registry `make registry` started
	@scripts/registry stop

db: ## install (apt-get, if missing) and start PostgreSQL and MariaDB on 127.0.0.1 for the sink tests; prints the DSNs
	@scripts/db start all

db-stop: ## stop the servers `make db` started (their data stays, in /tmp/eos-db unless EOS_DB_DIR says otherwise)
	@scripts/db stop all

COMPOSE ?= docker compose
GRAFANA ?= http://localhost:3000/d/eos
up: ## start the ops stack (needs Docker): 3 Kafka nodes, 2 workers, load, monitor, Prometheus, Grafana
	$(COMPOSE) up -d --build
	@$(MAKE) --no-print-directory dashboards

down: ## stop the ops stack and delete its data
	$(COMPOSE) down -v --remove-orphans

dashboards: ## print the stack's URLs and open the Grafana dashboard where a browser opener exists
	@echo "Grafana dashboard  $(GRAFANA)  (anonymous viewer; admin/admin to edit)"
	@echo "Prometheus         http://localhost:9090/targets"
	@echo "worker metrics     http://localhost:9464/metrics  http://localhost:9465/metrics  (/readyz, /healthz)"
	@echo "monitor metrics    http://localhost:9466/metrics"
	@echo "Kafka              localhost:9092,localhost:9093,localhost:9094"
	@if command -v xdg-open >/dev/null 2>&1; then xdg-open $(GRAFANA) >/dev/null 2>&1 || true; \
	elif command -v open >/dev/null 2>&1; then open $(GRAFANA) || true; fi

clean: ## remove build output and the default broker data dir
	rm -rf bin .eosctl
