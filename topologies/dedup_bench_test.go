package topologies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/pipeline"
)

// BenchmarkDedupThroughput compares the dedup topology with passthrough as
// BenchmarkTopologyThroughput compares the others (drain: one in-process
// worker, a fresh embedded broker, a backlog of 1,000,000 100-byte datagen
// records in 6 partitions, EOS_BENCH_RECORDS to change it), in two modes:
// dedup keyed by the field seq (key: seq, read from the JSON value) and
// dedup-header keyed by the header event-id, which carries the same seq
// (key: {header: event-id}: the value is not parsed). Every record of
// every mode carries the header, passthrough's too, so all drain the same
// input. Every seq is distinct: every record passes and every key is held
// at the end, the gate's worst case for memory. The modes take turns in
// every round, so a machine that drifts slows each alike.
//
// Besides the rates and ratios it prints the CPU time the whole process
// (worker, broker, poll) spent per record, which a busy machine disturbs
// less than the rates, and reports the bytes the gate's table takes
// per key held (its index slots and key batches, counted exactly; the
// store's map holds the same batches, not copies), the time the gate takes
// to rebuild its tables from the store (what a restore adds to reading the
// changelog, which holds a record per batch) and the process's peak
// RSS (VmHWM: the embedded broker, which holds every record in memory, is
// in the same process, so it is an upper bound of the worker's; eosctl
// bench --topology dedup measures a worker process alone).
//
//	go test ./topologies -run '^$' -bench DedupThroughput -benchtime 3x
//	EOS_BENCH_RECORDS=10000000 go test ./topologies -run '^$' -bench DedupThroughput -benchtime 3x -timeout 60m
func BenchmarkDedupThroughput(b *testing.B) {
	n := benchRecords()
	cfgs := map[string]string{
		"dedup":        "topology: dedup\nkey: seq\nretention: 24h\n",
		"dedup-header": "topology: dedup\nkey: {header: event-id}\nretention: 24h\n",
	}
	for mode, body := range cfgs {
		cfgs[mode] = filepath.Join(b.TempDir(), mode+".yaml")
		if err := os.WriteFile(cfgs[mode], []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	rates := map[string][]float64{}
	perKey, cpus, rebuild := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	var seq atomic.Int64
	modes := []string{"passthrough", "dedup", "dedup-header"}
	b.ResetTimer()
	for round := range b.N {
		for i := range modes {
			mode := modes[(i+round)%len(modes)]
			id := fmt.Sprintf("dd%d", seq.Add(1))
			bl := newBacklog(b, ctx, id, n, "event-id")
			top, _ := Lookup(strings.TrimSuffix(mode, "-header"))
			tr, err := top.New(Options{Config: cfgs[mode]})
			if err != nil {
				b.Fatal(err)
			}
			var m *measuredDedup
			if d, ok := tr.(*Dedup); ok {
				m = &measuredDedup{Dedup: d, n: n}
				tr = m
			}
			rate, cpu := drain(b, ctx, bl.cl, bl.opts, id, mode, n, tr, []string{id + "-in"})
			rates[mode] = append(rates[mode], rate)
			cpus[mode] = append(cpus[mode], cpu)
			bl.Close()
			if m != nil {
				if !m.done {
					b.Fatalf("%s: the gate never held all %d distinct keys (last %d)", mode, n, m.held)
				}
				if m.again != m.held {
					b.Fatalf("%s: %d keys held after a rebuild, %d before", mode, m.again, m.held)
				}
				perKey[mode] = append(perKey[mode], m.perKey)
				rebuild[mode] = append(rebuild[mode], m.rebuild.Seconds())
			}
		}
	}
	b.StopTimer()
	base := median(rates["passthrough"])
	b.ReportMetric(base, "passthrough-rec/s")
	line := fmt.Sprintf("rounds=%d records=%d passthrough %.0f rec/s over %.0f, %.2f µs CPU/rec", b.N, n, base, rates["passthrough"], median(cpus["passthrough"]))
	for _, mode := range modes[1:] {
		r := median(rates[mode])
		b.ReportMetric(r, mode+"-rec/s")
		b.ReportMetric(r/base, mode+"/passthrough")
		b.ReportMetric(median(perKey[mode]), mode+"-table-B/key")
		b.ReportMetric(median(rebuild[mode]), mode+"-rebuild-s")
		line += fmt.Sprintf("; %s %.0f rec/s (%.2f of passthrough) over %.0f, %.2f µs CPU/rec, table %.1f B/key, rebuilt from the store in %.2fs", mode, r, r/base, rates[mode], median(cpus[mode]), median(perKey[mode]), median(rebuild[mode]))
	}
	hwm := peakRSS()
	b.ReportMetric(float64(hwm)/(1<<20), "process-peak-RSS-MiB")
	fmt.Printf("%s; process peak RSS %d MiB\n", line, hwm>>20)
}

// measuredDedup takes the gate's figures in the Flush where it first holds
// all n keys, on the worker's goroutine while the worker still owns the
// stores (a stopped worker owns none, and the gate forgets them): the
// table's bytes a key, and what a restore adds to reading the changelog,
// the tables rebuilt from the stores' batches.
type measuredDedup struct {
	*Dedup
	n           int64
	done        bool
	held, again int
	perKey      float64
	rebuild     time.Duration
}

func (m *measuredDedup) Flush(ctx context.Context, out pipeline.Emitter) error {
	if err := m.Dedup.Flush(ctx, out); err != nil || m.done {
		return err
	}
	if m.held = m.gate.Held(); int64(m.held) == m.n {
		m.done = true
		m.perKey = float64(m.gate.footprint()) / float64(m.held)
		m.gate.Discard()
		start := time.Now()
		m.again = m.gate.Held()
		m.rebuild = time.Since(start)
	}
	return nil
}

// peakRSS is this process's VmHWM in bytes, 0 if unknown.
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	_, after, _ := strings.Cut(string(b), "VmHWM:")
	var kib int64
	_, _ = fmt.Sscan(after, &kib)
	return kib << 10
}
