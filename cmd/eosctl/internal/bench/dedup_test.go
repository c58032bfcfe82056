package bench

import (
	"bytes"
	"strings"
	"testing"
)

// `eosctl bench --topology dedup` on the embedded broker, its worker a
// child process as eosctl bench runs it: the backlog carries every key in
// the event-id header, the worker de-duplicates by it, and verify finds
// every key exactly once in order; throughput, CPU and the worker's peak
// RSS are measured, latency is not ("-" in the table). A mode that keeps no
// state, or another key header, is refused before anything runs.
func TestDedupBenchJudgesEveryKeyExactlyOnce(t *testing.T) {
	bad := Config{Topology: topologyDedup, Modes: []Mode{ModeEOS, ModeBare}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "eos mode only") {
		t.Fatalf("dedup with the bare mode: got %v, want a refusal naming the eos mode", err)
	}
	for _, c := range []Config{{Topology: topologyDedup, KeyHeader: "other"}, {Topology: topologyAggregate, KeyHeader: DedupKeyHeader}} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "bench.Config.KeyHeader") {
			t.Fatalf("%s with key header %q: got %v, want a refusal naming bench.Config.KeyHeader", c.Topology, c.KeyHeader, err)
		}
	}
	rep, r := runOneEOSRun(t, Config{Topology: topologyDedup})
	if !r.Verified || r.Duplicates != 0 || r.Missing != 0 || r.Records != 20_000 {
		t.Fatalf("the dedup run was not judged exactly once: %+v", r)
	}
	if r.RPS <= 0 || r.CPUSeconds <= 0 || r.PeakRSSMiB <= 0 || r.Commits == 0 || r.E2ESamples != 0 {
		t.Errorf("drain figures missing, or a latency phase that should not be: %+v", r)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "dedup: topology: dedup") {
		t.Errorf("the table does not say what the dedup runs were:\n%s", table.String())
	}
}
