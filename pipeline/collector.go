package pipeline

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IdempotencyKeyHeader is the header every output record carries. Its value,
// "<topic>/<partition>/<offset>/<index>", names the input record and the
// position of the output among that record's outputs. It is the same on every
// attempt, so a consumer that cannot read with read_committed (or a sink
// outside Kafka) can deduplicate on it.
const IdempotencyKeyHeader = "eos-idempotency-key"

// collector is the record collector: it turns a Transform's Output into a
// produced record inside the open transaction. It holds a record's outputs
// until Process returns, so that a record that ends up dead-lettered (or
// failing) leaves no output behind.
type collector struct {
	sess        *txn.Session
	output      string
	outputs     map[string]string // named outputs
	repartition string            // the repartition topic, if any
	in          *Record
	index       int
	pending     []*kgo.Record
	noKey       bool  // Config.NoIdempotencyKey
	slab        slab  // where output records, headers and keys come from
	err         error // an Emit to an unknown output name
}

func (c *collector) reset(sess *txn.Session, in *Record) {
	c.sess, c.in, c.index, c.err = sess, in, 0, nil
	clear(c.pending)
	c.pending = c.pending[:0]
}

// Emit implements Emitter.
func (c *collector) Emit(o Output) {
	topic := o.Topic
	if o.To != "" {
		t, ok := c.outputs[o.To]
		if !ok {
			if c.err == nil {
				c.err = fmt.Errorf("emitted to unknown output %q (known: %s)", o.To, strings.Join(slices.Sorted(maps.Keys(c.outputs)), ", "))
			}
			return
		}
		topic = t
	}
	if topic == "" {
		topic = c.output
	}
	r := c.slab.record()
	r.Topic, r.Key, r.Value, r.Timestamp = topic, o.Key, o.Value, o.Timestamp
	switch {
	case c.in == nil: // a Flusher's output: it stands for no one record
		if r.Timestamp.IsZero() {
			r.Timestamp = time.Now()
		}
		r.Headers = c.withoutInternal(o.Headers, len(o.Headers))
	case topic == c.repartition && c.repartition != "":
		// Internal: read back by this app with read_committed only, so
		// no idempotency key, but the source for dead letters.
		r.Headers = append(c.withoutInternal(o.Headers, len(o.Headers)+1), kgo.RecordHeader{Key: SourceHeader, Value: c.source()})
	default:
		r.Headers = c.headers(o.Headers)
	}
	if r.Timestamp.IsZero() {
		r.Timestamp = c.in.Timestamp
	}
	c.index++
	c.pending = append(c.pending, r)
}

// send produces the outputs of the record just processed.
func (c *collector) send() int {
	for _, r := range c.pending {
		c.sess.Produce(r)
	}
	return len(c.pending)
}

// SourceHeader is carried by records on a repartition topic: the
// "<topic>/<partition>/<offset>" of the input record they came from, so that a
// dead letter raised after the repartition still names the original record.
const SourceHeader = "eos-source"

// source returns the input record's source: its own SourceHeader if it came
// through a repartition topic already, else its coordinates.
func (c *collector) source() []byte {
	for _, h := range c.in.Headers {
		if h.Key == SourceHeader {
			return h.Value
		}
	}
	b := make([]byte, 0, len(c.in.Topic)+24)
	b = append(b, c.in.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(c.in.Partition), 10)
	b = append(b, '/')
	return strconv.AppendInt(b, c.in.Offset, 10)
}

// headers copies hs (which may alias the input record) without any earlier
// idempotency key, as when the input is another eos app's output, and adds
// this record's key.
func (c *collector) headers(hs []kgo.RecordHeader) []kgo.RecordHeader {
	if c.noKey {
		return c.withoutInternal(hs, len(hs))
	}
	return append(c.withoutInternal(hs, len(hs)+1), kgo.RecordHeader{Key: IdempotencyKeyHeader, Value: c.slab.idempotencyKey(c.in, c.index)})
}

// withoutInternal copies hs without the headers the worker manages, into a
// slab slice with room for n. With no room asked for it returns nil: the
// client encodes nil and empty headers alike.
func (c *collector) withoutInternal(hs []kgo.RecordHeader, n int) []kgo.RecordHeader {
	if n == 0 {
		return nil
	}
	out := c.slab.headers(n)
	for _, h := range hs {
		if h.Key != IdempotencyKeyHeader && h.Key != SourceHeader {
			out = append(out, h)
		}
	}
	return out
}

// idempotencyKey is "<topic>/<partition>/<offset>/<index>" of in.
func idempotencyKey(in *Record, index int) []byte {
	b := make([]byte, 0, len(in.Topic)+32)
	b = append(b, in.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(in.Partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, in.Offset, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(index), 10)
	return b
}
