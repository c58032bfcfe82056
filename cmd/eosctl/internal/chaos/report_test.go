package chaos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/verify"
)

// A stateful row is judged by its aggregate report and both concurrent
// readers: a double-counted window, a dead letter written twice, or a
// missing reader fails it, and the table shows which. Its rows get their own
// table, after the passthrough rows.
func TestStatefulRowsReportTheirJudge(t *testing.T) {
	exact := func() *Result {
		return &Result{
			Scenario: "aggregate-x", Topology: topologyAggregate, Records: 20040, Faults: "3 faults",
			Aggregate: &aggcheck.Report{Windows: aggcheck.Tally{Reference: 1600, Read: 1600, Exact: 1600}, DeadLetters: aggcheck.Tally{Reference: 40, Read: 40, Exact: 40}},
			Tail:      &verify.TailReport{Records: 1600, Keys: 1600}, DeadLetterTail: &verify.TailReport{Records: 40, Keys: 40},
		}
	}
	copyRow := &Result{Scenario: "copy", Topology: topologyPassthrough, Records: 10, Verify: &verify.Report{InputRecords: 10, OutputRecords: 10}, Tail: &verify.TailReport{Records: 10, Keys: 10}}
	if r := exact(); !r.OK() || !copyRow.OK() {
		t.Fatalf("exact rows not OK: %s; %s", r.Summary(), copyRow.Summary())
	}

	doubleCounted := exact()
	doubleCounted.Scenario = "aggregate-double-counted"
	doubleCounted.Aggregate.Windows.Exact, doubleCounted.Aggregate.Windows.Wrong = 1599, 1
	dlTwice := exact()
	dlTwice.Scenario = "aggregate-dead-letter-twice"
	dlTwice.DeadLetterTail.Duplicates = 1
	noReader := exact()
	noReader.DeadLetterTail = nil
	noJudge := exact()
	noJudge.Aggregate = nil
	onlyVerify := exact()
	onlyVerify.Aggregate, onlyVerify.Verify = nil, copyRow.Verify
	provedNothing := exact()
	provedNothing.Error = "none of the freezes found the worker's transaction open"
	for _, r := range []*Result{doubleCounted, dlTwice, noReader, noJudge, onlyVerify, provedNothing} {
		if r.OK() {
			t.Errorf("%s is OK: %s", r.Scenario, r.Summary())
		}
	}

	var b bytes.Buffer
	WriteTable(&b, []*Result{exact(), copyRow, doubleCounted, dlTwice}, "eosctl chaos")
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"| copy | 10 | ",
		"| scenario | input records | faults injected |",
		"| aggregate-x | 20040 | 3 faults | n/a | 1600 / 1600 | 0 / 0 / 0 / 0 | 40 / 40 | 0 / 0 / 0 / 0 | 0 | exactly once |",
		"| aggregate-double-counted | 20040 | 3 faults | n/a | 1599 / 1600 | 0 / 0 / 1 / 0 | 40 / 40 | 0 / 0 / 0 / 0 | 0 | **FAILED** |",
		"| aggregate-dead-letter-twice | 20040 | 3 faults | n/a | 1600 / 1600 | 0 / 0 / 0 / 0 | 40 / 40 | 0 / 0 / 0 / 0 | 1 | **FAILED** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if strings.Index(out, "| copy |") > strings.Index(out, "| aggregate-x |") {
		t.Error("the stateful rows are not in a table after the passthrough rows")
	}
}

// Each stateful scenario runs the faults of a passthrough scenario, and
// "aggregate" selects exactly them.
func TestStatefulScenariosMirrorTheirFaults(t *testing.T) {
	agg, err := Lookup([]string{topologyAggregate}, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range agg {
		names = append(names, s.Name)
		if s.Topology != topologyAggregate {
			t.Errorf("%s: topology %q", s.Name, s.Topology)
		}
		if _, err := Lookup([]string{strings.TrimPrefix(s.Name, "aggregate-")}, false); err != nil {
			t.Errorf("%s mirrors no passthrough scenario: %v", s.Name, err)
		}
	}
	want := "aggregate-broker-clean-bounce aggregate-broker-hard-bounce aggregate-coordinator-moves aggregate-partition-leader-moves aggregate-lost-responses aggregate-slow-coordinator aggregate-txn-timeout"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("aggregate scenarios %s, want %s", got, want)
	}
}

// A soak passes only with its output exactly once and its workers' memory
// flat after warm-up; the verdict says which of the two failed.
func TestSoakVerdictJudgesExactlyOnceAndMemory(t *testing.T) {
	samples := func(first, last int64) []SoakSample {
		s := make([]SoakSample, 10)
		for i := range s {
			s[i].RSSBytes = first
		}
		s[9].RSSBytes = last
		return s
	}
	for name, c := range map[string]struct {
		res  SoakResult
		want string
	}{
		"passes":        {SoakResult{Samples: samples(100, 105), Verify: &verify.Report{}, Tail: &verify.TailReport{}}, ""},
		"duplicates":    {SoakResult{Samples: samples(100, 100), Verify: &verify.Report{Duplicates: 1}, Tail: &verify.TailReport{}}, "exactly-once broken"},
		"tail dup":      {SoakResult{Samples: samples(100, 100), Verify: &verify.Report{}, Tail: &verify.TailReport{Duplicates: 2}}, "exactly-once broken"},
		"memory leak":   {SoakResult{Samples: samples(100, 111), Verify: &verify.Report{}, Tail: &verify.TailReport{}}, "RSS grew 11.0%"},
		"both at once":  {SoakResult{Samples: samples(100, 200), Verify: &verify.Report{Missing: 1}, Tail: &verify.TailReport{}}, "exactly-once broken; worker RSS grew 100.0%"},
		"no rss sample": {SoakResult{Verify: &verify.Report{}, Tail: &verify.TailReport{}}, ""},
	} {
		err := c.res.Verdict()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: Verdict() = %v, want %q", name, err, c.want)
		}
	}
}
