package supervise

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/pipeline"
)

// A Proc hands every stdout line to OnLine and the worker events among
// them to OnEvent, keeps the tail of stderr, measures the running child
// (CPU from /proc/PID/stat, RSS and peak RSS from /proc/PID/status), and
// after Stop reports how it exited: SIGTERM's code and an exit error.
func TestProcReportsLinesStderrUsageAndExit(t *testing.T) {
	ready := make(chan struct{})
	var lines []string
	var events []pipeline.Event
	script := `echo '{"event":"committed"}'; echo plain; echo first >&2; echo "why it failed" >&2
i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done
echo ready; exec sleep 30`
	p, err := Start(t.Context(), Config{Name: "child", Bin: "sh", Args: []string{"-c", script},
		OnLine: func(l []byte) {
			lines = append(lines, string(l))
			if string(l) == "ready" {
				close(ready)
			}
		},
		OnEvent: func(name string, e pipeline.Event) {
			if name != "child" {
				t.Errorf("event from %q", name)
			}
			events = append(events, e)
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatal("the child never said ready")
	}
	if cpu := p.CPU(); cpu <= 0 {
		t.Errorf("CPU %v after a busy loop, want > 0", cpu)
	}
	// The shell execs sleep right after "ready": measured during the
	// exec, RSS can be the shell's and the peak the new image's (a CI
	// run read 1769472 and 4096). Measure sleep itself.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.PID())); strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
	}
	if rss, peak := p.RSS(), p.PeakRSS(); rss <= 0 || peak < rss {
		t.Errorf("RSS %d, peak RSS %d: want 0 < RSS <= peak", rss, peak)
	}
	if err := p.Err(); err != nil {
		t.Errorf("Err while running = %v, want nil", err)
	}
	if code := p.Stop(10 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("Stop = %d, want %d (SIGTERM)", code, 128+int(syscall.SIGTERM))
	}
	if p.Err() == nil {
		t.Error("Err after SIGTERM = nil, want the exit error")
	}
	if got := p.StderrTail(); got != "why it failed" {
		t.Errorf("StderrTail = %q, want the last line of stderr", got)
	}
	if !slices.Equal(lines, []string{`{"event":"committed"}`, "plain", "ready"}) {
		t.Errorf("lines %q", lines)
	}
	if len(events) != 1 || events[0].Kind != pipeline.EventCommitted || p.Count(pipeline.EventCommitted) != 1 {
		t.Errorf("events %+v, count %d; want one committed event", events, p.Count(pipeline.EventCommitted))
	}
}
