package topologies

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time the calling OS thread has used. On a
// machine shared with other work it measures a benchmark's own cost, which
// wall time does not: a descheduled thread's wall clock runs on. The caller
// must hold its thread (runtime.LockOSThread).
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
