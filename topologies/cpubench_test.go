package topologies

import (
	"runtime"
	"testing"
	"time"
)

// interleavedCPU runs b.N records of every mode through process(mode, i)
// in blocks of 10,000, the modes taking turns and the first of each block
// rotating, and returns each mode's CPU a record in ns: the benchmark
// thread's own (GC assists included, background GC workers not), which
// the machine's other load does not inflate as it does wall time. It
// skips the benchmark where threads have no CPU clock.
func interleavedCPU(b *testing.B, modes []string, process func(mode string, i int) error) map[string]float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, ok := threadCPU(); !ok {
		b.Skip("no per-thread CPU clock here")
	}
	cpu := map[string]time.Duration{}
	const block = 10_000
	b.ResetTimer()
	for done, k := 0, 0; done < b.N; k++ {
		n := min(block, b.N-done)
		for j := range modes {
			m := modes[(j+k)%len(modes)]
			start, _ := threadCPU()
			for i := range n {
				if err := process(m, done+i); err != nil {
					b.Fatal(err)
				}
			}
			end, _ := threadCPU()
			cpu[m] += end - start
		}
		done += n
	}
	b.StopTimer()
	per := map[string]float64{}
	for m, d := range cpu {
		per[m] = float64(d) / float64(b.N)
	}
	return per
}
