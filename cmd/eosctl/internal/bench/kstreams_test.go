package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
)

// On Apache Kafka (EOS_TEST_BROKER=kafka), eos, Kafka Streams and the Java
// transactional loop (matched, and with its clients' defaults) run the same
// tiny benchmark one after the other on the same input, at 2 threads, each
// JVM after a warm-up backlog: every output verified exactly once, the JVM
// modes' throughput, end-to-end latency, CPU and peak RSS measured (not
// zero), their commit figures absent (0 in the report, "-" in the table);
// the matched peers report that their clients run with exactly eos's
// effective settings (compression, batch, linger, acks, in-flight, fetch
// bounds) and the defaults loop with Java's (no compression, 16 KiB
// batches); every JVM ran the 2 threads it was given (a peer that runs
// another count fails its run). Then eos and Kafka Streams (in-memory
// stores, emitStrategy(onWindowClose), 1 thread) run the aggregate topology
// on aggcheck.Input, every window and dead letter of both judged
// exactly once; the peer's jar is reused by a second build.
// On the embedded broker the kstreams mode is a configuration error naming
// bench.Config.Modes, before anything starts: Kafka Streams is measured on
// real Apache Kafka only.
func TestKStreamsModeRunsBesideEOSOnApacheKafkaOnly(t *testing.T) {
	cfg := Config{
		Modes:         []Mode{ModeEOS, ModeKStreams, ModeJavaLoop, ModeJavaLoopDefaults},
		Threads:       []int{2},
		WarmupRecords: 5_000,
		Intervals:     []Interval{{Fixed: 100 * time.Millisecond}},
		Sizes:         []int{100},
		// Long enough a drain for every mode's CPU to be measured: a JVM's
		// is counted from when its "started" line is read, and the Java
		// loop drains 20,000 records in about 40 ms, within the 10 ms
		// ticks of /proc and the delay of reading that line on a busy
		// machine (a CI run read 0 CPU s for it).
		Records:         200_000,
		Partitions:      3,
		Repeat:          1,
		LatencyRate:     500,
		LatencyDuration: time.Second,
		RunTimeout:      3 * time.Minute,
	}
	if !testbroker.IsKafka() {
		start := time.Now()
		_, err := Run(context.Background(), cfg)
		var ce *eos.ConfigError
		if !errors.As(err, &ce) || ce.Setting != "bench.Config.Modes" || !strings.Contains(err.Error(), "bench.Config.Brokers") {
			t.Fatalf("kstreams on the embedded broker: Run returned %v, want an eos.ConfigError on bench.Config.Modes naming bench.Config.Brokers", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("refusing the kstreams mode took %s; it must fail before starting anything", d)
		}
		return
	}
	cfg.Brokers = testbroker.Shared(t).Addrs()
	// The copiers are child processes (Kafka Streams cannot run in this
	// one, and eos beside it must be measured the same way): eosctl, not
	// this test binary.
	bin, cleanup, err := eosctltest.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cfg.Bin = bin
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 1 || len(rep.Cells[0].Runs) != 4 {
		t.Fatalf("got %d cells, want 1 with an eos, a kstreams and two javaloop runs: %+v", len(rep.Cells), rep.Cells)
	}
	cell := rep.Cells[0]
	eosSettings, err := pipeline.WorkerClientSettings()
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Params.ClientSettings[ModeEOS]; got != eosSettings {
		t.Errorf("the report's eos settings %+v, want %+v", got, eosSettings)
	}
	for _, r := range cell.Runs {
		if r.Threads != 2 {
			t.Errorf("%s run at %d threads, want 2", r.Mode, r.Threads)
		}
		switch {
		case r.Mode == ModeEOS:
		case r.Settings == nil:
			t.Errorf("%s run: the peer reported no client settings", r.Mode)
		case r.Mode.matched() && *r.Settings != eosSettings:
			t.Errorf("%s run's clients ran with %s;\nwant eos's %s", r.Mode, *r.Settings, eosSettings)
		case !r.Mode.matched() && (r.Settings.Compression != "none" || r.Settings.BatchMaxBytes != 16384 || r.Settings.FetchMaxBytes != 50<<20):
			t.Errorf("%s run's clients ran with %s; want the Java clients' defaults (compression none, batch 16384, fetch 52428800 B/response)", r.Mode, *r.Settings)
		}
	}
	for _, r := range cell.Runs {
		if !r.Verified || r.Duplicates != 0 || r.Missing != 0 {
			t.Errorf("%s run not verified exactly once: %+v", r.Mode, r)
		}
		if r.RPS <= 0 || r.E2ESamples == 0 || r.E2EP99Ms <= 0 || r.CPUSecPerM <= 0 || r.PeakRSSMiB <= 0 || r.CommittedRec < cfg.Records {
			t.Errorf("%s run lacks a measured figure: %+v", r.Mode, r)
		}
		if r.Mode.jvm() && (r.CommitP50Ms != 0 || r.CommitP99Ms != 0 || r.OverheadPct != 0) {
			t.Errorf("%s run has commit figures the JVM peer never reported: %+v", r.Mode, r)
		}
	}
	if cell.Ratio(ModeEOS, ModeJavaLoop).Median <= 0 || cell.Modes[ModeJavaLoopDefaults].RPS <= 0 {
		t.Errorf("the cell lacks the javaloop figures: %+v", cell.Modes)
	}
	if ks := cell.Modes[ModeKStreams]; ks.RPS <= 0 || cell.Ratio(ModeEOS, ModeKStreams).Median <= 0 || ks.PeakRSSMiB <= 0 || ks.CPUSecPerM <= 0 {
		t.Errorf("the cell lacks the kstreams figures: %+v", cell)
	}
	var wide bytes.Buffer
	if err := WriteWideTable(&wide, rep); err != nil {
		t.Fatal(err)
	}
	table := wide.String()
	prose := strings.ReplaceAll(table, "\n  ", " ") // the prose wraps at 120 columns (the rows start with spaces too)
	var ksRow string
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "100" && f[2] == "kstreams" {
			ksRow = line
		}
	}
	if !strings.Contains(table, "vs ks") || strings.Count(ksRow, " - ") < 3 {
		t.Errorf("the table has no kstreams column, or its kstreams row shows commit figures:\n%s", table)
	}
	if want := "client settings of eos, kstreams, javaloop: " + eosSettings.String(); !strings.Contains(prose, want) || !strings.Contains(prose, "eos vs javaloop (threads 2") {
		t.Errorf("the table does not show the matched settings (%q) or the eos/javaloop ratio:\n%s", want, table)
	}

	// The aggregate: the same two modes on aggcheck.Input, every
	// window and dead letter of both judged exactly once, no e2e latency.
	agg := aggregateConfig()
	agg.Modes, agg.Brokers, agg.Bin, agg.Records, agg.RunTimeout = []Mode{ModeEOS, ModeKStreams}, cfg.Brokers, bin, 20_000, 3*time.Minute
	agg.Threads, agg.WarmupRecords, agg.KStreamsStore = []int{1}, 2_000, "memory"
	arep, err := Run(ctx, agg)
	if err != nil {
		t.Fatal(err)
	}
	if len(arep.Cells) != 1 || len(arep.Cells[0].Runs) != 2 {
		t.Fatalf("aggregate: got %+v, want 1 cell with an eos and a kstreams run", arep.Cells)
	}
	for _, r := range arep.Cells[0].Runs {
		if a := r.Aggregate; a == nil || !a.OK() || !r.Verified || a.Windows.Reference == 0 {
			t.Errorf("aggregate %s run not judged exactly once: %+v (%v)", r.Mode, r, a)
		}
		if r.RPS <= 0 || r.CPUSecPerM <= 0 || r.PeakRSSMiB <= 0 || r.E2ESamples != 0 {
			t.Errorf("aggregate %s run: a drain figure is missing, or it has e2e samples: %+v", r.Mode, r)
		}
		if r.Mode == ModeKStreams && (r.CommitP50Ms != 0 || r.CommitP99Ms != 0 || r.OverheadPct != 0 || r.Threads != 1 || r.Settings == nil || *r.Settings != eosSettings) {
			t.Errorf("aggregate kstreams run has commit figures Kafka Streams never reported, or not 1 thread and eos's settings: %+v", r)
		}
	}
	if c := arep.Cells[0]; c.Modes[ModeKStreams].RPS <= 0 || c.Ratio(ModeEOS, ModeKStreams).Median <= 0 {
		t.Errorf("the aggregate cell lacks the kstreams figures: %+v", c)
	}

	start := time.Now()
	if _, err := peerJar(ctx, discard{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the second peerJar took %s; it must reuse the built jar", d)
	}
}

// Without java or mvn on PATH, the kstreams mode fails with one line naming
// the missing program, before building anything.
func TestKStreamsPeerNamesAMissingTool(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := peerJar(context.Background(), discard{})
	if !errors.Is(err, kafkacluster.ErrMissingTool) || !strings.Contains(err.Error(), "java is not on PATH") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("peerJar without java: %v; want one line naming java", err)
	}
}

type discard struct{}

func (discard) Warn(string, ...any) {}

// The kstreams fleet's progress is its group's committed offsets: every
// increase on the run's inputs becomes one committed event with the records
// consumed since the last one, the first timed from RUNNING, and offsets on
// other topics count for nothing. Works on either broker: it only commits
// and fetches offsets.
func TestKStreamsProgressIsTheGroupsCommittedOffsets(t *testing.T) {
	cl := testbroker.Connect(t, testbroker.Start(t, broker.Config{}), time.Minute)
	adm := kadm.NewClient(cl.Client)
	for _, topic := range []string{"in", "live", "other"} {
		if _, err := adm.CreateTopic(cl.Ctx, 2, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu     sync.Mutex
		events []pipeline.Event
	)
	f := &kstreamsFleet{started: make(chan struct{}), startedT: time.Now()}
	close(f.started)
	ctx, cancel := context.WithCancel(cl.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.poll(ctx, adm, "ks-app", []string{"in", "live"}, func(e pipeline.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}, discard{})
	}()
	commit := func(offs map[string]map[int32]int64) {
		t.Helper()
		var o kadm.Offsets
		for topic, ps := range offs {
			for p, at := range ps {
				o.AddOffset(topic, p, at, -1)
			}
		}
		if err := adm.CommitAllOffsets(cl.Ctx, "ks-app", o); err != nil {
			t.Fatal(err)
		}
	}
	waitEvents := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := len(events)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d committed events within 10s, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	commit(map[string]map[int32]int64{"in": {0: 100, 1: 50}})
	waitEvents(1)
	commit(map[string]map[int32]int64{"in": {0: 300}, "live": {1: 7}, "other": {0: 1000}})
	waitEvents(2)
	time.Sleep(4 * kstreamsPoll) // nothing more happened: no more events
	cancel()
	<-done
	if len(events) != 2 {
		t.Fatalf("got %d events, want 2: %+v", len(events), events)
	}
	for i, want := range []int{150, 207} {
		e := events[i]
		if e.Kind != pipeline.EventCommitted || e.Consumed != want || e.Duration <= 0 || e.CommitDuration != 0 {
			t.Errorf("event %d = %+v, want committed with %d consumed, a duration and no commit duration", i, e, want)
		}
	}
	if begin := events[0].Time.Add(-events[0].Duration); !begin.Equal(f.startedT) {
		t.Errorf("the first event begins at %s, want RUNNING at %s", begin, f.startedT)
	}
}

// A latency phase producing at more than half a mode's drain throughput
// measures a queue as much as the copier (Kafka Streams at 11,000 rec/s
// against the default 10,000 live records per second showed an e2e p50 of
// 800 ms, and 90 ms at 1,000/s): the table says which runs, and which
// setting to lower. A kstreams row of the wide table shows "-" for the
// commit figures.
func TestTableWarnsWhenTheLatencyPhaseQueues(t *testing.T) {
	rep := &Report{Params: Params{LatencyRate: 10_000, Modes: []Mode{ModeEOS, ModeKStreams}}, Cells: []Cell{{Interval: "100ms", Size: 100,
		Runs: []RunResult{{Round: 1, Mode: ModeEOS, Interval: "100ms", Size: 100, RPS: 366_868, Verified: true},
			{Round: 1, Mode: ModeKStreams, Interval: "100ms", Size: 100, RPS: 11_237, Verified: true}}}}}
	var b bytes.Buffer
	if err := WriteWideTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(b.String(), "\n  ", " ") // the notes wrap at 120 columns
	if !strings.Contains(got, "over half the drain throughput of 1 run(s) (kstreams/100ms/100 round 1 (11,237 rec/s))") ||
		!strings.Contains(got, "lower bench.Config.LatencyRate") || strings.Contains(got, "eos/100ms") {
		t.Errorf("the table does not warn about the kstreams run alone:\n%s", got)
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "100  kstreams ") && strings.Count(line, " - ") < 3 {
			t.Errorf("kstreams row without '-' for its commit figures: %q", line)
		}
	}
}
