package e2e

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/eosctl/eos/internal/quickstart"
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
