// Package eos holds what every part of the eos library shares: its error
// vocabulary. Every package wraps the word that applies with %w, so that a
// caller decides with errors.Is alone, whatever package the error came from:
// ErrConfig (a *ConfigError naming the setting), ErrNoTopic, ErrUnreachable,
// ErrFenced and ErrAuth. The library itself is in the packages below it:
//
//   - pipeline: the worker engine. It consumes with read_committed, runs a
//     Transform and commits the consumed offsets in the same transaction
//     as what it produced (KIP-447). Start here.
//   - topologies: the built-in topologies (passthrough, etl, aggregate, dedup,
//     wordcount), their YAML configuration, and building blocks such as the
//     dedup Gate for a Transform of your own.
//   - fencing: a worker's fixed transactional.id and the errors by which
//     Kafka fences a zombie.
//   - verify: judges whether output holds every input record exactly once.
//   - inspect, metrics: offsets, LSO lag and hanging transactions for
//     operators, and their Prometheus export.
//   - broker: the embedded Kafka-protocol broker (franz-go's kfake).
//   - sink, idempotency, reconcile: where exactly-once ends. A database
//     sink that stores its offsets in the database transaction, once-per-key
//     work for consumers, and a reconciler of topic against table.
//
// Exactly-once holds only inside Kafka: anything a Transform does outside
// it (an HTTP call, a database write) happens at least once unless that
// write is itself idempotent or carries its offsets, which is what sink and
// idempotency are for.
//
// The eosctl command (cmd/eosctl) is built on these packages; what only it
// runs (its benchmark, fault drills and demos) is under cmd/eosctl/internal,
// and the library's private helpers under internal/. Neither is an API.
package eos
