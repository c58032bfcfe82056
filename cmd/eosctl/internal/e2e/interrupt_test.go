package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testbroker"
)

// SIGINT during produce, quickstart and verify's wait exits with the
// documented "interrupted" code 130 and one line saying what was done: for
// produce, exactly how many records were written (the topic's end offsets
// agree) and that a rerun appends keys already there; for verify, that
// nothing was verified.
func TestInterruptSaysWhatWasDone(t *testing.T) {
	waitsInParallel(t)
	e := newEnv(t, broker.Config{})
	produce := exec.Command(eosctl, "produce", "--brokers", e.b.Addrs()[0], "--topic", "int-in", "--count", "1000000", "--rate", "50000")
	var perr fleet.Buffer
	produce.Stderr = &perr
	if err := produce.Start(); err != nil {
		t.Fatal(err)
	}
	e.eventually(time.Minute, "produce writes", func() (bool, string) {
		n, err := admin.EndOffsetSum(e.ctx, e.cl, "int-in")
		return err == nil && n > 10000, fmt.Sprint(n, err)
	})
	code, last := interrupt(t, produce, &perr)
	written, err := admin.EndOffsetSum(e.ctx, e.cl, "int-in")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("interrupted after writing %s of 1,000,000 records to int-in (from key 0); producing again continues after the highest key written, repeating none", commas(written))
	if code != 130 || last != "eosctl: "+want {
		t.Fatalf("produce: exit %d, stderr %q; want exit 130 and %q", code, perr.String(), want)
	}

	qs := exec.Command(eosctl, "quickstart", "--records", "300000")
	var qout, qerr fleet.Buffer
	qs.Stdout, qs.Stderr = &qout, &qerr
	if err := qs.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(qout.String(), "embedded broker listening") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	code, last = interrupt(t, qs, &qerr)
	if code != 130 || !strings.HasPrefix(last, "eosctl: quickstart interrupted while ") || strings.HasSuffix(last, "context canceled") {
		t.Fatalf("quickstart: exit %d, stdout %q, stderr %q; want exit 130 and a line saying where it was (and no 'context canceled' after it)", code, qout.String(), qerr.String())
	}

	// verify waiting for a group that never catches up (none consumes
	// int-in) says that nothing was verified.
	v := exec.Command(eosctl, "verify", "--brokers", e.b.Addrs()[0], "--input", "int-in", "--output", "int-out", "--wait-caught-up", "nobody", "--timeout", "1m")
	var verr fleet.Buffer
	v.Stderr = &verr
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "verify waits", func() (bool, string) {
		return strings.Contains(verr.String(), "waiting for group nobody"), verr.String()
	})
	code, last = interrupt(t, v, &verr)
	if want := "eosctl: interrupted while waiting for group nobody to catch up on int-in: nothing was verified"; code != 130 || last != want {
		t.Fatalf("verify: exit %d, stderr %q; want exit 130 and %q", code, verr.String(), want)
	}
}

// interrupt sends SIGINT to cmd and returns its exit code and the last
// line of its stderr.
func interrupt(t *testing.T, cmd *exec.Cmd, stderr *fleet.Buffer) (int, string) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return cmd.ProcessState.ExitCode(), stderr.LastLine()
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Ctrl-C while verify reads the topics says it was interrupted and that
// nothing was verified, exit 130, rather than reporting a read that
// "stopped short of the listed end", which reads as a broker or
// data fault. A round-trip time on the broker keeps the read going long
// enough to be interrupted in it.
func TestVerifyInterruptedWhileReadingSaysSo(t *testing.T) {
	waitsInParallel(t)
	// The embedded broker on either suite: the property is verify's own
	// (how it reports a signal during its read phase), and only the
	// embedded broker's injected round trip stretches that phase enough
	// for the signal to land inside it.
	e := newEnvOn(t, testbroker.Embedded(t, broker.Config{RTT: 300 * time.Millisecond, MinSessionTimeout: time.Second}), nil)
	e.produce("vr-in", 20_000, 3, 0)
	e.produce("vr-out", 20_000, 3, 0)
	v := exec.Command(eosctl, "verify", "--brokers", e.b.Addrs()[0], "--input", "vr-in", "--output", "vr-out")
	var verr fleet.Buffer
	v.Stderr = &verr
	if err := v.Start(); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "verify reads", func() (bool, string) {
		return strings.Contains(verr.String(), "reading 20000 offsets of vr-in and 20000 of vr-out to their last stable offsets"), verr.String()
	})
	code, last := interrupt(t, v, &verr)
	if want := "eosctl: interrupted while reading vr-in and vr-out: nothing was verified"; code != 130 || last != want {
		t.Fatalf("verify: exit %d, stderr %q; want exit 130 and %q", code, verr.String(), want)
	}
}
