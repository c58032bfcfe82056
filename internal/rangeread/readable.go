package rangeread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Readable reports, for each partition's range, whether a read_committed
// consumer would get any record from it: a record that is neither a
// transaction marker nor part of an aborted transaction.
//
// Why it is needed: franz-go, and so an eos worker, commits the offset
// after the last record it polled, never past the markers behind it. A
// group fully caught up on transactional input therefore stays an offset
// or so (the last commit marker) short of the LSO, with a lag of 1 and
// nothing to read; Readable tells that apart from a record waiting.
//
// It reads the ranges with its own client (opts must reach the cluster and
// must not configure consuming), keeping control records so it can see
// through a range that holds only markers. A partition it could not decide
// before ctx ended is left out of the result.
func Readable(ctx context.Context, opts []kgo.Opt, ranges Ranges) (map[string]map[int32]bool, error) {
	out := map[string]map[int32]bool{}
	start := map[string]map[int32]kgo.Offset{}
	left := 0
	end := map[string]map[int32]int64{}
	for t, ps := range ranges {
		for _, r := range ps {
			if out[t] == nil {
				out[t], start[t], end[t] = map[int32]bool{}, map[int32]kgo.Offset{}, map[int32]int64{}
			}
			if r.End <= r.Start {
				out[t][r.Partition] = false
				continue
			}
			start[t][r.Partition] = kgo.NewOffset().At(r.Start)
			end[t][r.Partition] = r.End
			left++
		}
	}
	if left == 0 {
		return out, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...),
		kgo.ConsumePartitions(start), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(1<<20), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return nil, fmt.Errorf("creating a reader: %w", err)
	}
	defer cl.Close()
	for left > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(rec *kgo.Record) {
			e, ok := end[rec.Topic][rec.Partition]
			if _, decided := out[rec.Topic][rec.Partition]; !ok || decided {
				return
			}
			switch {
			case rec.Offset >= e:
				out[rec.Topic][rec.Partition] = false // read through: markers only
			case !rec.Attrs.IsControl():
				out[rec.Topic][rec.Partition] = true
			case rec.Offset == e-1:
				out[rec.Topic][rec.Partition] = false
			default:
				return
			}
			left--
			cl.PauseFetchPartitions(map[string][]int32{rec.Topic: {rec.Partition}})
		})
	}
	return out, nil
}
