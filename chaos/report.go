package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTable writes results as the Markdown table of RELIABILITY.md.
func WriteTable(w io.Writer, results []*Result, command string) {
	fmt.Fprintln(w, "| scenario | records | faults injected | recovery p50 / max | duplicates | missing | aborted reads | order violations | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		verdict := "exactly once"
		if !r.OK() {
			verdict = "**FAILED**"
		}
		rec := "n/a"
		if len(r.Recovery) > 0 {
			rec = fmt.Sprintf("%s / %s", round(r.RecoveryP50()), round(r.RecoveryMax()))
		}
		var dup, miss, order int64 = -1, -1, -1
		if r.Verify != nil {
			dup, miss, order = r.Verify.Duplicates, r.Verify.Missing, r.Verify.OrderViolations
		}
		faults := r.Faults
		if len(r.Notes) > 0 {
			faults += " (" + strings.Join(r.Notes, "; ") + ")"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %d | %d | %d | %s |\n", r.Scenario, r.Records, faults, rec, dup, miss, r.AbortedReads(), order, verdict)
	}
	if command != "" {
		fmt.Fprintf(w, "\nProduced by `%s`.\n", command)
	}
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// Lookup returns the scenarios named, or all of them for "all".
func Lookup(names []string) ([]Scenario, error) {
	all := Scenarios()
	if len(names) == 0 || len(names) == 1 && names[0] == "all" {
		return all, nil
	}
	var out []Scenario
	for _, n := range names {
		found := false
		for _, s := range all {
			if s.Name == n {
				out, found = append(out, s), true
			}
		}
		if !found {
			var known []string
			for _, s := range all {
				known = append(known, s.Name)
			}
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}
