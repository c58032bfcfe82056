package topologies

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos/pipeline"
)

// Stage one's pre-aggregation (a combiner, as in MapReduce). Instead of one
// repartition record per input record, stage one folds the records of one
// transaction into one partial result per group and pane, and writes those
// partials when the transaction commits (pipeline.Flusher): with G groups
// active, the repartition topic carries G records a pane and transaction
// instead of every record, and stage two folds partials instead of records.
//
// A pane is a slice of event time, gcd(size, advance) long, in which every
// record belongs to the same windows, so a partial folds into exactly the
// windows its records would have. What a partial must not change is the
// result: which windows a record is folded into, or whether it is late,
// depends on the stream time when stage two reads it, and a partial moves
// its records to where it is written. So the combiner holds a segment of
// records in which no record could close a window of another (each one's
// time is below every other's earliest close), where any order gives the
// same result, and seals it (writes its partials, in the order they were
// opened) before a record that breaks the rule joins.
//
// A record that looks late (its earliest window closed by the largest event
// time stage one has seen in the record's bucket of groups) is written
// alone, with its input value, as without a combiner, after sealing what is
// held: stage two dead-letters it directly. Groups share seenBuckets
// buckets by hash, so that the memory is fixed however many groups there
// are, and one record timed far in the future makes only its bucket's
// records look late (written alone: slower, never wrong), not every group's. A partial can still turn out late in stage two, whose stream
// time may be ahead of this worker's (other workers, an earlier
// incarnation); its records are then dead-lettered each as it is in its
// input topic, read back by the worker (DeadLetterError.Sources). With
// emit: updates nothing is combined, so every record still makes its update;
// with preaggregate: false nothing is combined either, and every record is
// written alone.
type combiner struct {
	panes map[int64]map[string]*partial // pane start -> group -> partial
	order []*partial                    // the held partials, as opened
	// Of the held records: the largest event time, and the earliest time
	// at which one of their windows closes.
	segMax, segClose int64
	// The largest event time since the last Discard, by bucket of groups.
	seen []int64
}

const seenBuckets = 4096

var castagnoli = crc32.MakeTable(crc32.Castagnoli) // a hash with CPU support

// partial is the combined contribution of some records of one group to the
// windows of one pane.
type partial struct {
	group string
	ts    int64     // the largest event time in it
	stamp time.Time // the latest record timestamp in it
	acc   []byte    // an accumulator, as in the store
	srcs  []pipeline.Source
}

// forget forgets the event times seen.
func (c *combiner) forget() {
	for i := range c.seen {
		c.seen[i] = math.MinInt64
	}
}

func (c *combiner) reset() {
	clear(c.panes)
	clear(c.order)
	c.order = c.order[:0]
	c.segMax, c.segClose = math.MinInt64, math.MaxInt64
}

// stageOne handles a record in stage one: held in a partial, or written
// alone if it may be late (or with emit: updates, or preaggregate: false).
func (t *Aggregate) stageOne(in *pipeline.Record, group []byte, ts int64, vals []float64, out pipeline.Emitter) {
	c := &t.comb
	if c.panes == nil {
		c.panes = map[int64]map[string]*partial{}
		c.reset()
		c.seen = make([]int64, seenBuckets)
		c.forget()
	}
	if t.sessions != nil {
		// Sessions are not combined: a partial's records could fall in
		// different sessions, and whether one is late depends on its own
		// time.
		out.Emit(pipeline.Output{To: t.store, Key: group, Value: t.encodeStaged(ts, vals, in.Value), Headers: in.Headers, Timestamp: in.Timestamp})
		return
	}
	closes := t.firstStart(ts) + t.size + t.grace
	seen := &c.seen[crc32.Checksum(group, castagnoli)%seenBuckets]
	if t.updates || !t.preaggregate || closes <= *seen {
		t.seal(out)
		out.Emit(pipeline.Output{To: t.store, Key: group, Value: t.encodeStaged(ts, vals, in.Value), Headers: in.Headers, Timestamp: in.Timestamp})
		return
	}
	if ts >= c.segClose || closes <= c.segMax {
		t.seal(out)
	}
	c.segMax, c.segClose, *seen = max(c.segMax, ts), min(c.segClose, closes), max(*seen, ts)
	pane := floorDiv(ts, t.pane) * t.pane
	groups := c.panes[pane]
	if groups == nil {
		groups = map[string]*partial{}
		c.panes[pane] = groups
	}
	p := groups[string(group)]
	if p == nil {
		p = &partial{group: string(group), ts: ts, acc: t.newAcc()}
		groups[p.group] = p
		c.order = append(c.order, p)
	}
	p.ts = max(p.ts, ts)
	if in.Timestamp.After(p.stamp) {
		p.stamp = in.Timestamp
	}
	t.foldInto(p.acc, vals)
	p.srcs = append(p.srcs, pipeline.Source{Topic: in.Topic, Partition: in.Partition, Offset: in.Offset})
}

// seal writes the held partials, in the order they were opened.
func (t *Aggregate) seal(out pipeline.Emitter) {
	for _, p := range t.comb.order {
		out.Emit(pipeline.Output{To: t.store, Key: []byte(p.group), Value: t.encodePartial(p), Timestamp: p.stamp})
	}
	t.comb.reset()
}

// Flush implements pipeline.Flusher: the held partials join the transaction
// about to commit, with the offsets of the records they stand for.
func (t *Aggregate) Flush(_ context.Context, out pipeline.Emitter) error {
	t.seal(out)
	return nil
}

// Discard implements pipeline.Flusher: the transaction will not commit, and
// its records come again.
func (t *Aggregate) Discard() {
	t.comb.reset()
	t.comb.forget()
}

// A partial's repartition value: version byte 2, the number of aggregations
// (1 byte), the largest event time (8 bytes), the accumulator, then its
// sources: the number of runs, and per run of one partition the topic
// (length, bytes), partition, count, first offset and the gaps to the next
// ones, all uvarints.
const partialVersion = 2

func (t *Aggregate) encodePartial(p *partial) []byte {
	slices.SortFunc(p.srcs, func(a, b pipeline.Source) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	b := make([]byte, 0, 10+len(p.acc)+8+2*len(p.srcs))
	b = append(b, partialVersion, byte(len(t.aggs)))
	b = binary.BigEndian.AppendUint64(b, uint64(p.ts))
	b = append(b, p.acc...)
	var runs []int // where each run starts
	for i, s := range p.srcs {
		if i == 0 || s.Topic != p.srcs[i-1].Topic || s.Partition != p.srcs[i-1].Partition {
			runs = append(runs, i)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(runs)))
	for r, from := range runs {
		to := len(p.srcs)
		if r+1 < len(runs) {
			to = runs[r+1]
		}
		run := p.srcs[from:to]
		b = binary.AppendUvarint(b, uint64(len(run[0].Topic)))
		b = append(b, run[0].Topic...)
		b = binary.AppendUvarint(b, uint64(run[0].Partition))
		b = binary.AppendUvarint(b, uint64(len(run)))
		prev := int64(0)
		for _, s := range run {
			b = binary.AppendUvarint(b, uint64(s.Offset-prev))
			prev = s.Offset
		}
	}
	return b
}

// decodePartial returns a partial's event time, accumulator (aliasing b)
// and the encoded sources, which only a late partial needs decoded.
func (t *Aggregate) decodePartial(b []byte) (ts int64, acc, srcs []byte, ok bool) {
	n := 10 + t.accLen()
	if len(b) < n || b[0] != partialVersion || int(b[1]) != len(t.aggs) {
		return 0, nil, nil, false
	}
	return int64(binary.BigEndian.Uint64(b[2:])), b[10:n], b[n:], true
}

func decodeSources(b []byte) ([]pipeline.Source, error) {
	bad := fmt.Errorf("the repartition record's sources are truncated")
	next := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	var srcs []pipeline.Source
	for runs := next(); runs > 0; runs-- {
		l := next()
		if uint64(len(b)) < l {
			return nil, bad
		}
		topic := string(b[:l])
		b = b[l:]
		partition := int32(next())
		offset := int64(0)
		for n := next(); n > 0; n-- {
			offset += int64(next())
			srcs = append(srcs, pipeline.Source{Topic: topic, Partition: partition, Offset: offset})
		}
		if b == nil {
			return nil, bad
		}
	}
	if len(srcs) == 0 {
		return nil, bad
	}
	return srcs, nil
}
