package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/cmd/eosctl/internal/bench"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/sink"
)

// Each class of error gets the exit code docs/cli.md documents.
func TestExitCodesFollowTheDocumentedTable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("broker unreachable"), exitFailure},
		{fmt.Errorf("run: %w", eos.BadConfig("pipeline.Config.Output", "required")), exitUsage},
		{fmt.Errorf("lag: topic %q: %w", "x", eos.ErrNoTopic), exitUsage},
		{usage(errors.New("unknown flag --x")), exitUsage},
		{fmt.Errorf("worker: %w", &fencing.FencedError{}), exitFenced},
		{fmt.Errorf("sink: %w", sink.ErrAuth), exitAuth},
		{fmt.Errorf("produce: %w", context.Canceled), exitInterrupted},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// A configuration mistake the library reports in its own terms reaches the
// user in the terms they typed: the setting becomes its flag, in the
// setting's place and wherever the reason quotes a setting.
func TestConfigErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("run: %w", eos.BadConfig("pipeline.Config.Output", "required")), "run: --output: required"},
		{eos.BadConfig("pipeline.Config.Inputs", "topic %q is named twice across pipeline.Config.Inputs and pipeline.Config.Output", "t"),
			`--input: topic "t" is named twice across --input and --output`},
		{eos.BadConfig("pipeline.Config.Outputs", "taken"), "--config (its outputs): taken"},
		{eos.BadConfig("sink.Config", "DSN is required"), "invalid configuration: DSN is required"},
		{errors.New("no answer from 127.0.0.1:9092"), "no answer from 127.0.0.1:9092"},
	} {
		if got := inFlagTerms(c.err); got != c.want {
			t.Errorf("inFlagTerms(%v)\n got  %q\n want %q", c.err, got, c.want)
		}
	}
}

// The bench table's advice names bench.Config's fields; eosctl bench
// prints it naming the flags.
func TestBenchTableAdviceNamesTheFlags(t *testing.T) {
	rep := &bench.Report{Params: bench.Params{NoIdempotencyKey: true}}
	var b strings.Builder
	if err := bench.WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	got := inFlagNames(b.String())
	if !strings.Contains(got, "(--eos-idempotency-key=false)") || strings.Contains(got, "bench.Config") {
		t.Errorf("the table as eosctl prints it:\n%s", got)
	}
	if got := inFlagNames("idle transaction: raise bench.Config.Records"); got != "idle transaction: raise --records" {
		t.Errorf("got %q", got)
	}
}

// The command line turns the library's configuration errors into one line
// naming the flag, and exit code 2, before it connects to anything (the
// brokers named here do not exist).
func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "b.json")
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"broker", "--nodes", "0", "--data-dir", ""}, "eosctl: --nodes must be between 1 and 16, got 0"},
		{[]string{"broker", "--listen", "127.0.0.1:notaport", "--data-dir", ""}, `--listen: "127.0.0.1:notaport" has an invalid port`},
		{[]string{"--brokers", "127.0.0.1:1", "run", "passthrough", "--app", "a", "--instance", "0", "--input", "t", "--output", "t"},
			`topic "t" is named twice across --input and --output`},
		{[]string{"--brokers", "127.0.0.1:1", "run", "passthrough", "--app", "a b", "--instance", "0", "--input", "t", "--output", "u"},
			`--app: name "a b" has the character ' ' at byte 1`},
		{[]string{"--brokers", "127.0.0.1:1", "run", "passthrough", "--app", "a", "--instance", "x/y", "--input", "t", "--output", "u"},
			`--instance: id "x/y" has the character '/' at byte 1`},
		{[]string{"--brokers", "127.0.0.1:1", "run", "passthrough", "--app", "a", "--instance", "0", "--input", "t", "--output", "u", "--group-protocol", "new"},
			`--group-protocol: "new": want classic or consumer`},
		{[]string{"--brokers", "127.0.0.1:1", "run", "wordcount", "--app", "a", "--instance", "0", "--input", "t", "--output", "u", "--config", "x.yaml"},
			"--config: the wordcount topology takes no configuration file"},
		// bench.Config judges these; the flags are named all the same.
		{[]string{"bench", "--intervals", "10ms,soon"}, `--intervals: interval "soon" is not a duration: want one such as 100ms, or auto`},
		{[]string{"bench", "--sizes", "0"}, "--sizes: record size 0 must be between 1 and"},
		{[]string{"bench", "--modes", "eos,fast"}, `--modes: mode "fast": want baseline, bare, eos, eos-nopreagg, eos-avro, kstreams, kstreams-defaults, javaloop or javaloop-defaults`},
		// Kafka Streams runs against real brokers only, as a JVM child, on passthrough or aggregate.
		{[]string{"bench", "--modes", "eos,kstreams"}, "--modes: the kstreams mode runs a JVM peer against real Apache Kafka: it needs brokers (--brokers or EOSCTL_BROKERS), not the embedded broker"},
		{[]string{"--brokers", "127.0.0.1:1", "bench", "--modes", "eos,kstreams", "--in-process"}, "--modes: the kstreams mode runs a JVM child process; with --in-process"},
		{[]string{"--brokers", "127.0.0.1:1", "bench", "--modes", "eos,kstreams", "--topology", "wordcount"}, "--topology: the bench runs the passthrough, aggregate, dedup and etl topologies and the etl join (join), whose output it can judge exactly once; wordcount's output has no judge here"},
		// The aggregate runs in eos and kstreams, on its own input.
		{[]string{"bench", "--topology", "aggregate", "--modes", "baseline,eos"}, "--modes: the aggregate topology runs in the eos and kstreams modes only; the baseline mode is a stateless copy loop"},
		{[]string{"bench", "--topology", "aggregate", "--modes", "eos", "--sizes", "100"}, "--sizes: the aggregate topology's input is aggcheck.Input's JSON orders"},
		{[]string{"bench", "--topology", "aggregate", "--modes", "eos", "--records", "600001"}, "--records: the aggregate input holds at most 600000 regular records"},
		{[]string{"bench", "--topology", "nosuch"}, `--topology: unknown topology "nosuch"`},
		{[]string{"bench", "--threads", "1,0"}, `--threads: thread count "0": want a positive whole number`},
		{[]string{"bench", "--warmup-records", "-5"}, "--warmup-records must be 0 (none) or positive"},
		{[]string{"bench", "--jvm-heap", "lots"}, `--jvm-heap: "lots": want a java -Xmx size`},
		{[]string{"bench", "--kstreams-store", "disk"}, `--kstreams-store: "disk": want rocksdb or memory`},
		{[]string{"--brokers", "127.0.0.1:1", "bench", "--modes", "eos,javaloop", "--topology", "aggregate"}, "--modes: the aggregate topology runs in the eos and kstreams modes only; the javaloop mode is a stateless copy loop"},
		{[]string{"bench", "--latency-duration", "-1s"}, "--latency-duration: must not be negative, got -1s"},
		{[]string{"bench", "--run-timeout", "-1s"}, "--run-timeout: must not be negative, got -1s"},
		{[]string{"bench", "--rtt", "-1ms"}, "--rtt: must not be negative, got -1ms"},
		{[]string{"bench", "--chart", "b.gif"}, `--chart: chart "b.gif": the file name must end in .svg or .png`},
		{[]string{"bench", "--json", missing}, "--json: cannot write " + missing + ": its directory does not exist"},
		{[]string{"bench", "--csv", missing + ".csv"}, "--csv: cannot write " + missing + ".csv: its directory does not exist"},
		{[]string{"bench", "--chart", missing + ".svg"}, "--chart: cannot write " + missing + ".svg: its directory does not exist"},
	} {
		code, stderr := executeCapturing(t, c.args)
		if code != exitUsage || !strings.Contains(stderr, c.says) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("eosctl %s: exit %d, stderr %q; want exit %d and one line with %q", strings.Join(c.args, " "), code, stderr, exitUsage, c.says)
		}
	}
}

// A bench command line with a mistake writes nothing: not even the CPU
// profile it was asked for, which is created only once the rest is judged.
func TestBadBenchFlagsLeaveNoProfileBehind(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "cpu.out")
	args := []string{"bench", "--cpuprofile", profile, "--json", filepath.Join(dir, "no", "b.json")}
	if code, stderr := executeCapturing(t, args); code != exitUsage || !strings.Contains(stderr, "--json: cannot write") {
		t.Fatalf("eosctl %s: exit %d, stderr %q; want exit %d naming --json", strings.Join(args, " "), code, stderr, exitUsage)
	}
	if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the profile %s was created (stat: %v)", profile, err)
	}
}

// executeCapturing runs the command line in-process and returns its exit
// code and what it wrote to stderr.
func executeCapturing(t *testing.T, args []string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	code := execute(newRoot(), args)
	os.Stderr = saved
	w.Close()
	return code, <-got
}

// A comma-separated flag value yields its trimmed, non-empty items.
func TestSplitListTrimsAndDropsEmptyItems(t *testing.T) {
	if got := fmt.Sprint(splitList(" a, b,,c ,")); got != "[a b c]" {
		t.Fatalf("splitList = %s, want [a b c]", got)
	}
	if got := splitList(" , "); got != nil {
		t.Fatalf("splitList of only commas = %v, want none", got)
	}
}
