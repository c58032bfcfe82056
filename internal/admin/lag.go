package admin

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
