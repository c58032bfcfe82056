package topologies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

// BenchmarkDedupThroughput compares the dedup topology with passthrough as
// BenchmarkTopologyThroughput compares the others (drain: one in-process
// worker, a fresh embedded broker, a backlog of 1,000,000 100-byte datagen
// records in 6 partitions, EOS_BENCH_RECORDS to change it), keyed by seq,
// which is every record's dedup key: every record passes and every key is
// held at the end, the gate's worst case for memory. It also reports the
// heap the held keys take, per key: the live heap after a GC with the
// drained worker's state still referenced by the topology, less the live
// heap before the worker started.
//
//	go test ./topologies -run '^$' -bench DedupThroughput -benchtime 3x
func BenchmarkDedupThroughput(b *testing.B) {
	n := benchRecords()
	cfg := filepath.Join(b.TempDir(), "dedup.yaml")
	if err := os.WriteFile(cfg, []byte("topology: dedup\nkey: seq\nretention: 24h\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rates := map[string][]float64{}
	var perKey []float64
	var seq atomic.Int64
	b.ResetTimer()
	for range b.N {
		for _, mode := range []string{"passthrough", "dedup"} {
			id := fmt.Sprintf("dd%d", seq.Add(1))
			bl := newBacklog(b, ctx, id, n)
			top, _ := Lookup(mode)
			o := Options{}
			if mode == "dedup" {
				o.Config = cfg
			}
			tr, err := top.New(o)
			if err != nil {
				b.Fatal(err)
			}
			before := liveHeap()
			rate, _ := drain(b, ctx, bl.cl, bl.opts, id, mode, n, tr, []string{id + "-in"})
			rates[mode] = append(rates[mode], rate)
			if d, ok := tr.(*Dedup); ok {
				// Cleanup of the broker and client first, so that only
				// the topology's state is left of the run.
				bl.Close()
				held := d.gate.Held()
				if int64(held) != n {
					b.Fatalf("%d keys held after %d distinct records", held, n)
				}
				perKey = append(perKey, float64(liveHeap()-before)/float64(held))
				runtime.KeepAlive(d)
				continue
			}
			bl.Close()
		}
	}
	b.StopTimer()
	base, r := median(rates["passthrough"]), median(rates["dedup"])
	b.ReportMetric(base, "passthrough-rec/s")
	b.ReportMetric(r, "dedup-rec/s")
	b.ReportMetric(r/base, "dedup/passthrough")
	b.ReportMetric(median(perKey), "heap-B/key-held")
	fmt.Printf("rounds=%d records=%d passthrough %.0f rec/s over %.0f; dedup %.0f rec/s (%.2f of passthrough) over %.0f; heap per key held %.0f B over %.0f\n",
		b.N, n, base, rates["passthrough"], r, r/base, rates["dedup"], median(perKey), perKey)
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
