package bench

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// selfCPU returns the user plus system CPU time of this process, from
// getrusage(RUSAGE_SELF): every thread, the embedded broker's included.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat CPU times; 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the user plus system CPU time of process pid so far, from
// /proc/<pid>/stat (10ms resolution), or 0 if it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; count fields after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// resetPeakRSS resets this process's peak resident set size (VmHWM) to its
// current size, so that selfPeakRSS measures from now. It needs Linux 4.0
// or newer; elsewhere the peak stays the process's lifetime peak.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// selfPeakRSS returns VmHWM, the peak resident set size in bytes since the
// process started or since resetPeakRSS, or 0 if unknown.
func selfPeakRSS() int64 { return peakRSS("/proc/self/status") }

// procPeakRSS returns process pid's VmHWM in bytes, 0 if unknown.
func procPeakRSS(pid int) int64 { return peakRSS("/proc/" + strconv.Itoa(pid) + "/status") }

func peakRSS(status string) int64 {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0
			}
			kib, _ := strconv.ParseInt(f[0], 10, 64)
			return kib << 10
		}
	}
	return 0
}
