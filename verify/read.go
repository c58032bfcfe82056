package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionRange is the part of one partition a read covers: the offsets in
// [Start, End), where Start is the log start offset and End the last stable
// offset, both listed before the read began.
type PartitionRange struct {
	Partition int32 `json:"partition"`
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
}

// ShortReadError is returned when a read stopped, usually at Config.Timeout,
// before every partition reached the end listed when it began.
type ShortReadError struct {
	Topic      string
	Partitions []ShortPartition // sorted by partition
	Err        error            // why the read stopped, e.g. context.DeadlineExceeded
}

// ShortPartition is a partition a read did not finish: everything before
// Position was read, Target is where it should have got to.
type ShortPartition struct {
	Partition int32 `json:"partition"`
	Position  int64 `json:"position"`
	Target    int64 `json:"target"`
}

func (e *ShortReadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verify: reading %s stopped short of the last stable offset:", e.Topic)
	for i, p := range e.Partitions {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %s[%d] at offset %d of %d", e.Topic, p.Partition, p.Position, p.Target)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *ShortReadError) Unwrap() error { return e.Err }

// snapshot lists, for each topic, the offsets a read of it must cover. The
// end is the last stable offset (what a read_committed consumer can reach),
// not the high watermark, which may sit past records of transactions that
// are still open and that a read_committed consumer will never be given.
//
// A missing topic is an error wrapping kerr.UnknownTopicOrPartition.
func snapshot(ctx context.Context, adm *kadm.Client, topics ...string) (map[string][]PartitionRange, error) {
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("verify: listing last stable offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("verify: listing start offsets of %s: %w", strings.Join(topics, ", "), err)
	}
	out := make(map[string][]PartitionRange, len(topics))
	for _, t := range topics {
		ps, ok := ends[t]
		if !ok {
			return nil, fmt.Errorf("verify: topic %q does not exist: %w", t, kerr.UnknownTopicOrPartition)
		}
		var rs []PartitionRange
		for p, lo := range ps {
			if lo.Err != nil {
				if errors.Is(lo.Err, kerr.UnknownTopicOrPartition) {
					return nil, fmt.Errorf("verify: topic %q does not exist: %w", t, lo.Err)
				}
				return nil, fmt.Errorf("verify: listing last stable offset of %s[%d]: %w", t, p, lo.Err)
			}
			so, ok := starts.Lookup(t, p)
			if !ok || so.Err != nil {
				return nil, fmt.Errorf("verify: listing start offset of %s[%d]: %w", t, p, cmp.Or(so.Err, error(kerr.UnknownTopicOrPartition)))
			}
			rs = append(rs, PartitionRange{Partition: p, Start: so.Offset, End: lo.Offset})
		}
		slices.SortFunc(rs, func(a, b PartitionRange) int { return int(a.Partition - b.Partition) })
		out[t] = rs
	}
	return out, nil
}

// readRanges reads the given ranges of topic with a read_committed consumer
// of its own, calling fn for each data record, in offset order within each
// partition (partitions interleave arbitrarily).
//
// Knowing when a partition is done is the subtle part. Under read_committed
// the records just below the last stable offset may be commit or abort
// markers, which a consumer normally never sees, so waiting for a data record
// at End-1 could wait forever. The consumer therefore keeps control records
// and counts them towards its position, while fn never sees them. One case
// remains: if transactions were still open when the range was listed, the
// offsets just below End can be data of an aborted transaction whose marker
// lies beyond End; kgo drops those silently. The partition then completes
// only when anything at or past End becomes visible — the open transaction's
// own marker, for instance, which the broker writes at the latest when the
// transaction times out. Records at or past End are never passed to fn, so
// the result is exactly the snapshot that was listed.
func readRanges(ctx context.Context, opts []kgo.Opt, topic string, ranges []PartitionRange, fn func(*kgo.Record)) error {
	type state struct{ pos, end int64 }
	parts := make(map[int32]*state)
	consume := make(map[int32]kgo.Offset)
	for _, r := range ranges {
		if r.End > r.Start {
			parts[r.Partition] = &state{pos: r.Start, end: r.End}
			consume[r.Partition] = kgo.NewOffset().AtStart()
		}
	}
	if len(parts) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clip(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return fmt.Errorf("verify: creating consumer for %s: %w", topic, err)
	}
	defer cl.Close()

	for remaining := len(parts); remaining > 0; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			e := &ShortReadError{Topic: topic, Err: ctx.Err()}
			for p, s := range parts {
				if s.pos < s.end {
					e.Partitions = append(e.Partitions, ShortPartition{p, s.pos, s.end})
				}
			}
			slices.SortFunc(e.Partitions, func(a, b ShortPartition) int { return int(a.Partition - b.Partition) })
			return e
		}
		// kgo retries what can be retried; what reaches us is fatal for
		// a judgment (including data loss: a reset would re-read records).
		if err := fetchErr(fs); err != nil {
			return err
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			s := parts[fp.Partition]
			if s == nil || s.pos >= s.end {
				return // buffered before the partition was paused
			}
			for _, r := range fp.Records {
				if r.Offset < s.pos {
					continue
				}
				s.pos = r.Offset + 1
				if r.Offset >= s.end {
					break
				}
				if !r.Attrs.IsControl() {
					fn(r)
				}
			}
			if s.pos >= s.end {
				remaining--
				cl.PauseFetchPartitions(map[string][]int32{topic: {fp.Partition}})
			}
		})
	}
	return nil
}

// fetchErr returns the first error in fs, naming its partition.
func fetchErr(fs kgo.Fetches) error {
	var first error
	fs.EachError(func(t string, p int32, err error) {
		if first == nil {
			first = fmt.Errorf("verify: reading %s[%d]: %w", t, p, err)
		}
	})
	return first
}
