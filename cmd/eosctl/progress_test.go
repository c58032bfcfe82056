package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eosctl/eos/cmd/eosctl/internal/bench"
)

// eosctl bench draws its progress with the bar produce uses, one bar per
// stretch of work, described so that the user can tell which run of how
// many it is, and clears it when the benchmark succeeds (the table follows).
func TestBenchProgressIsABarPerStretch(t *testing.T) {
	var out bytes.Buffer
	bars := &stretchProgress{w: &out}
	show := benchProgress(bars)
	show(bench.Progress{Phase: "input", Size: 100, Done: 0, Total: 10})
	show(bench.Progress{Phase: "input", Size: 100, Done: 10, Total: 10})
	show(bench.Progress{Run: 1, Runs: 6, Round: 1, Mode: bench.ModeEOS, Interval: "50ms", Size: 100, Phase: "drain", Done: 5, Total: 10})
	bars.finish(nil)
	got := out.String()
	for _, want := range []string{"producing the 100-byte backlog", "run 1/6  round 1  eos 50ms 100 B  drain", "5/10"} {
		if !strings.Contains(got, want) {
			t.Errorf("progress output lacks %q:\n%q", want, got)
		}
	}
	if !strings.HasSuffix(got, "\033[2K\r") {
		t.Errorf("the bar of a finished benchmark is not cleared:\n%q", got)
	}
}
