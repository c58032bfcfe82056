package pipeline

import (
	"errors"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Headers of a dead letter. The record itself is the input record unchanged
// (key, value, timestamp and its own headers), so it can be fixed and fed
// back.
const (
	DeadLetterReasonHeader    = "eos-dlq-reason"    // a short code, e.g. "malformed-json"
	DeadLetterErrorHeader     = "eos-dlq-error"     // the error message
	DeadLetterTopicHeader     = "eos-dlq-topic"     // source topic
	DeadLetterPartitionHeader = "eos-dlq-partition" // source partition, decimal
	DeadLetterOffsetHeader    = "eos-dlq-offset"    // source offset, decimal
	DeadLetterTopologyHeader  = "eos-dlq-topology"  // the topology that rejected it
)

// DeadLetterError is the error a Transform returns, through DeadLetter, for a
// record it cannot handle.
type DeadLetterError struct {
	// Reason is a short, stable code for the kind of problem, for
	// filtering the dead-letter topic: "malformed-json", "missing-field",
	// "expression-error", "late-record".
	Reason string
	Err    error
	// Value, if not nil, is written as the dead letter's value instead of
	// the record's: a Transform reading its own internal encoding (from a
	// repartition topic, say) gives back the original value here.
	Value []byte
	// Sources, if not empty, are the input records the record being
	// processed stands for (a combiner's partial result, say): each of them
	// is dead-lettered, as read back from its topic with read_committed,
	// instead of the record itself. See sources.go.
	Sources []Source
}

// Source names an input record by its coordinates.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Error says why the record was rejected, then the cause.
func (e *DeadLetterError) Error() string { return e.Reason + ": " + e.Err.Error() }

// Unwrap returns the Transform's error.
func (e *DeadLetterError) Unwrap() error { return e.Err }

// DeadLetter returns an error that makes the worker send the record being
// processed to the dead-letter topic (Config.DLQ) with headers naming reason,
// err, the record's source topic, partition and offset, and the topology. The
// dead letter is produced in the same transaction as everything else, so it
// is written exactly once; whatever Process emitted or changed in its state
// for the record is dropped.
func DeadLetter(reason string, err error) error {
	if err == nil {
		err = errors.New(reason)
	}
	return &DeadLetterError{Reason: reason, Err: err}
}

// deadLetterRecord builds the dead letter for in.
func deadLetterRecord(dlq, topology string, in *Record, dl *DeadLetterError) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(in.Headers)+7)
	src, partition, offset := in.Topic, strconv.AppendInt(nil, int64(in.Partition), 10), strconv.AppendInt(nil, in.Offset, 10)
	for _, h := range in.Headers {
		switch {
		case h.Key == SourceHeader:
			// Raised after a repartition: name the original record.
			if parts := strings.Split(string(h.Value), "/"); len(parts) >= 3 {
				n := len(parts)
				src, partition, offset = strings.Join(parts[:n-2], "/"), []byte(parts[n-2]), []byte(parts[n-1])
			}
		case h.Key == IdempotencyKeyHeader || strings.HasPrefix(h.Key, "eos-dlq-"):
			// A dead letter fed back keeps only the newest verdict.
		default:
			hs = append(hs, h)
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: DeadLetterReasonHeader, Value: []byte(dl.Reason)},
		kgo.RecordHeader{Key: DeadLetterErrorHeader, Value: []byte(dl.Err.Error())},
		kgo.RecordHeader{Key: DeadLetterTopicHeader, Value: []byte(src)},
		kgo.RecordHeader{Key: DeadLetterPartitionHeader, Value: partition},
		kgo.RecordHeader{Key: DeadLetterOffsetHeader, Value: offset},
		kgo.RecordHeader{Key: DeadLetterTopologyHeader, Value: []byte(topology)},
		kgo.RecordHeader{Key: IdempotencyKeyHeader, Value: idempotencyKey(in, 0)},
	)
	value := in.Value
	if dl.Value != nil {
		value = dl.Value
	}
	return &kgo.Record{Topic: dlq, Key: in.Key, Value: value, Timestamp: in.Timestamp, Headers: hs}
}
