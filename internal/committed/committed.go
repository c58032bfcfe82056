// Package committed reads what a read_committed consumer of a topic sees:
// every record of committed transactions (and non-transactional records), up
// to the last stable offset, in offset order within each partition. The
// topology tests use it to compare a pipeline's output with a reference.
package committed

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/eosctl/eos/internal/rangeread"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Read returns the records of topic a read_committed consumer sees, from the
// log start to the last stable offset listed when Read begins, by partition.
// Records of transactions still open then are not waited for. It joins no
// group and commits nothing.
func Read(ctx context.Context, opts []kgo.Opt, topic string) (map[int32][]*kgo.Record, error) {
	out := map[int32][]*kgo.Record{}
	err := Each(ctx, opts, topic, func(p int32) { out[p] = nil }, func(r *kgo.Record) {
		out[r.Partition] = append(out[r.Partition], r)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each is Read for a topic too large to hold: it calls partition with
// every partition of topic once they are listed, then fn with every record
// Read would return, in offset order within each partition, from one
// goroutine, keeping none.
func Each(ctx context.Context, opts []kgo.Opt, topic string, partition func(int32), fn func(*kgo.Record)) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("committed: creating client: %w", err)
	}
	rs, err := rangeread.Whole(ctx, kadm.NewClient(cl), topic, false)
	cl.Close()
	if err != nil {
		return fmt.Errorf("committed: %w", err)
	}
	for _, r := range rs[topic] {
		partition(r.Partition)
	}
	if err := rangeread.Read(ctx, opts, rs, rangeread.Options{}, fn); err != nil {
		return fmt.Errorf("committed: reading %s: %w", topic, err)
	}
	return nil
}

// Flatten returns the records of every partition, partition by partition.
func Flatten(byPartition map[int32][]*kgo.Record) []*kgo.Record {
	var out []*kgo.Record
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		out = append(out, byPartition[p]...)
	}
	return out
}

// CaughtUp reports whether group has consumed everything committed in
// topics and no transaction is still open or completing on them: for every
// partition the last stable offset is the high watermark, and the group's
// committed offset is at it, or everything between the two is transaction
// markers or aborted records (franz-go commits the offset after the last
// record it polled, never past the markers behind it, so a group caught up
// on a transactional topic, such as a repartition topic, can stay a marker
// or two short).
func CaughtUp(ctx context.Context, opts []kgo.Opt, group string, topics ...string) (bool, error) {
	return caughtUp(ctx, opts, Wait{Group: group, Topics: topics})
}

// Check is CaughtUp for everything w says (its Outputs too), once, without
// waiting: for a caller with a loop of its own. w.Within is not used.
func Check(ctx context.Context, opts []kgo.Opt, w Wait) (bool, error) {
	return caughtUp(ctx, opts, w)
}

func caughtUp(ctx context.Context, opts []kgo.Opt, w Wait) (bool, error) {
	group, topics := w.Group, w.Topics
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("committed: creating client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// The group's offsets are read first, the topics' offsets after. The
	// other order is a race: a transaction that consumes from one topic
	// and produces to another (a repartition stage) could write and
	// commit between the two reads, and the group looked caught up on
	// offsets listed before the transaction wrote, with its records in
	// the second topic unconsumed (the e2e aggregate test on Apache Kafka
	// stopped its worker before the heartbeats reached the windows, and
	// read none of 8,000). In this order, a transaction not committed
	// when the group's offsets are read has consumed past them, so the
	// topic it consumed lists records beyond them; one committed by then
	// shows its records, or a pending transaction, in the topics it
	// wrote.
	var offs kadm.OffsetResponses
	if len(topics) > 0 {
		offs, err = adm.FetchOffsetsForTopics(ctx, group, topics...)
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		offs, err = nil, nil // no commit yet: caught up only on empty topics
	}
	if err != nil {
		return false, fmt.Errorf("committed: fetching offsets of group %q: %w", group, err)
	}
	if w.afterGroupOffsets != nil {
		w.afterGroupOffsets()
	}
	// The outputs' offsets are listed with the inputs', after the group's:
	// a transaction whose offsets the group shows committed but whose
	// marker has not reached an output yet shows there as pending.
	all := append(slices.Clip(topics), w.Outputs...)
	lso, err := adm.ListCommittedOffsets(ctx, all...)
	if err == nil {
		err = listErr(lso, w.Outputs)
	}
	if err != nil {
		return false, fmt.Errorf("committed: listing last stable offsets of %v: %w", all, err)
	}
	// A transaction still completing is not caught up. On Apache Kafka a
	// commit is answered once it is prepared; its markers follow, and a
	// group's committed offsets can show before a repartition partition's
	// marker does: that partition's LSO then still sits before the
	// committed records, equal to the group's offset, and the group looked
	// caught up with work pending (the e2e aggregate test stopped its
	// workers with 6,920 of 8,000 windows unwritten). LSO below HWM means
	// a transaction is open or completing there. The end offsets are
	// listed after the last stable ones, so a transaction that writes
	// between the two shows as pending too.
	if !w.OpenTransactions {
		hwm, err := adm.ListEndOffsets(ctx, all...)
		if err == nil {
			err = listErr(hwm, w.Outputs)
		}
		if err != nil {
			return false, fmt.Errorf("committed: listing end offsets of %v: %w", all, err)
		}
		pending := false
		lso.Each(func(o kadm.ListedOffset) {
			if h, ok := hwm.Lookup(o.Topic, o.Partition); ok && o.Err == nil && h.Err == nil && h.Offset > o.Offset {
				pending = true
			}
		})
		if pending {
			return false, nil
		}
	}
	behind := rangeread.Ranges{}
	lso.Each(func(o kadm.ListedOffset) {
		if !slices.Contains(topics, o.Topic) {
			return // an output: the group does not consume it
		}
		at := int64(0)
		if r, ok := offs.Lookup(o.Topic, o.Partition); ok && r.Err == nil && r.At >= 0 {
			at = r.At
		}
		if at < o.Offset {
			behind.Add(o.Topic, o.Partition, at, o.Offset)
		}
	})
	if len(behind) == 0 {
		return true, nil
	}
	readable, err := rangeread.Readable(ctx, opts, behind)
	if err != nil {
		return false, err
	}
	for t, ps := range behind {
		for _, p := range ps {
			if r, ok := readable[t][p.Partition]; !ok || r {
				return false, nil
			}
		}
	}
	return true, nil
}

// listErr is the first error of a listing, except that an output that does
// not exist (yet: a dead-letter topic is made on the first dead letter) has
// no transaction open on it.
func listErr(l kadm.ListedOffsets, outputs []string) error {
	var first error
	l.Each(func(o kadm.ListedOffset) {
		if o.Err == nil || first != nil || (slices.Contains(outputs, o.Topic) && errors.Is(o.Err, kerr.UnknownTopicOrPartition)) {
			return
		}
		first = fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err)
	})
	return first
}

// WaitSettled waits, for up to within, until no transaction is open or
// completing on topics (last stable offset at the high watermark): for a
// judge about to read what stopped workers wrote, whose last commit's
// markers may still be on their way. It joins no group.
func WaitSettled(ctx context.Context, opts []kgo.Opt, within time.Duration, topics ...string) error {
	return WaitCaughtUp(ctx, opts, Wait{Outputs: topics, Within: within})
}

// Wait says what WaitCaughtUp waits for.
type Wait struct {
	Group  string
	Topics []string
	Within time.Duration // how long to wait at most
	// OpenTransactions counts the group as caught up while transactions
	// are still open on Topics, once it has consumed everything up to
	// the last stable offset: for a drill that leaves a transaction
	// hanging on purpose. By default an open or completing transaction
	// means not caught up.
	OpenTransactions bool
	// Outputs are topics the group writes and does not consume. Caught
	// up also needs every transaction on them finished (last stable
	// offset at the high watermark), so that a read of them after the
	// wait sees the group's last commit: on Apache Kafka a commit's
	// markers reach its partitions independently, and the group's
	// offsets can show committed before an output's marker lands (the
	// topologies test stopped its worker and read the output 32 windows
	// short, the last transaction's). OpenTransactions waives this too.
	Outputs []string

	// UnknownGroupAfter, if positive, bounds how long Group may stay
	// unknown to the cluster (not listed by ListGroups: no member has
	// joined it and it holds no committed offsets) before WaitCaughtUp
	// fails with ErrUnknownGroup instead of waiting out Within: a
	// mistyped group never catches up. It is a grace, not zero, because
	// a worker started just before or after the wait has not joined yet.
	// Zero waits for the group for all of Within.
	UnknownGroupAfter time.Duration
	// UnknownGroup, if set with UnknownGroupAfter, is called once, as
	// soon as the group is found unknown: a command says so at once
	// rather than only when the grace is over.
	UnknownGroup func()

	// Poll is how often the wait looks; zero means every 50ms.
	Poll time.Duration
	// Each, if set, runs after every look that did not find the group
	// caught up: a caller's progress report, or its check that the
	// workers it waits for are still alive. An error from it ends the
	// wait with that error.
	Each func() error

	// afterGroupOffsets, if set, runs between reading the group's
	// offsets and the topics': a test's way into the race that order
	// closes.
	afterGroupOffsets func()
}

// ErrUnknownGroup is WaitCaughtUp's error when Wait.Group stayed unknown to
// the cluster for Wait.UnknownGroupAfter.
var ErrUnknownGroup = errors.New("does not exist")

// groupListed reports whether the cluster lists group, in any state and of
// any protocol: a group exists from its first member's join or its first
// offset commit.
func groupListed(ctx context.Context, opts []kgo.Opt, group string) (bool, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("committed: creating client: %w", err)
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListGroups(ctx)
	if err != nil {
		return false, fmt.Errorf("committed: listing groups: %w", err)
	}
	_, ok := listed[group]
	return ok, nil
}

// WaitCaughtUp polls until w.Group has consumed everything committed in
// w.Topics (see [CaughtUp]), for up to w.Within, and says on timeout where
// it stood; with w.UnknownGroupAfter it fails sooner, with ErrUnknownGroup,
// for a group nobody joins. It is the one wait every caller uses: a lag of
// zero against the last stable offset alone may never come on a repartition
// topic (a group stays a marker short), and may come too early on Apache
// Kafka, whose group offsets can show before a partition's commit marker.
func WaitCaughtUp(ctx context.Context, opts []kgo.Opt, w Wait) error {
	start := time.Now()
	deadline := start.Add(w.Within)
	known := w.Group == "" || w.UnknownGroupAfter <= 0 // no need to look
	told := false                                      // UnknownGroup was called
	what := fmt.Sprintf("group %s did not catch up on %v", w.Group, w.Topics)
	switch {
	case len(w.Topics) == 0:
		what = fmt.Sprintf("transactions on %v did not finish", w.Outputs)
	case len(w.Outputs) > 0 && !w.OpenTransactions:
		what += fmt.Sprintf(" with no transaction left open on %v", w.Outputs)
	}
	for {
		ok, err := caughtUp(ctx, opts, w)
		if err == nil && ok {
			return nil
		}
		if !known {
			var lerr error
			if known, lerr = groupListed(ctx, opts, w.Group); lerr == nil && !known {
				if time.Since(start) >= w.UnknownGroupAfter {
					return fmt.Errorf("committed: group %q %w after %s: no member has joined it and it has committed no offsets", w.Group, ErrUnknownGroup, w.UnknownGroupAfter)
				}
				if w.UnknownGroup != nil && !told {
					told = true
					w.UnknownGroup()
				}
			}
		}
		if w.Each != nil {
			if err := w.Each(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("committed: %s within %s: %w", what, w.Within, err)
			}
			return fmt.Errorf("committed: %s within %s", what, w.Within)
		}
		poll := w.Poll
		if poll <= 0 {
			poll = 50 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("committed: waiting for group %s to catch up on %v: %w", w.Group, w.Topics, ctx.Err())
		case <-time.After(poll):
		}
	}
}
