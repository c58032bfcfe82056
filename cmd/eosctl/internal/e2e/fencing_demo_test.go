package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/demo"
	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
)

func runDemo(t *testing.T, scenario string) *demo.Report {
	t.Helper()
	out := filepath.Join(t.TempDir(), "timeline.json")
	cmd := exec.Command(eosctl, "demo", "fencing", "--scenario", scenario, "--records", "8000", "--rate", "4000", "--json", out)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("demo fencing --scenario %s: %v\n%s", scenario, err, stdout)
	}
	t.Logf("%s", stdout)
	// The producer id is labelled as one: "pid=" reads as a process id
	// next to SIGSTOP and SIGKILL.
	if !strings.Contains(string(stdout), " producer-id=") || strings.Contains(string(stdout), " pid=") {
		t.Errorf("the timeline must label producer ids producer-id=, not pid=:\n%s", stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep demo.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Steps) < 5 || rep.Verify == nil {
		t.Fatalf("--json timeline is incomplete: %s", b)
	}
	return &rep
}

// The zombie scenario: the frozen instance is fenced with exit code 3 when
// it resumes, its open transaction was aborted (its records are in the log
// but invisible to read_committed), and every record is there exactly once.
func TestFencingDemoZombieIsFencedAndItsTransactionInvisible(t *testing.T) {
	rep := runDemo(t, demo.ScenarioZombie)
	if rep.ZombieExit != 3 {
		t.Fatalf("zombie exited %d, want 3", rep.ZombieExit)
	}
	if !rep.Verify.OK() || rep.Verify.InputRecords != 8000 {
		t.Fatalf("verify: %s", rep.Verify.Summary())
	}
	if rep.LogRecords <= rep.Verify.OutputRecords {
		t.Fatalf("the log holds %d records and read_committed sees %d: the zombie's aborted transaction left nothing to hide, so the demo proved nothing", rep.LogRecords, rep.Verify.OutputRecords)
	}
}

// The unsafe scenario must actually produce duplicates; if it did not, the
// demo would not be demonstrating anything.
func TestFencingDemoUnsafeCopierDuplicates(t *testing.T) {
	rep := runDemo(t, demo.ScenarioUnsafe)
	if rep.Verify.Duplicates == 0 || len(rep.Verify.DuplicateExamples) == 0 {
		t.Fatalf("the unsafe copier produced no duplicates: %s", rep.Verify.Summary())
	}
	if rep.Verify.Missing != 0 {
		t.Fatalf("even the unsafe copier must not lose records: %s", rep.Verify.Summary())
	}
}

// The restart scenario: SIGKILL mid-transaction and a restart with the same
// id resume from the committed offsets with no duplicate.
func TestFencingDemoRestartResumesExactlyOnce(t *testing.T) {
	rep := runDemo(t, demo.ScenarioRestart)
	if rep.ZombieExit != 137 {
		t.Fatalf("A exited %d, want 137 (SIGKILL)", rep.ZombieExit)
	}
	if !rep.Verify.OK() || rep.Verify.InputRecords != 8000 {
		t.Fatalf("verify: %s", rep.Verify.Summary())
	}
	if rep.LogRecords <= rep.Verify.OutputRecords {
		t.Fatalf("no aborted records in the log: the kill did not land mid-transaction")
	}
}

// SIGINT stops the fencing demo at once, whatever it was waiting for, with
// the documented code 130 and a line saying it was interrupted and what is
// left: it waited out its 15s event deadlines and exited 1 with "A: no
// committed event #1 within 15s", or blamed the input producer with
// produce's advice to rerun.
func TestFencingDemoInterruptedSaysSo(t *testing.T) {
	cmd := exec.Command(eosctl, "demo", "fencing", "--scenario", "zombie")
	var stdout, stderr fleet.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stdout.String(), "A ") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	began := time.Now()
	code, last := interrupt(t, cmd, &stderr)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the demo took %s to stop after SIGINT", took)
	}
	if code != 130 || !strings.HasPrefix(last, "eosctl: fencing demo interrupted; ") || strings.Contains(last, "writing again") {
		t.Fatalf("demo fencing after SIGINT: exit %d, stdout %q, stderr %q; want exit 130 and one line saying it was interrupted", code, stdout.String(), stderr.String())
	}
}
