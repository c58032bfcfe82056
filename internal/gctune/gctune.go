// Package gctune gives a process a minimum of garbage-collector headroom,
// for the workers eosctl run starts.
//
// A worker bounds its fetch buffers (pipeline: 256 KiB a partition, 8 MiB a
// response) so that it stays near 100 MiB whatever the backlog; its live heap
// is then a few tens of MiB, and with GOGC=100 the collector runs every few
// tens of MiB allocated, which is every few hundred milliseconds at a
// million records a second. Measured with eosctl bench (BENCHMARKS.md, issue
// 14): the eos worker spent 0.2-0.3 CPU s per million 100-byte records more
// than a bare franz-go loop whose default fetch sizes gave it a 200 MiB heap,
// and GOGC=400 took most of that difference away.
//
// A fixed higher GOGC would multiply a stateful worker's heap (a 1 GiB state
// store would be allowed 5 GiB), so Start raises GOGC only while the live heap
// is small: it keeps at least Headroom bytes between the live heap and the
// next collection, and never goes below GOGC=100. While it does, it also sets
// a soft memory limit (Limit): a burst of live memory right after a sample
// (two decompressed fetches) would otherwise be multiplied by the raised
// GOGC, and the first version of this, without the limit, let a worker reach
// 376 MiB. The limit is lifted as soon as the live heap grows past a quarter
// of it, so a growing state store never makes the collector thrash against
// it. "As soon as" means at the end of the first collection that sees it:
// Start checks after every collection, not only every interval. A check
// once a second let a join's table restore (a live heap growing by 300 MiB
// in under a second) run against the 200 MiB limit for most of that second:
// 16 collections back to back, each marking the whole heap, 0.8 CPU s per
// million rows restored (gctrace of an eosctl bench --topology join worker,
// 2026-12-05). Left alone when GOGC or GOMEMLIMIT is set: the operator has
// chosen.
package gctune

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// DefaultHeadroom is the collector headroom Start keeps by default: with a
// live heap of 30-40 MiB it means GOGC of about 300-400, and a peak RSS
// that stays under the 256 MiB a worker is allowed.
const DefaultHeadroom = 128 << 20

// Limit is the soft memory limit kept while GOGC is raised, under the
// 256 MiB a worker is allowed (BENCHMARKS.md).
const Limit = 200 << 20

// Percent returns the GOGC that keeps headroom bytes above a live heap of
// live bytes: 100*headroom/live, at least 100 and at most 1000.
func Percent(live, headroom uint64) int {
	if live == 0 {
		return 1000
	}
	return int(min(1000, max(100, 100*headroom/live)))
}

// Start adjusts GOGC after every collection and every interval until ctx
// ends, unless GOGC or GOMEMLIMIT is set in the environment. It returns
// whether it started.
func Start(ctx context.Context, headroom uint64, interval time.Duration) bool {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return false
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	set := 100
	var mu sync.Mutex // the ticker's goroutine and the cleanup goroutine
	adjust := func() {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return // the caller may have set GOGC itself since
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		live := sample[0].Value.Uint64()
		p := Percent(live, headroom)
		if live > Limit/4 {
			p = 100
		}
		// Move only on a change of a tenth or more, so that a live heap
		// wobbling around a value does not reset the pacer every tick.
		if p*10 >= set*9 && p*10 <= set*11 {
			return
		}
		limit := int64(math.MaxInt64)
		if p > 100 {
			limit = Limit
		}
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(p)
		set = p
	}
	adjust()
	afterEachGC(ctx, adjust)
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				adjust()
			}
		}
	}()
	return true
}

// afterEachGC calls fn after every collection until ctx ends: fn runs as
// the cleanup of an object nothing refers to, so the collection that finds
// it unreachable queues fn, and fn arms the next one. fn runs on the
// runtime's cleanup goroutine and must be quick.
func afterEachGC(ctx context.Context, fn func()) {
	var arm func()
	arm = func() {
		runtime.AddCleanup(new(gcSentinel), func(struct{}) {
			if ctx.Err() != nil {
				return
			}
			fn()
			arm()
		}, struct{}{})
	}
	arm()
}

// gcSentinel is large enough not to share a tiny-allocator block, whose
// cleanups would wait for every other object in it.
type gcSentinel struct{ _ [32]byte }
