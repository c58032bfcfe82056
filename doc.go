// Package eos holds what every part of the eos library shares: the errors
// a caller tells apart with errors.Is and errors.As (ConfigError,
// ErrNoTopic). The library itself is in the packages below it:
//
//   - pipeline: the worker engine. It consumes with read_committed, runs a
//     Transform and commits the consumed offsets in the same transaction
//     as what it produced (KIP-447). Start here.
//   - topologies: the built-in topologies (passthrough, etl, aggregate, dedup,
//     wordcount) and their YAML configuration.
//   - txn, fencing: a worker's transaction lifecycle, its fixed
//     transactional.id and the errors by which Kafka fences a zombie.
//   - verify: judges whether output holds every input record exactly once.
//   - inspect, metrics: offsets, LSO lag and hanging transactions for
//     operators, and their Prometheus export.
//   - bench: the measured cost of exactly-once on a given cluster.
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
// Everything under internal/ exists for the eosctl command and the tests.
// It is not an API.
package eos
