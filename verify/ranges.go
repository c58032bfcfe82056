package verify

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Snapshot lists topic's partitions with the offsets a read_committed read
// of all of it must cover: from the log start offset to the last stable
// offset, both as of now. Other readers of a topic against a table
// (eosctl reconcile) take their watermark from it.
func Snapshot(ctx context.Context, adm *kadm.Client, topic string) ([]PartitionRange, error) {
	m, err := snapshot(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	return m[topic], nil
}

// ReadRanges reads the given ranges of topic with read_committed, calling
// fn for each data record in offset order within each partition, and stops
// at each range's End even when the records below it are transaction
// markers (see readRanges). It returns a *ShortReadError if ctx ends first.
func ReadRanges(ctx context.Context, opts []kgo.Opt, topic string, ranges []PartitionRange, fn func(*kgo.Record)) error {
	return readRanges(ctx, opts, topic, ranges, fn)
}
