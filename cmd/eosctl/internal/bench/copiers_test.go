package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The eos copier runs `eosctl run` with the flags the benchmark has always
// given it, whichever place builds the command line: a fixed interval, or
// auto with its budget and ceiling, the child connection flags, and the
// idempotency key left off on request.
func TestEOSCopierArgsAreTheWorkersFlags(t *testing.T) {
	cfg := &Config{Topology: "passthrough", OverheadBudget: 0.03, MaxCommitInterval: 5 * time.Second,
		ChildArgs: []string{"--timeout", "10s", "--tls"}}
	job := copyJob{mode: ModeEOS, interval: Interval{Fixed: 100 * time.Millisecond}, app: "eosbench-x",
		inputs: []string{"in-a", "in-b"}, output: "out", workers: 2}
	brokers := []string{"127.0.0.1:1", "127.0.0.1:2"}
	common := []string{"run passthrough", "--app eosbench-x", "--instance 1", "--events -", "--metrics-addr ",
		"--brokers 127.0.0.1:1,127.0.0.1:2", "--log-level warn", "--input in-a,in-b", "--output out",
		"--timeout 10s", "--tls"}

	want := append(slices.Clone(common), "--commit-interval 100ms")
	checkFlags(t, "fixed", copierArgs(cfg, brokers, job, 1), want)

	job.interval = Interval{Auto: true}
	cfg.NoIdempotencyKey = true
	want = append(slices.Clone(common), "--commit-interval auto", "--eos-overhead-budget 3%",
		"--max-commit-interval 5s", "--idempotency-key=false")
	checkFlags(t, "auto", copierArgs(cfg, brokers, job, 1), want)
}

// checkFlags compares a command line with the flags it must hold, as
// "--flag value" items in any order: the order of distinct flags does not
// matter to the command.
func checkFlags(t *testing.T, name string, args, want []string) {
	t.Helper()
	var got []string
	for i := 0; i < len(args); i++ {
		item := args[i]
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") && !strings.Contains(item, "=") {
			item += " " + args[i+1]
			i++
		}
		got = append(got, item)
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s copier:\n got  %q\n want %q", name, got, want)
	}
}
