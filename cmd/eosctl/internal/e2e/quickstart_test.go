package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/eosctl/eos/cmd/eosctl/internal/quickstart"
	"github.com/eosctl/eos/internal/testenv"
)

// The quickstart, run as a user runs it (the real binary, re-executing
// itself for the workers), passes verify after killing a worker
// mid-transaction, and its summary is computed, not asserted: verify's
// counts are real and the kills really happened.
func TestQuickstartPassesVerifyAfterKills(t *testing.T) {
	testenv.Long(t)
	out, err := exec.Command(eosctl, "quickstart", "--records", "200000", "--kills", "3", "--json").Output()
	if err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out)
	}
	var s quickstart.Summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("quickstart --json: %v\n%s", err, out)
	}
	v := s.Verify
	if !v.OK() || v.InputRecords != 200000 || v.OutputRecords != 200000 {
		t.Fatalf("quickstart verify: %s", v.Summary())
	}
	if s.Kills != 3 || s.Committed == 0 {
		t.Fatalf("quickstart summary: %d kills (want 3), %d commits", s.Kills, s.Committed)
	}
	t.Logf("quickstart: %.0f records/s, %d kills (%d mid-transaction), %d committed, %d aborted", s.RecordsPerSec, s.Kills, s.KilledMidTxn, s.Committed, s.Aborted)
}

// The workers the quickstart kills are drawn from a seed it prints, and
// EOS_TEST_SEED replays them: two runs with one seed kill the same workers
// in the same order.
func TestQuickstartKillsReplayFromTheirSeed(t *testing.T) {
	testenv.Long(t)
	run := func() quickstart.Summary {
		t.Helper()
		cmd := exec.Command(eosctl, "quickstart", "--records", "100000", "--kills", "6", "--json")
		cmd.Env = append(os.Environ(), "EOS_TEST_SEED=4242")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("quickstart failed: %v\n%s", err, out)
		}
		var s quickstart.Summary
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("quickstart --json: %v\n%s", err, out)
		}
		if !s.Verify.OK() || s.Seed != 4242 || len(s.Killed) != 6 {
			t.Fatalf("quickstart with EOS_TEST_SEED=4242: seed %d, killed %v, %s", s.Seed, s.Killed, s.Verify.Summary())
		}
		return s
	}
	a, b := run(), run()
	if !slices.Equal(a.Killed, b.Killed) {
		t.Fatalf("seed 4242 killed workers %v, then %v", a.Killed, b.Killed)
	}
	t.Logf("seed 4242 killed workers %v both times", a.Killed)
}
