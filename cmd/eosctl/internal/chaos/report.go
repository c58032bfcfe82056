package chaos

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/eosctl/eos/internal/aggcheck"
)

// WriteTable writes results as the Markdown tables of RELIABILITY.md: the
// passthrough rows, judged by verify, then the aggregate rows, judged
// against the reference computed from the input.
func WriteTable(w io.Writer, results []*Result, command string) {
	var copies, stateful []*Result
	for _, r := range results {
		if r.Stateful() {
			stateful = append(stateful, r)
		} else {
			copies = append(copies, r)
		}
	}
	if len(copies) > 0 {
		writeCopies(w, copies)
	}
	if len(stateful) > 0 {
		if len(copies) > 0 {
			fmt.Fprintln(w)
		}
		writeStateful(w, stateful)
	}
	if command != "" {
		fmt.Fprintf(w, "\nProduced by `%s`.\n", command)
	}
}

func writeCopies(w io.Writer, results []*Result) {
	fmt.Fprintln(w, "| scenario | records | faults injected | recovery p50 / max | duplicates | missing | aborted reads | order violations | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		var dup, miss, order int64 = -1, -1, -1
		if r.Verify != nil {
			dup, miss, order = r.Verify.Duplicates, r.Verify.Missing, r.Verify.OrderViolations
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %d | %d | %d | %s |\n", r.Scenario, r.Records, faultsCell(r), recoveryCell(r), dup, miss, r.AbortedReads(), order, verdict(r))
	}
}

// writeStateful writes the aggregate rows: windows and dead letters, each
// as exact of the reference's, then what was twice, missing, wrong or
// unexpected (-1 where the scenario stopped before it was judged).
func writeStateful(w io.Writer, results []*Result) {
	fmt.Fprintln(w, "| scenario | input records | faults injected | recovery p50 / max | windows exact / reference | windows twice / missing / wrong / unexpected | dead letters exact / reference | dead letters twice / missing / wrong / unexpected | aborted reads | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		win, dl := aggcheck.Tally{Reference: -1, Exact: -1, Twice: -1, Missing: -1, Wrong: -1, Unexpected: -1}, aggcheck.Tally{}
		if r.Aggregate != nil {
			win, dl = r.Aggregate.Windows, r.Aggregate.DeadLetters
		} else {
			dl = win
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %d | %s |\n", r.Scenario, r.Records, faultsCell(r), recoveryCell(r), tallyCells(win), tallyCells(dl), r.AbortedReads(), verdict(r))
	}
}

// tallyCells renders a tally as two cells: exact / reference, and twice /
// missing / wrong / unexpected.
func tallyCells(t aggcheck.Tally) string {
	return fmt.Sprintf("%d / %d | %d / %d / %d / %d", t.Exact, t.Reference, t.Twice, t.Missing, t.Wrong, t.Unexpected)
}

func verdict(r *Result) string {
	if r.OK() {
		return "exactly once"
	}
	return "**FAILED**"
}

func faultsCell(r *Result) string {
	if len(r.Notes) == 0 {
		return r.Faults
	}
	return r.Faults + " (" + strings.Join(r.Notes, "; ") + ")"
}

func recoveryCell(r *Result) string {
	if len(r.Recovery) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s", round(r.RecoveryP50()), round(r.RecoveryMax()))
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Lookup returns the scenarios named, all of them for "all", and those of
// a topology for "passthrough" or "aggregate".
func Lookup(names []string, kafka bool) ([]Scenario, error) {
	var all []Scenario
	for _, s := range Scenarios() {
		if kafka || !s.OnlyKafka {
			all = append(all, s)
		}
	}
	if len(names) == 0 || len(names) == 1 && names[0] == "all" {
		return all, nil
	}
	var out []Scenario
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n || n == cmp.Or(s.Topology, topologyPassthrough) {
				out, found = append(out, s), true
			}
		}
		if !found {
			var known []string
			for _, s := range all {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("unknown scenario %q (known: %s; or all, %s, %s)", n, strings.Join(known, ", "), topologyPassthrough, topologyAggregate)
		}
	}
	return out, nil
}
