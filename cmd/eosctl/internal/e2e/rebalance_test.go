package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/testenv"
)

// Scaling 1 → 3 → 1 workers while records flow moves partitions mid-
// transaction twice; exactly-once holds, and the added workers really did
// take over partitions (they committed transactions of their own).
func TestExactlyOnceAcrossRebalances(t *testing.T) {
	testenv.Long(t)
	const n = 150_000
	e := newEnv(t, broker.Config{})
	produced := e.produceAsync("rebal-in", n, 6, 25_000)
	tl := e.tail("rebal-out")
	e.worker("rebal", 0, "rebal-in", "rebal-out")
	time.Sleep(1500 * time.Millisecond)
	extra := []*supervise.Proc{e.worker("rebal", 1, "rebal-in", "rebal-out"), e.worker("rebal", 2, "rebal-in", "rebal-out")}
	// Scale down only once the added workers have committed, so the
	// second rebalance takes partitions away from workers that really own
	// some (a rebalance on Apache Kafka waits for every member to rejoin,
	// which takes longer than on the embedded broker).
	e.eventually(30*time.Second, "instances 1 and 2 commit", func() (bool, string) {
		c := e.CommitsByInstance()
		return c["1"] > 0 && c["2"] > 0, fmt.Sprint(c)
	})
	for _, p := range extra {
		_ = p.Signal(syscall.SIGTERM)
	}
	for _, p := range extra {
		if code := p.Wait(); code != 0 {
			t.Fatalf("scaled-down worker exited %d, want 0", code)
		}
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("rebal", time.Minute, "rebal-in")
	e.stop()
	byInstance := e.CommitsByInstance()
	for _, inst := range []string{"0", "1", "2"} {
		if byInstance[inst] == 0 {
			t.Fatalf("instance %s committed no transaction (commits by instance: %v): the rebalance did not happen", inst, byInstance)
		}
	}
	t.Logf("commits by instance: %v", byInstance)
	e.requireExactlyOnce("rebal-in", "rebal-out", tl, n)
}
