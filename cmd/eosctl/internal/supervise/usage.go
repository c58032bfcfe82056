package supervise

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPU returns the user plus system CPU time the process has used so far
// (10ms resolution), or 0 if it cannot be read (it has exited and been
// reaped, or this is not Linux).
func (p *Proc) CPU() time.Duration { return ProcessCPU(p.PID()) }

// RSS returns the process's resident set size in bytes (VmRSS), 0 if
// unknown.
func (p *Proc) RSS() int64 { return statusBytes(p.PID(), "VmRSS:") }

// PeakRSS returns the process's peak resident set size in bytes (VmHWM,
// the high-water mark of its own address space since exec), 0 if unknown.
// Read it before the process exits. getrusage's maxrss of a child is no
// good for this: Linux carries the parent's RSS at the time of the
// (vfork) exec into it.
func (p *Proc) PeakRSS() int64 { return statusBytes(p.PID(), "VmHWM:") }

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat CPU times; 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// ProcessCPU returns the user plus system CPU time of process pid so far,
// from /proc/<pid>/stat (10ms resolution), or 0 if it cannot be read. It
// serves a process that reports its own pid (a JVM peer started through a
// launcher), where Proc.CPU serves the child itself.
func ProcessCPU(pid int) time.Duration {
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

// SelfPeakRSS returns this process's VmHWM in bytes: its peak resident set
// size since it started or since ResetSelfPeakRSS, or 0 if unknown.
func SelfPeakRSS() int64 { return statusBytes(0, "VmHWM:") }

// ResetSelfPeakRSS resets this process's peak resident set size (VmHWM) to
// its current size, so that SelfPeakRSS measures from now. It needs Linux
// 4.0 or newer; elsewhere the peak stays the process's lifetime peak.
func ResetSelfPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// statusBytes reads a "kB" field of /proc/<pid>/status (pid 0: self) in
// bytes, 0 if unknown.
func statusBytes(pid int, field string) int64 {
	name := "/proc/self/status"
	if pid != 0 {
		name = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
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

// SelfCPU returns the user plus system CPU time of this process, from
// getrusage(RUSAGE_SELF): every thread, an embedded broker's included.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
