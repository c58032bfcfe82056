package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eosctl/eos/internal/rangeread"
	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Restoring state on assignment
//
// State is restored synchronously inside kgo's OnPartitionsAssigned callback,
// by a consumer of its own that reads each assigned partition's changelog
// with read_committed, from the log start to the end. kgo calls that
// callback after the group assigned the partitions and before it fetches
// their committed offsets, and it starts fetching records only after that,
// so no record of a partition is ever processed before its state is there.
// The alternatives are worse here: BlockRebalanceOnPoll would stall the
// partitions the worker keeps for the whole restore, and pausing partitions
// with an asynchronous restore adds a second source of truth about which
// partitions are ready, for no gain (the group's heartbeat keeps running
// during the callback either way). The cost: a restore must finish within
// the group's rebalance timeout (kgo's default, 60s) if another rebalance
// starts meanwhile; a compacted changelog holds one record per live key, so
// that is tens of millions of keys at the restore rates in BENCHMARKS.md.
//
// "The end" must be chosen with care. The previous owner of a partition may
// still have a transaction open that wrote to the changelog and committed
// offsets (it aborts or commits when its own End runs), and the offset fetch
// that follows this callback waits for such a transaction (RequireStable).
// Reading only up to the last stable offset at that moment could miss
// changes whose offsets the consumer then resumes after. The restore
// therefore first waits until the changelog has no open transaction at all
// (last stable offset = high watermark), then reads to that offset: every
// transaction below it is decided, and nothing but this worker writes to the
// partition from now on (a zombie's writes abort: its offset commit fails
// the generation check).

// restore restores the state of the given partitions of the state topic and
// publishes it. It runs in the OnPartitionsAssigned callback; ctx is the
// client's, canceled when the session closes. A failure is recorded for the
// worker, which then reopens its session and restores again.
func (w *Worker) restore(ctx context.Context, parts []int32) {
	set := w.state
	if set == nil || len(parts) == 0 {
		return
	}
	slices.Sort(parts)
	start := time.Now()
	ev := func(kind EventKind, records int64) Event {
		ps := map[string][]int32{}
		for _, c := range set.changelogs {
			ps[c] = parts
		}
		return Event{Kind: kind, Partitions: ps, Records: int(records), Duration: time.Since(start)}
	}
	states, n, err := w.readChangelogs(ctx, parts, func(remaining int64) { w.emit(ev(EventRestoring, remaining)) })
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("restoring state failed; the worker reopens its session and restores again", "partitions", parts, "err", err)
			set.fail(err)
		}
		return
	}
	set.publish(states)
	w.test.restored(states)
	d := time.Since(start)
	w.log.Info("state restored", "stores", set.names, "partitions", parts, "records", n, "duration", d.Round(time.Millisecond),
		"records_per_sec", int64(float64(n)/max(d.Seconds(), 1e-9)))
	w.emit(ev(EventRestored, n))
}

// readChangelogs waits until the changelog partitions are stable, then reads
// them into fresh partition states. progress is called with the number of
// records still to read once it is known, then every second.
func (w *Worker) readChangelogs(ctx context.Context, parts []int32, progress func(remaining int64)) (map[int32]*partitionState, int64, error) {
	set := w.state
	ranges, err := w.stableRanges(ctx, parts)
	if err != nil {
		return nil, 0, err
	}
	var total int64
	rs := rangeread.Ranges{}
	for t, ps := range ranges {
		for p, r := range ps {
			total += r[1] - r[0]
			rs.Add(t, p, r[0], r[1])
		}
	}
	progress(total)
	states := map[int32]*partitionState{}
	for _, p := range parts {
		states[p] = set.newPartition(p)
	}
	storeIdx := map[string]int{}
	for i, c := range set.changelogs {
		storeIdx[c] = i
	}
	perPartition, perFetch := restoreFetchBytes(len(parts) * len(set.changelogs))
	var applied, counted int64
	lastLog := time.Now()
	err = rangeread.Read(ctx, w.cfg.ClientOpts, rs, rangeread.Options{
		FetchMaxPartitionBytes: perPartition, FetchMaxBytes: perFetch, Batch: 50_000,
		AfterPoll: func(read int64) { // read counts offsets, control records included, like total
			w.stats.Restored.Add(applied - counted) // live, for a restore-rate metric
			counted = applied
			if time.Since(lastLog) >= time.Second {
				lastLog = time.Now()
				w.log.Info("restoring state", "stores", set.names, "partitions", parts, "restored", applied, "of", total)
				progress(total - read)
			}
		},
	}, func(r *kgo.Record) {
		st := states[r.Partition].stores[storeIdx[r.Topic]]
		if r.Value == nil {
			delete(st.m, string(r.Key))
		} else {
			st.m[string(r.Key)] = bytes.Clone(r.Value)
		}
		applied++
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, ctx.Err()
		}
		return nil, 0, fmt.Errorf("reading the changelogs: %w", err)
	}
	return states, applied, nil
}

// restoreFetchBytes sizes the restore consumer's fetches for n changelog
// partitions: up to 16 MiB a partition, and, for up to 512 partitions, room
// in every response for all of them at that size. The room matters on the
// embedded broker: kfake leaves out a partition's aborted transactions when
// a response reaches its byte limit in the middle of that partition
// (docs/kfake-defects.md), and a restore that read an aborted change would
// restore it. Kafka has no such problem; the sizes suit it too.
func restoreFetchBytes(n int) (perPartition, perFetch int32) {
	const most = 512 << 20 // a response, at the most
	n = max(n, 1)
	per := min(int64(16<<20), max(most/int64(n), 1<<20))
	return int32(per), int32(min(per*int64(n), most))
}

// stableRanges waits until none of the changelog partitions has an open
// transaction (see the comment at the top of this file) and returns, by
// topic and partition, the offsets [log start, end) to read.
func (w *Worker) stableRanges(ctx context.Context, parts []int32) (map[string]map[int32][2]int64, error) {
	cl, err := kgo.NewClient(w.cfg.ClientOpts...)
	if err != nil {
		return nil, fmt.Errorf("creating the restore client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	set := w.state
	waitingSince := time.Now()
	lastLog := waitingSince
	var failingSince time.Time
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
		out, unstable, err := listRanges(ctx, adm, set.changelogs, parts)
		switch {
		case err != nil && !retryListing(ctx, err):
			return nil, err
		case err != nil:
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			if time.Since(failingSince) > restoreListRetry {
				return nil, fmt.Errorf("%w (retried for %s)", err, restoreListRetry)
			}
			if time.Since(lastLog) >= 2*time.Second {
				lastLog = time.Now()
				w.log.Info("listing the changelog's offsets failed; retrying before giving the restore up", "partitions", parts, "err", err, "retrying_for", time.Since(failingSince).Round(time.Millisecond))
			}
		case unstable == "":
			return out, nil
		default:
			failingSince = time.Time{}
			if time.Since(lastLog) >= 5*time.Second {
				lastLog = time.Now()
				w.log.Info("waiting for an open transaction on the changelog to finish before restoring", "partition", unstable, "waited", time.Since(waitingSince).Round(time.Second))
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// restoreListRetry bounds how long a restore retries listing the
// changelog's offsets before it fails, and the worker reopens its session
// to restore again. A partition whose leader was just lost answers with a
// dial error or NOT_LEADER_OR_FOLLOWER until the controller elects another
// (on Apache Kafka about 10s after a SIGKILL, when the dead node's session
// expires); failing at once turned each such election into a burst of
// producer re-initialisations, one every few hundred milliseconds. The
// retries run inside the assignment callback, which may take up to the
// rebalance timeout (kgo's default, 60s) with the heartbeat running.
const restoreListRetry = 20 * time.Second

// errChangelogPartitions marks a changelog that lacks a partition of the
// state topic: a layout error no retry fixes.
var errChangelogPartitions = errors.New("changelog partitions do not match the state topic's")

// retryListing reports whether a failed listing of the changelog's offsets
// may succeed if tried again: not when ctx has ended, the layout is wrong
// or the principal is not authorized.
func retryListing(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, errChangelogPartitions) {
		return false
	}
	c := txn.Classify(err)
	return c != txn.Auth && c != txn.Fatal
}

// listRanges lists [log start, high watermark) of every changelog partition
// in parts, and names one whose last stable offset is below its high
// watermark, if any.
func listRanges(ctx context.Context, adm *kadm.Client, topics []string, parts []int32) (map[string]map[int32][2]int64, string, error) {
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, "", fmt.Errorf("listing start offsets of %v: %w", topics, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, "", fmt.Errorf("listing end offsets of %v: %w", topics, err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, "", fmt.Errorf("listing last stable offsets of %v: %w", topics, err)
	}
	out := map[string]map[int32][2]int64{}
	unstable := ""
	for _, t := range topics {
		out[t] = map[int32][2]int64{}
		for _, p := range parts {
			s, ok1 := starts.Lookup(t, p)
			e, ok2 := ends.Lookup(t, p)
			l, ok3 := stable.Lookup(t, p)
			if !ok1 || !ok2 || !ok3 {
				return nil, "", fmt.Errorf("changelog %s has no partition %d: it must have as many partitions as the state topic: %w", t, p, errChangelogPartitions)
			}
			if l.Offset < e.Offset && unstable == "" {
				unstable = fmt.Sprintf("%s[%d]", t, p)
			}
			out[t][p] = [2]int64{s.Offset, e.Offset}
		}
	}
	return out, unstable, nil
}
