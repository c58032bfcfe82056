package e2e

import (
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
)

// With about a third of all transactions aborted on purpose, aborted records
// are never visible to read_committed readers (they would show up as
// duplicates once the records are processed again) and nothing is skipped
// (it would show up as missing).
func TestAbortedTransactionsAreNeverVisibleNorSkipped(t *testing.T) {
	const n = 100_000
	e := newEnv(t, broker.Config{})
	produced := e.produceAsync("abort-in", n, 4, 25_000)
	tl := e.tail("abort-out")
	for i := range 2 {
		// At most 2000 records a transaction: 50 or more transactions
		// whatever a commit costs (on Apache Kafka on a busy machine a
		// 100ms interval made as few as 10, too few to count on aborts).
		e.worker("abort", i, "abort-in", "abort-out", "--test-abort-fraction", "0.33", "--max-txn-records", "2000")
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("abort", time.Minute, "abort-in")
	e.stop()
	aborted, committed := e.Count("aborted"), e.Count("committed")
	if aborted < 5 || committed < 5 {
		t.Fatalf("%d transactions aborted and %d committed: the test hook did not exercise aborts", aborted, committed)
	}
	t.Logf("%d transactions aborted on purpose, %d committed", aborted, committed)
	e.requireExactlyOnce("abort-in", "abort-out", tl, n)
}
