package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupLag returns how many records of topics the group has not committed
// yet, measured against the last stable offset (LSO) as a read_committed
// consumer sees it: the sum over partitions of LSO minus the committed offset
// (a partition with no commit counts from its start, 0). Control markers
// count as records, so a fully caught-up group has lag 0 even on
// transactional input.
func GroupLag(ctx context.Context, cl *kgo.Client, group string, topics ...string) (int64, error) {
	adm := kadm.NewClient(cl)
	lso, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = lso.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing last stable offsets of %v: %w", topics, err)
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if err != nil {
		return 0, fmt.Errorf("fetching committed offsets of group %q: %w", group, err)
	}
	var lag int64
	lso.Each(func(o kadm.ListedOffset) {
		c := int64(0)
		if r, ok := committed.Lookup(o.Topic, o.Partition); ok && r.Err == nil && r.At >= 0 {
			c = r.At
		}
		lag += max(o.Offset-c, 0)
	})
	return lag, nil
}

// EndOffsetSum returns the sum of the high watermarks of topics' partitions:
// how many offsets have been written, committed or not.
func EndOffsetSum(ctx context.Context, cl *kgo.Client, topics ...string) (int64, error) {
	hw, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err == nil {
		err = hw.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("listing end offsets of %v: %w", topics, err)
	}
	var sum int64
	hw.Each(func(o kadm.ListedOffset) { sum += o.Offset })
	return sum, nil
}
