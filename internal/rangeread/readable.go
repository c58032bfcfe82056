package rangeread

import (
	"context"
	"errors"

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
// It reads the ranges with a Reader of its own (opts must reach the
// cluster and must not configure consuming), which counts markers towards
// the position, so a range that holds only markers is read through. A
// partition it could not decide before ctx ended is left out of the result.
func Readable(ctx context.Context, opts []kgo.Opt, ranges Ranges) (map[string]map[int32]bool, error) {
	r := NewReader(opts, Options{FetchMaxBytes: 1 << 20})
	defer r.Close()
	return r.Readable(ctx, ranges)
}

// Readable is the function Readable with the reader's client.
func (r *Reader) Readable(ctx context.Context, ranges Ranges) (map[string]map[int32]bool, error) {
	seen := map[string]map[int32]bool{}
	err := r.read(ctx, ranges, func(rec *kgo.Record) bool {
		if seen[rec.Topic] == nil {
			seen[rec.Topic] = map[int32]bool{}
		}
		seen[rec.Topic][rec.Partition] = true
		return true // one data record decides the partition
	})
	var short *ShortReadError
	if err != nil && !errors.As(err, &short) {
		return nil, err
	}
	undecided := map[string]map[int32]bool{}
	if short != nil {
		for _, p := range short.Partitions {
			if undecided[p.Topic] == nil {
				undecided[p.Topic] = map[int32]bool{}
			}
			undecided[p.Topic][p.Partition] = true
		}
	}
	out := map[string]map[int32]bool{}
	for t, ps := range ranges {
		out[t] = map[int32]bool{}
		for _, p := range ps {
			if !undecided[t][p.Partition] {
				out[t][p.Partition] = seen[t][p.Partition]
			}
		}
	}
	return out, nil
}
