package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/eosctl/eos/internal/testhook"
)

// testHooks is everything tests inject into a Worker, kept out of its
// production fields: nil in production, where every method is a no-op. A
// program cannot set it; the tests of this package set it directly, and
// the others (and eosctl's hidden --test-abort-fraction) reach the abort
// fraction through internal/testhook's context value.
type testHooks struct {
	// abortFraction of the transactions are aborted on purpose instead
	// of committed: the tests' way to show aborted work is never visible
	// and never skipped. The second transaction that ends is always one
	// of them, so that a test asserting its run aborted something does
	// not fail by chance (at 0.2, a run of 20 transactions aborted none
	// about once in a hundred); ends counts them.
	abortFraction float64
	ends          atomic.Int64
	// onRestored sees every restore's result once it is published.
	onRestored func(map[int32]*partitionState)
}

// hooksFrom returns the hooks ctx carries from internal/testhook, over
// those already set (nil when there are none).
func hooksFrom(ctx context.Context, h *testHooks) (*testHooks, error) {
	f := testhook.AbortFraction(ctx)
	if f == 0 {
		return h, nil
	}
	if f < 0 || f >= 1 {
		return nil, fmt.Errorf("test hook: abort fraction %g is outside [0, 1)", f)
	}
	if h == nil {
		h = &testHooks{}
	}
	h.abortFraction = f
	return h, nil
}

// abort reports whether the transaction about to end is aborted on purpose.
func (h *testHooks) abort() bool {
	if h == nil || h.abortFraction <= 0 {
		return false
	}
	return h.ends.Add(1) == 2 || rand.Float64() < h.abortFraction
}

// restored passes a published restore's result to onRestored, if set.
func (h *testHooks) restored(states map[int32]*partitionState) {
	if h != nil && h.onRestored != nil {
		h.onRestored(states)
	}
}
