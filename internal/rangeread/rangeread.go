// Package rangeread reads fixed offset ranges of partitions as a
// read_committed consumer sees them: the one bounded reader behind verify's
// judgments, the tests' reads of committed output, and a worker's restore
// of its state from changelogs.
//
// Knowing when a partition is done is the subtle part. Under
// read_committed the offsets just below a range's end may be commit or
// abort markers, which a consumer normally never sees, so waiting for a
// data record at End-1 could wait forever. The reader therefore keeps
// control records and counts them towards its position, while the caller
// never sees them. One case remains: if a transaction was still open when
// the range was listed, the offsets just below End can be data of an
// aborted transaction whose marker lies beyond End; kgo drops those
// silently. The partition then completes only when anything at or past End
// becomes visible (the open transaction's own marker, which the broker
// writes at the latest when the transaction times out). Records at or past
// End are never passed on, so the result is exactly the listed snapshot.
package rangeread

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionRange is the part of one partition a read covers: the offsets
// in [Start, End), both listed before the read began. It is the one range
// type of the house: package verify shows it as verify.PartitionRange.
type PartitionRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// Ranges are the ranges to read, by topic.
type Ranges map[string][]PartitionRange

// Add appends the range [start, end) of topic's partition p.
func (rs Ranges) Add(topic string, p int32, start, end int64) {
	rs[topic] = append(rs[topic], PartitionRange{Partition: p, Start: start, End: end})
}

// Options tune the reader; the zero value is kgo's defaults.
type Options struct {
	// FetchMaxPartitionBytes and FetchMaxBytes, if set, bound fetches (see
	// kgo's options of those names).
	FetchMaxPartitionBytes, FetchMaxBytes int32
	// Batch, if set, caps the records handled per poll.
	Batch int
	// AfterPoll, if set, is called after each poll with the number of
	// offsets read so far, control records included.
	AfterPoll func(read int64)
	// Uncommitted reads as a read_uncommitted consumer does, aborted
	// records included, for a caller that counts what the log holds up to
	// the high watermark (the fencing demo). Every judgment and restore
	// reads committed, the default.
	Uncommitted bool
}

// ShortReadError is returned when a read stopped, its context ended (at a
// timeout, say), before every partition reached the end listed for it.
// Package verify shows it as verify.ShortReadError.
type ShortReadError struct {
	Partitions []ShortPartition // sorted by topic and partition
	Err        error            // why the read stopped, e.g. context.DeadlineExceeded
}

// ShortPartition is a partition a read did not finish: everything before
// Position was read, Target is where it should have got to.
type ShortPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Position  int64  `json:"position"`
	Target    int64  `json:"target"`
}

// Error names every partition the read did not finish, where it stopped
// and where it should have got to, then why.
func (e *ShortReadError) Error() string {
	var b strings.Builder
	b.WriteString("read stopped short of the listed end:")
	for i, p := range e.Partitions {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s[%d] at offset %d of %d", p.Topic, p.Partition, p.Position, p.Target)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

// Unwrap returns why the read stopped.
func (e *ShortReadError) Unwrap() error { return e.Err }

// Read reads every range with a consumer of its own (opts, plus
// read_committed) and calls fn for each data record in a range, in offset
// order within each partition (partitions interleave arbitrarily). It
// joins no group and commits nothing. A fetch error kgo does not retry is
// returned as it is: for a judgment or a restore, a reset that re-reads
// records is as wrong as a gap. A caller that reads again and again keeps
// a Reader instead, which keeps its client.
func Read(ctx context.Context, opts []kgo.Opt, ranges Ranges, o Options, fn func(*kgo.Record)) error {
	r := NewReader(opts, o)
	defer r.Close()
	return r.Read(ctx, ranges, fn)
}

// Reader reads ranges as Read does, one read after another, with one
// client made on first use and kept until Close: a caller that reads
// often (a worker reading input records back to dead-letter them, a
// worker's readiness probe) would otherwise pay a new client and
// connection for each read. After a read that failed it starts over with
// a new client. A Reader is for one goroutine at a time.
type Reader struct {
	opts []kgo.Opt
	o    Options
	cl   *kgo.Client
}

// NewReader returns a Reader that reaches the cluster with opts (which
// must not configure consuming) and reads as o says.
func NewReader(opts []kgo.Opt, o Options) *Reader {
	return &Reader{opts: slices.Clip(opts), o: o}
}

// Close closes the reader's client, if it made one. A nil Reader is closed.
func (r *Reader) Close() {
	if r != nil && r.cl != nil {
		r.cl.Close()
		r.cl = nil
	}
}

// client returns the reader's client, made on first use.
func (r *Reader) client() (*kgo.Client, error) {
	if r.cl != nil {
		return r.cl, nil
	}
	isolation := kgo.ReadCommitted()
	if r.o.Uncommitted {
		isolation = kgo.ReadUncommitted()
	}
	copts := append(slices.Clip(r.opts),
		kgo.FetchIsolationLevel(isolation),
		kgo.KeepControlRecords(), // markers count towards the position
	)
	if r.o.FetchMaxPartitionBytes > 0 {
		copts = append(copts, kgo.FetchMaxPartitionBytes(r.o.FetchMaxPartitionBytes))
	}
	if r.o.FetchMaxBytes > 0 {
		copts = append(copts, kgo.FetchMaxBytes(r.o.FetchMaxBytes))
	}
	cl, err := kgo.NewClient(copts...)
	if err != nil {
		return nil, fmt.Errorf("creating a reader: %w", err)
	}
	r.cl = cl
	return cl, nil
}

// Admin returns an admin client on the reader's own client, for listing
// the offsets a read needs without a second connection.
func (r *Reader) Admin() (*kadm.Client, error) {
	cl, err := r.client()
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// Read reads ranges as the function Read does, with the reader's client.
func (r *Reader) Read(ctx context.Context, ranges Ranges, fn func(*kgo.Record)) error {
	return r.read(ctx, ranges, func(rec *kgo.Record) bool { fn(rec); return false })
}

// read is the one bounded-read loop: it calls fn for each data record in
// a range, and a partition is done when its position reaches its range's
// end or fn returns true for one of its records.
func (r *Reader) read(ctx context.Context, ranges Ranges, fn func(*kgo.Record) (done bool)) error {
	type state struct{ pos, end int64 }
	parts := map[string]map[int32]*state{}
	consume := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for t, ps := range ranges {
		for _, pr := range ps {
			if pr.End <= pr.Start {
				continue
			}
			if parts[t] == nil {
				parts[t], consume[t] = map[int32]*state{}, map[int32]kgo.Offset{}
			}
			parts[t][pr.Partition] = &state{pos: pr.Start, end: pr.End}
			consume[t][pr.Partition] = kgo.NewOffset().At(pr.Start)
			remaining++
		}
	}
	if remaining == 0 {
		return nil
	}
	cl, err := r.client()
	if err != nil {
		return err
	}
	cl.AddConsumePartitions(consume)
	failed := true
	defer func() {
		if failed {
			r.Close() // the next read starts over with a new client
			return
		}
		// Stop fetching the ranges' partitions, drop what was buffered
		// and lift the pauses: the next read starts where it needs to.
		stop := map[string][]int32{}
		for t, ps := range consume {
			for p := range ps {
				stop[t] = append(stop[t], p)
			}
		}
		cl.RemoveConsumePartitions(stop)
		cl.ResumeFetchPartitions(stop)
	}()

	var read int64
	for remaining > 0 {
		var fs kgo.Fetches
		if r.o.Batch > 0 {
			fs = cl.PollRecords(ctx, r.o.Batch)
		} else {
			fs = cl.PollFetches(ctx)
		}
		if ctx.Err() != nil {
			e := &ShortReadError{Err: ctx.Err()}
			for t, ps := range parts {
				for p, s := range ps {
					if s.pos < s.end {
						e.Partitions = append(e.Partitions, ShortPartition{t, p, s.pos, s.end})
					}
				}
			}
			slices.SortFunc(e.Partitions, func(a, b ShortPartition) int {
				return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
			})
			return e
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("reading %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			s := parts[fp.Topic][fp.Partition]
			if s == nil || s.pos >= s.end {
				return // buffered before the partition was paused
			}
			from := s.pos
			for _, rec := range fp.Records {
				if rec.Offset < s.pos {
					continue
				}
				if rec.Offset >= s.end {
					s.pos = s.end
					break
				}
				s.pos = rec.Offset + 1
				if !rec.Attrs.IsControl() && fn(rec) {
					s.pos = s.end
					break
				}
			}
			read += s.pos - from
			if s.pos >= s.end {
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{fp.Topic: {fp.Partition}})
			}
		})
		if r.o.AfterPoll != nil {
			r.o.AfterPoll(read)
		}
	}
	failed = false
	return nil
}

// Whole lists the ranges that hold everything of topic a consumer sees now:
// every partition from its log start to its last stable offset, or, with
// uncommitted (a read_uncommitted reader's view), to its high watermark.
// Both ends are listed before anything is read, so a read of the result is
// a snapshot: records written after it are not waited for.
func Whole(ctx context.Context, adm *kadm.Client, topic string, uncommitted bool) (Ranges, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		if uncommitted {
			ends, err = adm.ListEndOffsets(ctx, topic)
		} else {
			ends, err = adm.ListCommittedOffsets(ctx, topic)
		}
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing offsets of %s: %w", topic, err)
	}
	rs := Ranges{topic: nil}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		rs.Add(topic, o.Partition, s.Offset, o.Offset)
	})
	slices.SortFunc(rs[topic], func(a, b PartitionRange) int { return cmp.Compare(a.Partition, b.Partition) })
	return rs, nil
}
