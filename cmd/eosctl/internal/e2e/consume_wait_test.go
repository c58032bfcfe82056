package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/internal/datagen"
)

// consume --wait-for waits for a topic that does not exist yet and for
// records that are not written yet, and when its --read-timeout ends first
// it says in one line how far it got: the docs' examples read a worker's
// output with it right after starting the worker. Interrupted, it exits 130
// and says so, not that its --read-timeout ended.
func TestConsumeWaitForWaitsForTheTopicAndItsRecords(t *testing.T) {
	waitsInParallel(t)
	e := newEnv(t, broker.Config{})
	produced := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		_, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: "later", Count: 3, Size: 100, Partitions: 2})
		produced <- err
	}()
	code, out, errs := e.cli("consume", "--topic", "later", "--wait-for", "3", "--read-timeout", "30s")
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("consume --wait-for 3 on a topic written a second later: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs = e.cli("consume", "--topic", "later", "--wait-for", "5", "--read-timeout", "3s")
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "eosctl: waiting for 5 records on later: 3 after --read-timeout") {
		t.Errorf("consume --wait-for 5 on 3 records: exit %d, stderr %q; want 1 and one line saying 3", code, errs)
	}
	interrupted := exec.Command(eosctl, "consume", "--brokers", e.b.Addrs()[0], "--topic", "later", "--wait-for", "5")
	var ierr fleet.Buffer
	interrupted.Stderr = &ierr
	if err := interrupted.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // a read or two of the 3 records
	if code, last := interrupt(t, interrupted, &ierr); code != 130 || last != "eosctl: waiting for 5 records on later: interrupted with 3 there" {
		t.Errorf("consume --wait-for 5 on 3 records, interrupted: exit %d, stderr %q; want 130 and one line saying it was interrupted with 3 there", code, ierr.String())
	}
	code, _, errs = e.cli("consume", "--topic", "never", "--wait-for", "1", "--read-timeout", "1s")
	if code != 2 || !strings.Contains(errs, `topic "never": topic does not exist`) {
		t.Errorf("consume --wait-for on a topic never created: exit %d, stderr %q; want 2 naming the topic", code, errs)
	}
}
