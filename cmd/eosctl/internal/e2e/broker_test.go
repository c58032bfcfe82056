package e2e

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startBroker starts `eosctl broker` on dir and addr and waits until it
// prints its address.
func startBroker(t *testing.T, dir, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(eosctl, "broker", "--data-dir", dir, "--listen", addr)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != addr {
		t.Fatalf("broker did not start: %q %v", line, err)
	}
	return cmd
}

// Two brokers cannot share a data directory: the second fails at once
// with one line naming the first's PID, and the directory is free again
// once the first has stopped. A broker that cannot bind its port leaves no
// data directory behind.
func TestBrokerDataDirIsLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	first := startBroker(t, dir, freeAddr(t))
	code, _, errs := runEosctl(t, "broker", "--data-dir", dir, "--listen", freeAddr(t))
	want := fmt.Sprintf("eosctl: broker: data directory %s: in use by another broker (pid %d)", dir, first.Process.Pid)
	if code != 1 || strings.TrimSpace(errs) != want {
		t.Fatalf("second broker: exit %d, stderr %q; want exit 1 and %q", code, errs, want)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- first.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("first broker after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("first broker did not stop within 20s of SIGTERM")
	}
	startBroker(t, dir, freeAddr(t)) // the lock went with the first

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fresh := filepath.Join(t.TempDir(), "fresh", "data")
	code, _, errs = runEosctl(t, "broker", "--data-dir", fresh, "--listen", busy.Addr().String())
	if code != 1 || !strings.Contains(errs, "address already in use") {
		t.Fatalf("busy port: exit %d, stderr %q; want exit 1 naming the busy address", code, errs)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !os.IsNotExist(err) {
		t.Fatalf("a broker that could not bind left %s behind (%v)", filepath.Dir(fresh), err)
	}
}
