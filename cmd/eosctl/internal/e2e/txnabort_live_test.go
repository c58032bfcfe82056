package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
)

// `eosctl txn abort --transactional-id` against the id of a live worker (the
// hanging-transaction drill of docs/operations.md: the worker frozen with
// SIGSTOP, its transaction open) aborts the open transaction by fencing the
// id. Nobody replaced the worker in its group, so when it resumes it takes
// the fence for its own (a coordinator-moved epoch), re-initialises its
// producer and carries on from its committed offsets: it does not exit,
// and everything is in the output exactly once, nothing of the aborted
// transaction included. On both brokers.
func TestTxnAbortOfALiveWorkersIDAbortsItsTransactionAndTheWorkerCarriesOn(t *testing.T) {
	const n = 40_000
	e := newEnv(t, broker.Config{})
	produced := e.produceAsync("ta-in", n, 3, 10_000)
	tl := e.tail("ta-out")
	w := e.worker("ta", 0, "ta-in", "ta-out", "--commit-interval", "2s")
	if !admin.WaitOngoing(e.ctx, e.cl, "ta-0", 20*time.Second) {
		t.Fatal("the worker never had an open transaction")
	}
	if err := w.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	code, stdout, errs := e.cli("txn", "abort", "--transactional-id", "ta-0", "--yes")
	if code != 0 || !strings.Contains(stdout, "fenced: producer id") {
		t.Fatalf("txn abort: exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	if err := w.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for w.Count("reinit") == 0 && time.Now().Before(deadline) {
		select {
		case <-w.Done():
			t.Fatalf("the worker exited with code %d after its transaction was aborted; want it to re-initialise and carry on", w.Wait())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if w.Count("reinit") == 0 || !strings.Contains(e.logs.String(), "producer fenced, but the group still knows this instance as itself") {
		t.Fatalf("the resumed worker did not re-initialise within 30s (reinit events: %d)", w.Count("reinit"))
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("ta", time.Minute, "ta-in")
	select {
	case <-w.Done():
		t.Fatalf("the worker exited with code %d", w.Wait())
	default:
	}
	e.stop()
	e.requireExactlyOnce("ta-in", "ta-out", tl, n)
}
