package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eosctl/eos/cmd/eosctl/internal/demo"
	"github.com/eosctl/eos/internal/testenv"
)

// TestDemoSinkShowsDuplicatesOnlyInTheNaiveSink: `eosctl demo sink`, with
// nothing but itself (embedded broker, SQLite), exits 0 having shown the
// naive sink's duplicate rows, none in eosctl sink's table through the same
// kills and replay, and reconcile finding and repairing the planted rows.
func TestDemoSinkShowsDuplicatesOnlyInTheNaiveSink(t *testing.T) {
	testenv.Long(t)
	out := filepath.Join(t.TempDir(), "demo.json")
	cmd := exec.CommandContext(t.Context(), eosctl, "demo", "sink", "--records", "6000", "--kills", "2", "--json", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("eosctl demo sink: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep demo.SinkReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.NaiveRows <= rep.NaiveDistinct || rep.SinkRows != 6000 || rep.SinkDistinct != 6000 || rep.Repaired != 1 {
		t.Fatalf("demo report %+v: want naive duplicates, 6000 distinct rows in the sink's table, 1 repaired", rep)
	}
}
