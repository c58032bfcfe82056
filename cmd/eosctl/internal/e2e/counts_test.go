package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
)

// A passthrough worker stopped by SIGINT reports as many records consumed
// as produced, in its committed events (which the metrics
// eos_records_consumed_total and eos_records_produced_total count) and in
// its "worker stopped" log line, including the records of the transaction
// it commits on the way out: once with everything in that last
// transaction (--commit-interval 1h), once with input still arriving.
func TestPassthroughCountsAgreeAfterSIGINT(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, broker.Config{})
	e.produce("cnt-in", 20000, 3, 0)
	late := e.produceAsync("cnt2-in", 100000, 3, 10000)
	for _, tc := range []struct {
		app, in, interval string
		ready             func() (bool, string)
	}{
		{"cnt", "cnt-in", "1h", func() (bool, string) {
			n, err := admin.EndOffsetSum(e.ctx, e.cl, "cnt-out")
			return err == nil && n >= 20000, fmt.Sprint(n, err)
		}},
		{"cnt2", "cnt2-in", "2s", func() (bool, string) {
			n, _, _ := e.committedBy("cnt2-0")
			return n > 0, "no commit yet"
		}},
	} {
		// 10s: with the harness's 3s, kgo's 3s heartbeat can miss it, and a lost
		// session aborts the long transaction this test needs.
		p := e.worker(tc.app, 0, tc.in, tc.app+"-out", "--commit-interval", tc.interval, "--session-timeout", "10s")
		e.eventually(time.Minute, tc.app+" has work in a transaction", tc.ready)
		if err := p.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(); code != 0 {
			t.Fatalf("%s exited %d after SIGINT, want 0", tc.app, code)
		}
		_, consumed, produced := e.committedBy(tc.app + "-0")
		logs := e.logs.String()
		if consumed == 0 || consumed != produced {
			t.Fatalf("%s: committed events say consumed %d, produced %d; want equal and positive", tc.app, consumed, produced)
		}
		want := fmt.Sprintf("consumed=%d produced=%d", consumed, produced)
		found := false
		for _, line := range strings.Split(logs, "\n") {
			found = found || strings.HasPrefix(line, "["+tc.app+"-0] ") && strings.Contains(line, `msg="worker stopped"`) && strings.Contains(line, want)
		}
		if !found {
			t.Fatalf("%s: no 'worker stopped' line with %s:\n%s", tc.app, want, logs)
		}
		t.Logf("%s: %s", tc.app, want)
	}
	if err := <-late; err != nil {
		t.Fatal(err)
	}
}

// committedBy sums the committed events of one transactional id: how many,
// and the records they consumed and produced.
func (e *env) committedBy(id string) (n, consumed, produced int) {
	for _, ev := range e.Events() {
		if ev.Kind == pipeline.EventCommitted && ev.TransactionalID == id {
			n, consumed, produced = n+1, consumed+ev.Consumed, produced+ev.Records
		}
	}
	return n, consumed, produced
}
