package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/eosctl/eos/pipeline"
)

// runLog collects the events of one run's copiers.
type runLog struct {
	mu       sync.Mutex
	commits  []pipeline.Event
	consumed int64
	aborted  int
	reinits  int
	failure  error
	changed  chan struct{} // closed and replaced on every update
}

func newRunLog() *runLog { return &runLog{changed: make(chan struct{})} }

func (l *runLog) onEvent(e pipeline.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case pipeline.EventCommitted:
		l.commits = append(l.commits, e)
		l.consumed += int64(e.Consumed)
	case pipeline.EventAborted:
		l.aborted++
	case pipeline.EventReinit:
		l.reinits++
	case pipeline.EventFenced:
		l.failure = errors.New(e.Err)
	case pipeline.EventStopped:
		if e.Err != "" && l.failure == nil {
			l.failure = errors.New(e.Err)
		}
	default:
		return
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// waitConsumed waits until the copiers have committed at least n consumed
// records, reporting progress on the way.
func (l *runLog) waitConsumed(ctx context.Context, n int64, timeout time.Duration, progress func(int64)) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		l.mu.Lock()
		got, fail, ch := l.consumed, l.failure, l.changed
		l.mu.Unlock()
		switch {
		case fail != nil:
			return fmt.Errorf("a copier failed: %w", fail)
		case got >= n:
			return nil
		}
		select {
		case <-ch:
		case <-tick.C:
			if progress != nil {
				progress(got)
			}
		case <-deadline.C:
			return fmt.Errorf("the copiers committed %d of %d records within %s", got, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drainStats are the figures of a drain phase, from the commit events.
type drainStats struct {
	rps         float64
	window      time.Duration
	commits     int // commits inside the window
	txnPerSec   float64
	commitP50   time.Duration // flush + offset commit (+ EndTxn): the stall
	commitP99   time.Duration
	flushP50    time.Duration // the flush part of commitP50's commits: waiting for records in flight
	txnP50      time.Duration // first record (Begin) to commit acknowledged
	txnP99      time.Duration
	openP50     time.Duration // txnP50 minus the commit: the interval in force
	overhead    float64       // share of the window spent committing
	shortWindow bool          // fewer than two commits before the backlog ran out
}

// drain computes the drain figures from commits, which must include the
// commit that reached backlog consumed records.
//
// Throughput counts the records committed by every commit before the one
// that consumed the backlog's tail, over the time from the first
// transaction's first record to the last of those commits: a copier stays
// in its last, short-of-work transaction until its interval runs out, and
// counting that idle tail would charge long intervals for the backlog
// being finite. Both modes are measured the same way, from the same events.
func drain(commits []pipeline.Event, backlog int64) drainStats {
	cs := slices.Clone(commits)
	sort.Slice(cs, func(i, j int) bool { return cs[i].Time.Before(cs[j].Time) })
	var st drainStats
	if len(cs) == 0 {
		return st
	}
	begin := cs[0].Time.Add(-cs[0].Duration)
	var cum int64
	last := len(cs) - 1
	for i, c := range cs {
		cum += int64(c.Consumed)
		if cum >= backlog {
			last = i
			break
		}
	}
	cs = cs[:last+1]
	full := cs[:last] // every commit before the one that reached the backlog
	var counted int64
	for _, c := range full {
		counted += int64(c.Consumed)
	}
	end := cs[last].Time
	if len(full) >= 2 {
		end = full[len(full)-1].Time
	} else {
		// Too short a run to leave the tail out: count it, and say so.
		counted, full, st.shortWindow = cum, cs, true
	}
	st.window = end.Sub(begin)
	st.commits = len(full)
	if st.window > 0 {
		st.rps = float64(counted) / st.window.Seconds()
		st.txnPerSec = float64(len(full)) / st.window.Seconds()
	}
	var stall time.Duration
	commitDur := make([]time.Duration, len(full))
	txnDur := make([]time.Duration, len(full))
	openDur := make([]time.Duration, len(full))
	flushDur := make([]time.Duration, len(full))
	for i, c := range full {
		stall += c.CommitDuration
		commitDur[i], txnDur[i], openDur[i] = c.CommitDuration, c.Duration, c.Duration-c.CommitDuration
		flushDur[i] = c.FlushDuration
	}
	if st.window > 0 {
		st.overhead = stall.Seconds() / st.window.Seconds()
	}
	st.commitP50, st.commitP99 = quantile(commitDur, 0.5), quantile(commitDur, 0.99)
	st.txnP50, st.txnP99 = quantile(txnDur, 0.5), quantile(txnDur, 0.99)
	st.openP50 = quantile(openDur, 0.5)
	st.flushP50 = quantile(flushDur, 0.5)
	return st
}

// quantile returns the q-quantile of ds by the nearest-rank method (the
// smallest value with at least q of the samples at or below it), 0 if empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 if empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// liveStats are the commits of the latency phase, when the copier is
// lightly loaded.
type liveStats struct {
	commitP50, commitP99, openP50 time.Duration
	// overhead is the share of the phase spent committing: the commits'
	// durations over the time from the first one's begin to the last one's
	// end.
	overhead float64
}

// live computes liveStats from the commits that began after since.
func live(commits []pipeline.Event, since time.Time) liveStats {
	var cs, os []time.Duration
	var first, last time.Time
	var stall time.Duration
	for _, c := range commits {
		begin := c.Time.Add(-c.Duration)
		if !begin.After(since) {
			continue
		}
		cs = append(cs, c.CommitDuration)
		os = append(os, c.Duration-c.CommitDuration)
		stall += c.CommitDuration
		if first.IsZero() || begin.Before(first) {
			first = begin
		}
		if c.Time.After(last) {
			last = c.Time
		}
	}
	st := liveStats{commitP50: quantile(cs, 0.5), commitP99: quantile(cs, 0.99), openP50: quantile(os, 0.5)}
	if w := last.Sub(first); w > 0 {
		st.overhead = stall.Seconds() / w.Seconds()
	}
	return st
}
