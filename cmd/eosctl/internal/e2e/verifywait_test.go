package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
)

// verify --wait-caught-up started before the workers (so before their
// output topic exists) waits for them and then judges the copy: the output
// is looked up after the wait, not before (on a busy machine the README's
// walk-through reached verify before the workers had created "out").
func TestVerifyWaitsForWorkersStartedAfterIt(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.produce("vw-in", 20_000, 3, 0)
	cmd := exec.CommandContext(e.ctx, eosctl, "verify", "--brokers", e.b.Addrs()[0], "--input", "vw-in", "--output", "vw-out", "--wait-caught-up", "vw", "--timeout", "60s")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // verify is waiting; vw-out does not exist yet
	e.worker("vw", 0, "vw-in", "vw-out")
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "OK: 20000 input records") {
		t.Fatalf("verify: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
}

// verify --wait-caught-up with a group nobody joins (a mistyped --app) says
// at once that the group does not exist, and fails so after its grace, exit
// 2, instead of waiting out --timeout and reporting that the group did not
// catch up.
func TestVerifyNamesAGroupThatDoesNotExist(t *testing.T) {
	waitsInParallel(t)
	e := newEnv(t, broker.Config{})
	e.produce("ng-in", 100, 3, 0)
	began := time.Now()
	cmd := exec.CommandContext(e.ctx, eosctl, "verify", "--brokers", e.b.Addrs()[0], "--input", "ng-in", "--output", "ng-out", "--wait-caught-up", "nogroup", "--timeout", "60s")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	took := time.Since(began)
	want := `eosctl: committed: group "nogroup" does not exist after 10s: no member has joined it and it has committed no offsets: --wait-caught-up takes the consumer group of the workers, their --app ("eosctl lag --group APP" shows one); nothing was verified`
	note := "group nogroup does not exist (no worker has joined it, it has committed nothing): waiting 10s for a worker to join it"
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), note) || took > 30*time.Second {
		t.Fatalf("verify: %v after %s\nstdout: %s\nstderr: %s\nwant exit 2 within 30s and %q", err, took.Round(time.Millisecond), out.String(), errb.String(), want)
	}
}
