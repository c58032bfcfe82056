package topologies

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/eosctl/eos/pipeline"
)

// endsLister lists the table's last stable offsets in the background, one
// listing for each fetch response the worker's client reads, so that Sync
// finds the listing its poll needs already answered instead of waiting a
// round trip to the table's leaders before every poll's records (about a
// seventh of a join worker's time at 1 ms of round trip, BENCHMARKS.md).
//
// Why it is as fresh as a listing made in Sync: Sync needs the table's
// ends as of a moment after the poll's records were fetched (so that every
// table update committed before an event was fetched is read before the
// event is joined). The worker's FetchClock moves when a fetch response is
// read, before its records can be polled; Sync reads the clock after the
// poll and takes only a listing whose request was sent once the clock had
// reached that value, that is after the poll's records were fetched. A
// listing that does not cover every partition Sync needs, or failed, is
// not used: Sync lists itself, as it did before.
type endsLister struct {
	clock *pipeline.FetchClock
	list  func(ctx context.Context, ps []int32) (map[int32]int64, error)

	mu     sync.Mutex
	parts  []int32       // the partitions to list, set by Sync
	wake   chan struct{} // Sync changed parts
	latest listing
	done   chan struct{} // closed when latest is replaced

	cancel  context.CancelFunc
	stopped chan struct{}
}

// listing is one answered listing: sent once the clock was at snap.
type listing struct {
	snap uint64
	ends map[int32]int64
	err  error
}

func startEndsLister(clock *pipeline.FetchClock, list func(context.Context, []int32) (map[int32]int64, error)) *endsLister {
	ctx, cancel := context.WithCancel(context.Background())
	l := &endsLister{clock: clock, list: list, done: make(chan struct{}), wake: make(chan struct{}, 1), cancel: cancel, stopped: make(chan struct{})}
	go l.run(ctx)
	return l
}

// run lists whenever the clock has moved since the last listing, and the
// partitions are known.
func (l *endsLister) run(ctx context.Context) {
	defer close(l.stopped)
	var last uint64
	for {
		snap := l.clock.Now()
		l.mu.Lock()
		ps := l.parts
		l.mu.Unlock()
		if snap > last && len(ps) > 0 {
			ends, err := l.list(ctx, ps)
			if ctx.Err() != nil {
				return
			}
			l.publish(listing{snap: snap, ends: ends, err: err})
			last = snap
			continue
		}
		select {
		case <-l.clock.After(snap):
		case <-l.wake:
		case <-ctx.Done():
			return
		}
	}
}

func (l *endsLister) publish(r listing) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latest = r
	close(l.done)
	l.done = make(chan struct{})
}

// ends returns the ends of ps from a listing sent once the clock was at
// least where it is now (after the poll), waiting for one; false means
// Sync must list itself (the listing failed, lacked one of ps, or ctx
// ended).
func (l *endsLister) ends(ctx context.Context, ps []int32) (map[int32]int64, bool) {
	need := l.clock.Now()
	l.mu.Lock()
	changed := !slices.Equal(l.parts, ps)
	if changed {
		l.parts = ps // the lister reads it: never modified after this
	}
	l.mu.Unlock()
	if changed {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	for {
		l.mu.Lock()
		r, done := l.latest, l.done
		l.mu.Unlock()
		if r.snap >= need {
			if r.err != nil || !containsAll(r.ends, ps) {
				return nil, false
			}
			return r.ends, true
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, false
		}
	}
}

func containsAll(ends map[int32]int64, ps []int32) bool {
	for _, p := range ps {
		if _, ok := ends[p]; !ok {
			return false
		}
	}
	return true
}

// stop ends the lister and waits for it.
func (l *endsLister) stop() {
	l.cancel()
	<-l.stopped
}

// ownedParts is the table's owned partitions, sorted.
func (t *Table) ownedParts() []int32 { return slices.Sorted(maps.Keys(t.owned)) }
