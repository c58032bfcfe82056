// Package pipeline is the worker engine of eos, for any program that runs an
// exactly-once stream processor (eosctl run is one): it consumes input topics
// with read_committed, hands every record to a Transform, produces what the
// Transform emits, and commits the consumed offsets in the same transaction as
// the produced records.
//
// The package borrows Kafka Streams' split of responsibilities: the Transform
// is the per-record work, the collector stamps and sends its output, and the
// Worker manages assignment, transactions and commits. Only the Worker knows
// about transactions; a Transform never sees them.
//
// A Transform may also keep keyed state (Declaration.Stores, Record.Store):
// in memory, changelogged in the same transaction as its outputs and
// restored on every assignment (state.go, restore.go); emit to named outputs
// and through a repartition topic (declare.go); and reject records it cannot
// handle to a dead-letter topic (DeadLetter); hold output back until
// the commit (Flusher); and, if its records are independent of each
// other, have large polls processed on several goroutines (Forker).
// examples/fraud is a complete
// stateful processor built on this API.
package pipeline

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is one input record as a Transform sees it. Key, Value and Headers
// alias the fetched buffers: copy them if they must outlive Process.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
	Timestamp time.Time
	// Repartitioned reports that the record came back from the worker's
	// repartition topic (see Declaration.Repartition) rather than from an
	// input topic.
	Repartitioned bool

	state *partitionState // the keyed state of the record's partition, if any
}

// Output is a record a Transform emits.
type Output struct {
	// To names one of the worker's named outputs (Config.Outputs, or the
	// Transform's Declaration); empty means the default output. Emitting
	// to a name the worker does not know stops the worker: it is a bug in
	// the Transform, not in the data.
	To string
	// Topic overrides the worker's output topic when To is empty; empty
	// means the default. Prefer To: named outputs are created at start, a
	// raw topic must already exist.
	Topic     string
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
	Timestamp time.Time // zero means the input record's timestamp
}

// Emitter receives a Transform's output for the record being processed.
type Emitter interface {
	Emit(Output)
}

// Transform is the per-record work of a topology: one record in, zero or more
// records out. It must be deterministic in what it emits for a given input
// record if downstream deduplication by idempotency key is to work, and it
// must not have effects outside Kafka that it cannot repeat: a transaction
// that aborts is processed again, so anything Process does outside Kafka (an
// HTTP call, a database write) happens at least once, not exactly once.
//
// An error made with DeadLetter sends the record to the dead-letter topic,
// in the same transaction, and the worker goes on; whatever Process emitted
// or changed in its state for that record is dropped first, so a record is
// either fully processed or dead-lettered, never half of each. Any other
// error stops the worker without committing the record, so the record is not
// lost: it is processed again when the worker restarts. Use DeadLetter for
// bad data, plain errors for bugs and broken dependencies.
//
// A Transform that keeps keyed state, or needs named outputs or a
// repartition topic, says so by also implementing Declarer; it reads and
// writes its state through Record.Store.
type Transform interface {
	Process(ctx context.Context, in *Record, out Emitter) error
}

// TransformFunc adapts a function to a Transform.
type TransformFunc func(ctx context.Context, in *Record, out Emitter) error

// Process calls f.
func (f TransformFunc) Process(ctx context.Context, in *Record, out Emitter) error {
	return f(ctx, in, out)
}

// Flusher is implemented by a Transform that holds output back across the
// records of a transaction, as a combiner does: it folds many records into
// one output and emits that once, just before the commit, so that the
// output commits with the offsets of every record it stands for.
//
// What can go wrong: the worker calls Flush only before a commit, and
// Discard whenever the transaction will not commit (an abort, a fence, an
// unknown outcome, a revoked partition); the records behind what was held
// are then processed again, so Discard must forget it all. Outputs of Flush
// belong to no single input record: they carry no idempotency key (nor, on
// a repartition topic, a source), and a zero Timestamp means the time of
// the flush. A Flush error stops the worker, as a Process error does.
type Flusher interface {
	Flush(ctx context.Context, out Emitter) error
	Discard()
}
