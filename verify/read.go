package verify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eosctl/eos/internal/rangeread"
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

// Error names every partition the read did not finish, where it stopped
// and where it should have got to, then why.
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

// Unwrap returns why the read stopped (e.g. context.DeadlineExceeded).
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
// of its own (internal/rangeread, which says how a range's end is found
// under markers and open transactions), calling fn for each data record,
// in offset order within each partition. It returns a *ShortReadError if
// ctx ends first.
func readRanges(ctx context.Context, opts []kgo.Opt, topic string, ranges []PartitionRange, fn func(*kgo.Record)) error {
	rs := rangeread.Ranges{topic: {}}
	for _, r := range ranges {
		rs[topic][r.Partition] = rangeread.Span{Start: r.Start, End: r.End}
	}
	err := rangeread.Read(ctx, opts, rs, rangeread.Options{}, fn)
	var short *rangeread.ShortError
	if errors.As(err, &short) {
		e := &ShortReadError{Topic: topic, Err: short.Err}
		for _, u := range short.Unread {
			e.Partitions = append(e.Partitions, ShortPartition{u.Partition, u.At, u.End})
		}
		return e
	}
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	return nil
}
