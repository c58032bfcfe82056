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
// offset, both listed before the read began. It is the one range type of
// the house, shared with the reader behind every bounded read.
type PartitionRange = rangeread.PartitionRange

// ShortReadError is returned when a read stopped, usually at Config.Timeout,
// before every partition reached the end listed when it began. Its
// Partitions name each partition not finished (topic, partition, where the
// read stopped and where it should have got to); it unwraps to why the
// read stopped, e.g. context.DeadlineExceeded.
type ShortReadError = rangeread.ShortReadError

// ShortPartition is a partition a read did not finish: everything before
// Position was read, Target is where it should have got to.
type ShortPartition = rangeread.ShortPartition

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
	if err := rangeread.Read(ctx, opts, rangeread.Ranges{topic: ranges}, rangeread.Options{}, fn); err != nil {
		return fmt.Errorf("verify: reading %s: %w", topic, err)
	}
	return nil
}
