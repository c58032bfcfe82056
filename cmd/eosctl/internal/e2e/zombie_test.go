package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testenv"
)

// A worker frozen (SIGSTOP) with its transaction open, past its session
// timeout, while a replacement with the same --instance takes over, is
// fenced when it wakes: it exits with code 3 and a message naming its
// transactional.id, and its half-written transaction never becomes visible.
func TestZombieIsFencedAndExitsWithCode3(t *testing.T) {
	testenv.Long(t)
	const n = 80_000
	e := newEnv(t, broker.Config{})
	produced := e.produceAsync("zombie-in", n, 3, 10_000)
	tl := e.tail("zombie-out")
	zombie := e.worker("zombie", 0, "zombie-in", "zombie-out")
	time.Sleep(time.Second)
	if !admin.WaitOngoing(e.ctx, e.cl, "zombie-0", 5*time.Second) {
		t.Fatal("the first worker never had an open transaction")
	}
	if err := zombie.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // past the 3s session timeout
	// The replacement must have taken over (initialised its producer and
	// joined the group) before the zombie wakes: the zombie's commits count
	// too, so wait for 3 more than it made. A zombie woken before its
	// replacement joined rejoins first with the same static instance id and
	// keeps the slot: the replacement is then the one fenced (exit 3), a
	// different drill. (Counting all commits here, as this test once did,
	// woke the zombie at once, and a loaded machine lost that race.)
	base := e.Count("committed")
	e.worker("zombie", 0, "zombie-in", "zombie-out")
	deadline := time.Now().Add(20 * time.Second)
	for e.Count("committed") < base+3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if e.Count("committed") < base+3 {
		t.Fatal("the replacement did not commit 3 transactions within 20s")
	}
	if err := zombie.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-zombie.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the resumed zombie did not exit within 30s")
	}
	if code := zombie.Wait(); code != 3 {
		t.Fatalf("zombie exited with code %d, want 3 (fenced)", code)
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "fenced") || !strings.Contains(logs, `"zombie-0"`) {
		t.Fatalf("zombie's output does not name the fence and the transactional.id:\n%s", logs)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("zombie", time.Minute, "zombie-in")
	e.stop()
	e.requireExactlyOnce("zombie-in", "zombie-out", tl, n)
}
