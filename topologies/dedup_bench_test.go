package topologies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/twmb/franz-go/pkg/kgo"
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
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("EOS_BENCH_RECORDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
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
			br, err := broker.Start(broker.Config{})
			if err != nil {
				b.Fatal(err)
			}
			opts := []kgo.Opt{kgo.SeedBrokers(br.Addrs()...)}
			cl, err := admin.Connect(ctx, 10*time.Second, opts...)
			if err != nil {
				b.Fatal(err)
			}
			id := fmt.Sprintf("dd%d", seq.Add(1))
			if _, err := datagen.Produce(ctx, cl, datagen.Config{Topic: id + "-in", Count: n, Size: 100, Partitions: 6}); err != nil {
				b.Fatal(err)
			}
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
			rate, _ := drain(b, ctx, cl, opts, id, mode, n, tr, []string{id + "-in"})
			rates[mode] = append(rates[mode], rate)
			if d, ok := tr.(*Dedup); ok {
				// Cleanup of the broker and client first, so that only
				// the topology's state is left of the run.
				cl.Close()
				br.Close()
				held := d.gate.Held()
				if int64(held) != n {
					b.Fatalf("%d keys held after %d distinct records", held, n)
				}
				perKey = append(perKey, float64(liveHeap()-before)/float64(held))
				runtime.KeepAlive(d)
				continue
			}
			cl.Close()
			br.Close()
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
