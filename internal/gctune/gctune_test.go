package gctune

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// GOGC is raised only while the live heap is small next to the headroom, and
// never lowered below the default nor raised without bound.
func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{32 << 20, 128 << 20, 400},
		{64 << 20, 128 << 20, 200},
		{1 << 30, 128 << 20, 100},
		{1 << 20, 128 << 20, 1000},
		{0, 128 << 20, 1000},
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d MiB live, %d MiB headroom) = %d, want %d", c.live>>20, c.headroom>>20, got, c.want)
		}
	}
}

// A live heap that grows past a quarter of the soft limit lifts the limit
// at the end of the next collection, not at the next tick: a join's table
// restored in under a second made the collector run back to back against
// the limit until the tick came.
func TestALiveHeapGrowingPastTheLimitLiftsItAtTheNextCollection(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prevPercent, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !Start(ctx, DefaultHeadroom, time.Hour) { // the tick never comes
		t.Fatal("Start did not start")
	}
	if got := debug.SetMemoryLimit(-1); got != Limit {
		t.Fatalf("soft limit %d with a small live heap, want %d", got, Limit)
	}
	state := make([][]byte, 0, 80)
	for range 80 { // 80 MiB live: past Limit/4
		state = append(state, make([]byte, 1<<20))
	}
	// The adjustment runs on the runtime's cleanup goroutine after a
	// collection. A cleanup queued by a collection during the allocations
	// above may run while the next collection is marking: it reads the
	// live heap of the one before, and the sentinel it re-arms is
	// allocated black, so that collection keeps it and the next one
	// adjusts. So a few collections are allowed; the ticker (an hour)
	// never comes, so without the adjustment after each collection none
	// would lift the limit.
	lifted := func() bool { return debug.SetMemoryLimit(-1) == math.MaxInt64 }
	for gcs := 1; !lifted(); gcs++ {
		if gcs > 3 {
			t.Fatalf("soft limit still %d after 3 collections saw %d MiB live", debug.SetMemoryLimit(-1), len(state))
		}
		runtime.GC()
		for deadline := time.Now().Add(2 * time.Second); !lifted() && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
	}
	if p := debug.SetGCPercent(-1); p != 100 {
		t.Errorf("GOGC %d with a large live heap, want 100", p)
	}
	debug.SetGCPercent(100)
	runtime.KeepAlive(state)
}
