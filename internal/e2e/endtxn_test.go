package e2e

import (
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker applies EndTxn and the response is lost (the connection breaks
// before it reaches the worker), repeatedly. The worker cannot know whether
// its transaction committed; it must neither produce the records again (a
// duplicate) nor carry on in a way that folds them into a later transaction
// (a torn transaction, KAFKA-17754).
func TestLostEndTxnResponsesNeitherDuplicateNorTear(t *testing.T) {
	const (
		n     = 100_000
		drops = 5
	)
	faults := &broker.Faults{}
	e := newEnv(t, broker.Config{Faults: faults})
	produced := e.produceAsync("endtxn-in", n, 4, 20_000)
	tl := e.tail("endtxn-out")
	for i := range 2 {
		e.worker("endtxn", i, "endtxn-in", "endtxn-out", "--max-txn-records", "2000")
	}
	key := kmsg.EndTxn.Int16()
	for d := 1; d <= drops; d++ {
		time.Sleep(500 * time.Millisecond)
		faults.DropResponses(key, 1)
		deadline := time.Now().Add(30 * time.Second)
		for faults.Dropped(key) < d && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if faults.Dropped(key) < d {
			t.Fatalf("EndTxn response %d was never dropped: no transaction ended in 30s", d)
		}
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("endtxn", time.Minute, "endtxn-in")
	e.stop()
	t.Logf("%d EndTxn responses dropped after the broker applied them; %d producer re-initialisations", faults.Dropped(key), e.count("reinit"))
	e.requireExactlyOnce("endtxn-in", "endtxn-out", tl, n)
}
