// Package inspect reads what an operator of exactly-once pipelines, or a tool
// of theirs (eosctl lag and txn, package metrics), needs to see in a cluster: per-partition offsets measured the way read_committed
// consumers experience them (log start, last stable offset, high watermark),
// consumer group lag against the last stable offset, the open transactions
// on partitions, and the hanging ones among them; and it runs the two
// repairs KIP-664 gives an operator: writing an abort marker for a hanging
// transaction, and fencing a transactional.id.
//
// Why the last stable offset: under read_committed a consumer reads only up
// to the LSO, the first offset of the oldest transaction still open on the
// partition. One open or hanging transaction stops the LSO, and every
// read_committed consumer behind it, while the high watermark keeps moving;
// lag measured against the HWM (what most exporters report) hides exactly
// that failure. Everything here reports both numbers: LAG = LSO - committed
// (what the group can read but has not committed) and UNSTABLE = HWM - LSO
// (what nobody reading read_committed can see yet).
//
// Every function takes a *kadm.Client and makes a bounded number of admin
// requests; none of them is meant for a hot path.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionOffsets are one partition's offsets, read at about the same time.
type PartitionOffsets struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Start is the log start offset: the first offset still stored.
	Start int64 `json:"log_start_offset"`
	// LSO is the last stable offset: a read_committed consumer reads up to
	// it. It equals HWM unless a transaction is open on the partition.
	LSO int64 `json:"last_stable_offset"`
	// HWM is the high watermark: the end of the replicated log.
	HWM int64 `json:"high_watermark"`
}

// Unstable returns HWM - LSO: how many offsets read_committed consumers
// cannot see yet because a transaction is open (or hanging) on the
// partition.
func (o PartitionOffsets) Unstable() int64 { return max(o.HWM-o.LSO, 0) }

// Offsets holds PartitionOffsets by topic and partition.
type Offsets map[string]map[int32]PartitionOffsets

// Lookup returns the offsets of topic's partition p.
func (os Offsets) Lookup(topic string, p int32) (PartitionOffsets, bool) {
	o, ok := os[topic][p]
	return o, ok
}

// Sorted returns every partition's offsets ordered by topic and partition.
func (os Offsets) Sorted() []PartitionOffsets {
	var out []PartitionOffsets
	for _, ps := range os {
		for _, o := range ps {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b PartitionOffsets) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}

// Topics returns the topics held, sorted.
func (os Offsets) Topics() []string {
	var ts []string
	for t := range os {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// ReadOffsets lists the log start offset, the last stable offset and the
// high watermark of every partition of topics (three ListOffsets rounds:
// earliest, read_committed latest, read_uncommitted latest). A topic that
// does not exist is an error wrapping eos.ErrNoTopic; any partition error
// (no leader, not authorized) fails the whole read, naming the partition,
// rather than returning numbers that silently leave it out.
func ReadOffsets(ctx context.Context, adm *kadm.Client, topics ...string) (Offsets, error) {
	if len(topics) == 0 {
		return Offsets{}, nil
	}
	start, err := adm.ListStartOffsets(ctx, topics...)
	if err := listedErr("log start offsets", topics, start, err); err != nil {
		return nil, err
	}
	lso, err := adm.ListCommittedOffsets(ctx, topics...)
	if err := listedErr("last stable offsets", topics, lso, err); err != nil {
		return nil, err
	}
	hwm, err := adm.ListEndOffsets(ctx, topics...)
	if err := listedErr("high watermarks", topics, hwm, err); err != nil {
		return nil, err
	}
	out := make(Offsets)
	var missing error
	hwm.Each(func(h kadm.ListedOffset) {
		l, lok := lso.Lookup(h.Topic, h.Partition)
		s, sok := start.Lookup(h.Topic, h.Partition)
		if !lok || !sok {
			// The partition count changed between the rounds.
			missing = fmt.Errorf("partition %s[%d] appeared while its offsets were read; retry", h.Topic, h.Partition)
			return
		}
		if out[h.Topic] == nil {
			out[h.Topic] = make(map[int32]PartitionOffsets)
		}
		out[h.Topic][h.Partition] = PartitionOffsets{
			Topic: h.Topic, Partition: h.Partition,
			Start: s.Offset, LSO: min(l.Offset, h.Offset), HWM: h.Offset,
		}
	})
	if missing != nil {
		return nil, missing
	}
	return out, nil
}

// listedErr turns a kadm listing's request error or first partition error
// into one error naming what was listed and where it failed.
func listedErr(what string, topics []string, l kadm.ListedOffsets, err error) error {
	if err != nil {
		return fmt.Errorf("listing %s of %s: %w", what, strings.Join(topics, ","), err)
	}
	for _, t := range topics {
		for p, o := range l[t] {
			if o.Err == nil {
				continue
			}
			if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("topic %q: %w", t, eos.ErrNoTopic)
			}
			if p < 0 {
				return fmt.Errorf("listing %s of topic %q: %w", what, t, o.Err)
			}
			return fmt.Errorf("listing %s of %s[%d]: %w", what, t, p, o.Err)
		}
	}
	return nil
}
