package topologies

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
)

// BenchmarkETLProcessAvroVsJSON is the per-record CPU of the etl
// topology's Process alone (no broker) on datagen orders, in JSON and in
// Avro (etl-avro.yaml and its JSON twin), interleaved: what the Avro
// transcoding adds, or saves. Each op is one record of each mode; the
// metrics are each mode's thread CPU a record and JSON's over Avro's
// (above 1: Avro costs less).
//
//	EOS_BENCH_REGISTRY=fake go test ./topologies -run '^$' -bench ETLProcessAvroVsJSON -benchtime 1000000x -benchmem
func BenchmarkETLProcessAvroVsJSON(b *testing.B) {
	url := benchRegistry(b)
	src := string(must(os.ReadFile("examples/etl-avro.yaml")))
	jsonCfg := filepath.Join(b.TempDir(), "etl-json.yaml")
	if err := os.WriteFile(jsonCfg, []byte(src[:strings.Index(src, "format:")]+src[strings.Index(src, "filter:"):]), 0o644); err != nil {
		b.Fatal(err)
	}
	cl := must(wireformat.NewClient(wireformat.Registry{URL: url}))
	enc := must(wireformat.NewAvroEncoder(must(wireformat.ParseSchema(datagen.AvroSchema))))
	ctx := context.Background()
	if err := enc.Register(ctx, cl, "pb-in"); err != nil {
		b.Fatal(err)
	}
	modes := []string{"json", "avro"}
	trs, recs := map[string]pipeline.Transform{}, map[string][]pipeline.Record{}
	for _, m := range modes {
		o := Options{Config: jsonCfg}
		if m == "avro" {
			o = Options{Config: "examples/etl-avro.yaml", Output: "pb-out", SchemaRegistry: SchemaRegistry{URL: url}}
		}
		trs[m] = must(topologyFor("etl").New(o))
		for i := range 1024 {
			v := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), 100)
			if m == "avro" {
				v = must(enc.Append(nil, "pb-in", v))
			}
			recs[m] = append(recs[m], pipeline.Record{Topic: "pb-in", Offset: int64(i), Value: v})
		}
	}
	// Blocks of 10,000 records a mode, the modes alternating and their
	// order swapped every block; the CPU is the benchmark thread's own
	// (GC assists included, background GC workers not), which the
	// machine's other load does not inflate as it does wall time.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, ok := threadCPU(); !ok {
		b.Skip("no per-thread CPU clock here")
	}
	var out discard
	cpu, n := map[string]time.Duration{}, map[string]int{}
	const block = 10_000
	b.ReportAllocs()
	b.ResetTimer()
	for done, k := 0, 0; done < b.N; k++ {
		order := modes
		if k%2 == 1 {
			order = []string{modes[1], modes[0]}
		}
		todo := min(block, b.N-done)
		for _, m := range order {
			start, _ := threadCPU()
			for i := range todo {
				if err := trs[m].Process(ctx, &recs[m][(done+i)%1024], &out); err != nil {
					b.Fatal(err)
				}
			}
			end, _ := threadCPU()
			cpu[m] += end - start
			n[m] += todo
		}
		done += todo
	}
	b.StopTimer()
	j, a := float64(cpu["json"])/float64(n["json"]), float64(cpu["avro"])/float64(n["avro"])
	b.ReportMetric(j, "json-cpu-ns/rec")
	b.ReportMetric(a, "avro-cpu-ns/rec")
	b.ReportMetric(j/a, "json/avro-cpu")
}
