package e2e

import (
	"strconv"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/seed"
	"github.com/eosctl/eos/internal/testenv"
)

// Workers SIGKILLed at random moments, several of them with a transaction
// open, and restarted with the same instance id, lose nothing and duplicate
// nothing, as seen both by a read_committed reader during the faults and by
// verify afterwards.
func TestExactlyOnceThroughCrashLoop(t *testing.T) {
	testenv.Long(t)
	const (
		n       = 300_000
		workers = 3
		kills   = 6
	)
	e := newEnv(t, broker.Config{})
	produced := e.produceAsync("crash-in", n, 6, 30_000)
	tl := e.tail("crash-out")
	for i := range workers {
		e.worker("crash", i, "crash-in", "crash-out")
	}
	rng := seed.Rand(t) // the kill instants and victims
	midTxn := 0
	for k := range kills {
		time.Sleep(time.Duration(500+rng.IntN(1000)) * time.Millisecond)
		i := rng.IntN(workers)
		// Every other kill waits for an open transaction, so that at least
		// half of them land mid-transaction for certain.
		if k%2 == 0 && admin.WaitOngoing(e.ctx, e.cl, "crash-"+strconv.Itoa(i), 3*time.Second) {
			midTxn++
		}
		e.Worker("crash-" + strconv.Itoa(i)).Kill()
		e.worker("crash", i, "crash-in", "crash-out")
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if midTxn < kills/2 {
		t.Fatalf("only %d of %d kills were confirmed mid-transaction", midTxn, kills)
	}
	e.waitCaughtUp("crash", time.Minute, "crash-in")
	e.stop()
	e.requireExactlyOnce("crash-in", "crash-out", tl, n)
	t.Logf("%d kills, %d confirmed mid-transaction; %d transactions committed by the surviving processes' event streams", kills, midTxn, e.Count("committed"))
}
