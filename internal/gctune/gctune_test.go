package gctune

import "testing"

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
