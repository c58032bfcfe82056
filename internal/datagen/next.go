package datagen

import (
	"context"
	"fmt"
	"strconv"

	"github.com/eosctl/eos/internal/rangeread"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tailOffsets is how many offsets at the end of each partition NextKey
// reads. One is enough for a topic only Produce wrote (its records are not
// transactional, so the last offset is a record); the margin covers a few
// transaction markers or foreign records after the last datagen record.
const tailOffsets = 64

// NextKey returns the key Produce continues with on topic: one past the
// highest decimal key among the last records of its partitions, or 0 if the
// topic is missing, empty, or holds no decimal key there.
//
// Produce writes keys in ascending order and the default partitioner keeps
// each partition's records in that order, so the highest key of a topic
// sits among its partitions' last records; reading only those keeps a
// second Produce into a topic of millions of records instant. Keys lower
// than that highest one which are absent (an interrupted Produce whose
// buffered records were canceled) stay absent: they are gaps in the input,
// not losses, since verify judges the output against the input it reads.
func NextKey(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	spans, err := tail(ctx, kadm.NewClient(cl), topic)
	if err != nil {
		return 0, fmt.Errorf("datagen: %w", err)
	}
	next := int64(0)
	err = rangeread.Read(ctx, cl.Opts(), spans, rangeread.Options{}, func(r *kgo.Record) {
		if k, err := strconv.ParseInt(string(r.Key), 10, 64); err == nil && k >= next {
			next = k + 1
		}
	})
	if err != nil {
		return 0, fmt.Errorf("datagen: reading the last records of %s for the key to continue from: %w", topic, err)
	}
	return next, nil
}

// tail lists the last tailOffsets offsets of each partition of topic that
// holds any.
func tail(ctx context.Context, adm *kadm.Client, topic string) (rangeread.Ranges, error) {
	spans, err := rangeread.Whole(ctx, adm, topic, false)
	if err != nil {
		return nil, err
	}
	out := rangeread.Ranges{}
	for _, s := range spans[topic] {
		if s.End > s.Start {
			out.Add(topic, s.Partition, max(s.Start, s.End-tailOffsets), s.End)
		}
	}
	return out, nil
}
