package topologies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTopologyThroughput compares the built-in topologies in one run:
// each op is one round in which every mode drains its own fresh backlog of
// 1,000,000 100-byte datagen records of 16 users (EOS_BENCH_RECORDS to
// change it; wordcount, which re-keys every word, a tenth of that) from 6
// partitions with one in-process worker (commit interval 100ms) against a
// fresh embedded broker in the same process, the modes interleaved round by
// round. A mode's rate is the input records over the time from the
// assignment of its partitions (after the group join) until its group has
// committed everything in the input and in any internal topic: the input's
// records per second, whatever internal topics a mode adds. It reports each
// mode's median, its ratio to passthrough, and the CPU the process used per
// input record (every mode is CPU-bound on 2 cores, so the ratios are
// ratios of CPU per record).
//
// The backlog is large on purpose: a repartitioning mode finishes at least
// two commit intervals after its last input record (one to commit the
// record's repartition record, one to fold it), and passthrough drains
// 300,000 records in about half a second, so a short backlog measures that
// tail more than the throughput.
//
//	go test ./topologies -run '^$' -bench TopologyThroughput -benchtime 5x
//	EOS_BENCH_MODES=passthrough,aggregate go test ./topologies -run '^$' -bench TopologyThroughput -benchtime 5x
//	EOS_BENCH_MODES=passthrough,aggregate,aggregate-no-preaggregate,aggregate-sessions go test ./topologies -run '^$' -bench TopologyThroughput -benchtime 5x
func BenchmarkTopologyThroughput(b *testing.B) {
	n := benchRecords()
	dir := b.TempDir()
	aggCfg := filepath.Join(dir, "agg.yaml")
	body := "group_by: user\ntime: ts\nwindow: {size: 1s, grace: 5s}\naggregations: {orders: count(), total: sum(amount), biggest: max(amount)}\nrepartition: %v\n"
	if err := os.WriteFile(aggCfg, fmt.Appendf(nil, body, true), 0o644); err != nil {
		b.Fatal(err)
	}
	aggLocal := filepath.Join(dir, "agg-local.yaml")
	if err := os.WriteFile(aggLocal, fmt.Appendf(nil, body, false), 0o644); err != nil {
		b.Fatal(err)
	}
	// The combiner's worst case: 100,000 groups, so a transaction's
	// records hardly ever share a group and pane.
	aggMany := filepath.Join(dir, "agg-many.yaml")
	if err := os.WriteFile(aggMany, []byte(strings.Replace(fmt.Sprintf(body, true), "group_by: user", "group_by: seq % 100000", 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	// Session windows of each user's records (a gap of 1s: datagen's users
	// are active all through a backlog, so each one's session grows until
	// the end), and the same tumbling windows without the combiner, which
	// sessions do not use: every record goes through the repartition topic
	// alone in both.
	aggSessions := filepath.Join(dir, "agg-sessions.yaml")
	if err := os.WriteFile(aggSessions, []byte(strings.Replace(fmt.Sprintf(body, true), "window: {size: 1s, grace: 5s}", "window: {session_gap: 1s, grace: 5s}", 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	aggNoPreagg := filepath.Join(dir, "agg-nopreagg.yaml")
	if err := os.WriteFile(aggNoPreagg, fmt.Appendf(nil, body+"preaggregate: false\n", true), 0o644); err != nil {
		b.Fatal(err)
	}
	type mode struct {
		name, topo, cfg, repart string
		share                   int64 // drains n/share records
	}
	modes := []mode{
		{"passthrough", "passthrough", "", "", 1},
		{"etl", "etl", "examples/etl-big-orders.yaml", "", 1},
		{"aggregate", "aggregate", aggCfg, "windows", 1},
		{"aggregate-no-repartition", "aggregate", aggLocal, "", 1},
		{"aggregate-100k-groups", "aggregate", aggMany, "windows", 1},
		{"aggregate-no-preaggregate", "aggregate", aggNoPreagg, "windows", 1},
		{"aggregate-sessions", "aggregate", aggSessions, "windows", 1},
		{"wordcount", "wordcount", "", "counts", 10}, // ≈13 repartitioned words a record
	}
	if only := os.Getenv("EOS_BENCH_MODES"); only != "" { // e.g. passthrough,aggregate
		modes = slices.DeleteFunc(modes, func(m mode) bool { return !slices.Contains(strings.Split(only, ","), m.name) })
	}
	ctx := context.Background()
	rates := map[string][]float64{}
	cpus := map[string][]float64{} // µs of the process's CPU per input record
	var seq atomic.Int64
	b.ResetTimer()
	for range b.N {
		for _, m := range modes {
			id := fmt.Sprintf("b%d", seq.Add(1))
			bl := newBacklog(b, ctx, id, n/m.share, "")
			runtime.GC()
			top, err := Lookup(m.topo)
			if err != nil {
				b.Fatal(err)
			}
			tr, err := top.New(Options{Config: m.cfg})
			if err != nil {
				b.Fatal(err)
			}
			topics := []string{id + "-in"}
			if m.repart != "" {
				topics = append(topics, id+"-"+m.repart+"-repartition")
			}
			rate, cpu := drain(b, ctx, bl.cl, bl.opts, id, m.topo, n/m.share, tr, topics)
			rates[m.name] = append(rates[m.name], rate)
			cpus[m.name] = append(cpus[m.name], cpu)
			bl.Close()
		}
	}
	b.StopTimer()
	base := median(rates["passthrough"])
	for _, m := range modes {
		r := median(rates[m.name])
		b.ReportMetric(r, m.name+"-rec/s")
		if m.name != "passthrough" {
			b.ReportMetric(r/base, m.name+"/passthrough")
		}
		c := median(cpus[m.name])
		b.ReportMetric(c, m.name+"-cpu-µs/rec")
		// Printed, not logged: the testing package cuts a benchmark's log
		// after 10 lines, and the rounds are the evidence.
		fmt.Printf("rounds=%d %-26s median %8.0f records/s (%.2f of passthrough) over %.0f; CPU %.2f µs a record over %.2f\n", b.N, m.name, r, r/base, rates[m.name], c, cpus[m.name])
	}
}

// benchRecords is the backlog a throughput benchmark drains:
// 1,000,000 records, or EOS_BENCH_RECORDS.
func benchRecords() int64 {
	if v, err := strconv.ParseInt(os.Getenv("EOS_BENCH_RECORDS"), 10, 64); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// backlog is a fresh embedded broker holding one benchmark's input, and an
// admin client of it.
type backlog struct {
	br   *broker.Broker
	cl   *kgo.Client
	opts []kgo.Opt
}

// newBacklog starts a fresh embedded broker and writes n 100-byte datagen
// records of 16 users to id-in, in 6 partitions, each with its key in the
// header keyHeader too if that is set. A fresh broker for every
// run: its in-memory log would otherwise grow the heap, and the GC's work,
// for the modes that run later.
func newBacklog(b *testing.B, ctx context.Context, id string, n int64, keyHeader string) *backlog {
	b.Helper()
	return newBacklogOf(b, ctx, datagen.Config{Topic: id + "-in", Count: n, Size: 100, Partitions: 6, KeyHeader: keyHeader})
}

// newBacklogOf is newBacklog of the records cfg says.
func newBacklogOf(b *testing.B, ctx context.Context, cfg datagen.Config) *backlog {
	b.Helper()
	br, err := broker.Start(broker.Config{})
	if err != nil {
		b.Fatal(err)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(br.Addrs()...)}
	cl, err := admin.Connect(ctx, 10*time.Second, opts...)
	if err != nil {
		br.Close()
		b.Fatal(err)
	}
	if _, err := datagen.Produce(ctx, cl, cfg); err != nil {
		b.Fatal(err)
	}
	return &backlog{br: br, cl: cl, opts: opts}
}

// Close closes the client and the broker.
func (k *backlog) Close() {
	k.cl.Close()
	k.br.Close()
}

// drain runs one worker until its group has consumed every record of
// topics and returns the input's records per second from the assignment on,
// and the CPU time the whole process (worker, broker, this poll) used per
// input record meanwhile, in µs.
func drain(b *testing.B, ctx context.Context, cl *kgo.Client, opts []kgo.Opt, app, topology string, n int64, tr pipeline.Transform, topics []string) (rate, cpuPerRecord float64) {
	var assignedAt atomic.Int64
	w, err := pipeline.New(pipeline.Config{App: app, Instance: "0", Inputs: topics[:1], Output: app + "-out", Topology: topology,
		SessionTimeout: 6 * time.Second, ClientOpts: opts,
		OnEvent: func(ev pipeline.Event) {
			if ev.Kind == pipeline.EventAssigned && assignedAt.Load() == 0 {
				assignedAt.Store(time.Now().UnixNano())
			}
		}}, tr)
	if err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	cpu0 := processCPU(b)
	go func() { done <- w.Run(wctx) }()
	for {
		time.Sleep(10 * time.Millisecond)
		if ok, err := committed.CaughtUp(ctx, opts, app, topics...); err == nil && ok && w.Stats().Committed.Load() > 0 {
			break
		}
	}
	end, cpu := time.Now(), processCPU(b)-cpu0
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return float64(n) / end.Sub(time.Unix(0, assignedAt.Load())).Seconds(), float64(cpu.Microseconds()) / float64(n)
}

// processCPU returns the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
