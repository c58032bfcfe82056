package pipeline

import (
	"strconv"

	"github.com/eosctl/eos/txn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// IdempotencyKeyHeader is the header every output record carries. Its value,
// "<topic>/<partition>/<offset>/<index>", names the input record and the
// position of the output among that record's outputs. It is the same on every
// attempt, so a consumer that cannot read with read_committed (or a sink
// outside Kafka) can deduplicate on it.
const IdempotencyKeyHeader = "eos-idempotency-key"

// collector is the record collector: it turns a Transform's Output into a
// produced record inside the open transaction.
type collector struct {
	sess   *txn.Session
	output string
	in     *Record
	index  int
}

func (c *collector) reset(sess *txn.Session, in *Record) {
	c.sess, c.in, c.index = sess, in, 0
}

// Emit implements Emitter.
func (c *collector) Emit(o Output) {
	topic := o.Topic
	if topic == "" {
		topic = c.output
	}
	ts := o.Timestamp
	if ts.IsZero() {
		ts = c.in.Timestamp
	}
	r := &kgo.Record{
		Topic:     topic,
		Key:       o.Key,
		Value:     o.Value,
		Timestamp: ts,
		Headers:   c.headers(o.Headers),
	}
	c.index++
	c.sess.Produce(r)
}

// headers copies hs (which may alias the input record) without any earlier
// idempotency key, as when the input is another eos app's output, and adds
// this record's key.
func (c *collector) headers(hs []kgo.RecordHeader) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(hs)+1)
	for _, h := range hs {
		if h.Key != IdempotencyKeyHeader {
			out = append(out, h)
		}
	}
	return append(out, kgo.RecordHeader{Key: IdempotencyKeyHeader, Value: c.idempotencyKey()})
}

func (c *collector) idempotencyKey() []byte {
	b := make([]byte, 0, len(c.in.Topic)+32)
	b = append(b, c.in.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(c.in.Partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, c.in.Offset, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(c.index), 10)
	return b
}
