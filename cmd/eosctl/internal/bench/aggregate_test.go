package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/eosctltest"
)

// aggregateConfig is a tiny aggregate benchmark: a few thousand orders,
// enough for dead letters of both kinds (a poison pill at 500, late records
// every 1000) and a few hundred windows.
func aggregateConfig() Config {
	return Config{
		Modes:      []Mode{ModeEOS},
		Topology:   "aggregate",
		Intervals:  []Interval{{Fixed: 100 * time.Millisecond}},
		Records:    3000,
		Partitions: 3,
		Repeat:     1,
		RunTimeout: time.Minute,
	}
}

// `eosctl bench --topology aggregate --modes eos` on the embedded broker:
// the eos worker gets aggcheck.Config through --config (a child
// process, as eosctl bench runs it) or topologies.Options (in process),
// drains aggcheck.Input, the heartbeats close every window, and
// aggcheck.Judge finds every window and dead letter exactly once.
// Throughput, CPU and RSS are measured; e2e latency is not (no latency
// phase), and the table says "-" for it rather than 0.
func TestAggregateBenchJudgesEveryWindowExactlyOnce(t *testing.T) {
	bin, cleanup, err := eosctltest.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for _, inProcess := range []bool{false, true} {
		cfg := aggregateConfig()
		cfg.Bin, cfg.InProcess = bin, inProcess
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		rep, err := Run(ctx, cfg)
		cancel()
		if err != nil {
			t.Fatalf("in process %v: %v", inProcess, err)
		}
		if len(rep.Cells) != 1 || len(rep.Cells[0].Runs) != 1 {
			t.Fatalf("in process %v: got %+v, want one cell with one eos run", inProcess, rep.Cells)
		}
		r := rep.Cells[0].Runs[0]
		a := r.Aggregate
		if a == nil || !a.OK() || !r.Verified || a.Windows.Reference == 0 || a.DeadLetters.Reference < 3 {
			t.Fatalf("in process %v: the aggregate was not judged exactly once: %+v (%v)", inProcess, r, a)
		}
		// 3000 orders, 3 late records (999, 1999, 2999), 3 poison pills (500, 1497, 2494).
		if r.Records != 3006 || a.InputRecords != 3006 || rep.Params.Records[0] != 3006 {
			t.Errorf("in process %v: %d records in the run, %d judged, %v in the params; want 3006", inProcess, r.Records, a.InputRecords, rep.Params.Records)
		}
		if r.RPS <= 0 || r.CPUSeconds <= 0 || r.PeakRSSMiB <= 0 || r.Commits == 0 || r.MBps <= 0 {
			t.Errorf("in process %v: a drain figure is missing: %+v", inProcess, r)
		}
		if r.E2ESamples != 0 || r.E2EP99Ms != 0 {
			t.Errorf("in process %v: an aggregate run has no latency phase, but reports %d samples, p99 %.1f ms", inProcess, r.E2ESamples, r.E2EP99Ms)
		}
		var table bytes.Buffer
		if err := WriteTable(&table, rep); err != nil {
			t.Fatal(err)
		}
		var row string
		for _, line := range strings.Split(table.String(), "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[1] == "-" && f[2] == "eos" {
				row = line
			}
		}
		if row == "" || !strings.Contains(row, "1/1") || !strings.Contains(table.String(), "no e2e latency") {
			t.Errorf("in process %v: the table has no eos aggregate row with a verdict, or no note on latency:\n%s", inProcess, table.String())
		}
		// The other outputs take a cell of size 0.
		dir := t.TempDir()
		for _, name := range []string{"b.svg", "b.png"} {
			if err := WriteChart(filepath.Join(dir, name), rep); err != nil {
				t.Errorf("in process %v: %s: %v", inProcess, name, err)
			}
		}
		if err := WriteCSV(io.Discard, rep); err != nil {
			t.Errorf("in process %v: csv: %v", inProcess, err)
		}
	}
}

// The aggregate topology's settings that make no sense are configuration
// errors naming the field, before anything starts.
func TestAggregateBadConfigurationsNameTheirField(t *testing.T) {
	for name, c := range map[string]struct {
		mod     func(*Config)
		setting string
		want    string
	}{
		"baseline":                 {func(c *Config) { c.Modes = []Mode{ModeBaseline, ModeEOS} }, "bench.Config.Modes", "stateless copy loop"},
		"bare":                     {func(c *Config) { c.Modes = []Mode{ModeBare, ModeEOS} }, "bench.Config.Modes", "the bare mode is a stateless copy loop"},
		"sizes":                    {func(c *Config) { c.Sizes = []int{100} }, "bench.Config.Sizes", "leave the sizes empty"},
		"records":                  {func(c *Config) { c.Records = aggcheck.MaxRecords + 1 }, "bench.Config.Records", "at most 600000"},
		"eos-nopreagg passthrough": {func(c *Config) { c.Topology, c.Modes = "passthrough", []Mode{ModeEOS, ModeEOSNoPreagg} }, "bench.Config.Modes", "eos-nopreagg mode turns off the aggregate topology's pre-aggregation; passthrough has none"},
		"kstreams wordcount": {func(c *Config) {
			c.Topology, c.Modes, c.Brokers = "wordcount", []Mode{ModeEOS, ModeKStreams}, []string{"k:9092"}
		}, "bench.Config.Topology", "passthrough, aggregate, dedup and etl topologies"},
	} {
		cfg := aggregateConfig()
		c.mod(&cfg)
		start := time.Now()
		_, err := Run(context.Background(), cfg)
		var ce *eos.ConfigError
		if !errors.As(err, &ce) || ce.Setting != c.setting || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run returned %v, want an *eos.ConfigError for %s saying %q", name, err, c.setting, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: rejecting the configuration took %s", name, d)
		}
	}
}

// The Kafka Streams peer is given the window of aggcheck.Config,
// which eos reads from the file the bench writes: the two must not drift.
func TestAggregateWindowIsVerifysConfig(t *testing.T) {
	for _, want := range []string{"size: " + aggregateWindow.String(), "grace: " + strings.TrimSuffix(aggregateGrace.String(), "0s")} {
		if !strings.Contains(aggcheck.Config, want) {
			t.Errorf("aggcheck.Config lacks %q: the kstreams peer's window flags differ from eos's configuration:\n%s", want, aggcheck.Config)
		}
	}
}

// Without modes, an aggregate run is eos alone: the default modes' baseline
// and bare only copy, and refusing the user's own default would make
// "eosctl bench --topology aggregate" an error.
func TestAggregateDefaultModesAreEOS(t *testing.T) {
	cfg := Config{Topology: "aggregate"}
	if err := cfg.validate(); err != nil {
		t.Fatalf("the aggregate with the default modes: %v", err)
	}
	if !slices.Equal(cfg.Modes, []Mode{ModeEOS}) {
		t.Fatalf("default modes of the aggregate: %v, want [eos]", cfg.Modes)
	}
	cfg = Config{}
	if err := cfg.validate(); err != nil || !slices.Equal(cfg.Modes, AllModes) {
		t.Fatalf("default modes of passthrough: %v (%v), want %v", cfg.Modes, err, AllModes)
	}
}

// eos and eos-nopreagg side by side on the aggregate: both judged every
// window and dead letter exactly once, in rotated order; eos-nopreagg really
// ran without the combiner (its workers consumed a repartition record per
// good order, so at least twice the input in all, where eos's partials are
// far fewer), and the table's notes give eos / eos-nopreagg.
func TestAggregateBenchRunsEOSWithAndWithoutPreaggregation(t *testing.T) {
	cfg := aggregateConfig()
	cfg.Modes, cfg.InProcess, cfg.Repeat = []Mode{ModeEOS, ModeEOSNoPreagg}, true, 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cells[0]
	if len(c.Runs) != 4 {
		t.Fatalf("%d runs, want eos and eos-nopreagg in 2 rounds", len(c.Runs))
	}
	for _, r := range c.Runs {
		if !r.Verified || r.Aggregate == nil || !r.Aggregate.OK() {
			t.Fatalf("round %d %s: not judged exactly once: %+v", r.Round, r.Mode, r.Aggregate)
		}
		first := map[int]Mode{1: ModeEOS, 2: ModeEOSNoPreagg}[r.Round]
		if (r.Seq == 1) != (r.Mode == first) {
			t.Fatalf("round %d: %s ran %d-th, want %s first", r.Round, r.Mode, r.Seq, first)
		}
		t.Logf("round %d %s: %d records consumed in all for %d input records, %.0f rec/s", r.Round, r.Mode, r.CommittedRec, r.Records, r.RPS)
		switch {
		case r.Mode == ModeEOSNoPreagg && r.CommittedRec < 2*3000:
			t.Errorf("eos-nopreagg consumed %d records for 3000 orders: its repartition topic did not carry every order", r.CommittedRec)
		case r.Mode == ModeEOS && r.CommittedRec >= 2*3000:
			t.Errorf("eos consumed %d records for 3000 orders: nothing was pre-aggregated", r.CommittedRec)
		}
	}
	if c.Modes[ModeEOSNoPreagg].RPS <= 0 || c.Ratio(ModeEOS, ModeEOSNoPreagg).Median <= 0 {
		t.Fatalf("cell: eos-nopreagg %.0f rec/s, eos/eos-nopreagg %.3f", c.Modes[ModeEOSNoPreagg].RPS, c.Ratio(ModeEOS, ModeEOSNoPreagg).Median)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "eos / eos-nopreagg") || !strings.Contains(table.String(), "eos-nopreagg  ") {
		t.Errorf("the table lacks the eos-nopreagg row or its note:\n%s", table.String())
	}
}
