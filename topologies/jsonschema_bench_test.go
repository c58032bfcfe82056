package topologies

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
)

// BenchmarkETLProcessJSONSchemaVsJSON is the per-record CPU of the etl
// topology's Process alone (no broker) on datagen orders, the modes
// interleaved (interleavedCPU; an op is one record of each mode): plain JSON
// (etl-json-schema.yaml without its format key), JSON Schema input only
// (each record validated against order.schema.json, the output plain
// JSON), and JSON Schema both ways (the output validated against
// order-clean.schema.json too). The registry is asked once per schema, at
// the first record; EOS_BENCH_REGISTRY=fake runs it in-process.
//
//	EOS_BENCH_REGISTRY=fake go test ./topologies -run '^$' -bench ETLProcessJSONSchemaVsJSON -benchtime 500000x -count 5
func BenchmarkETLProcessJSONSchemaVsJSON(b *testing.B) {
	url := benchRegistry(b)
	src := string(must(os.ReadFile("examples/etl-json-schema.yaml")))
	rules := src[strings.Index(src, "filter:"):]
	dir := b.TempDir()
	configs := map[string]string{
		"json":           rules,
		"json-schema-in": "topology: etl\nformat: {input: json-schema}\n" + rules,
	}
	for mode, text := range configs {
		if err := os.WriteFile(filepath.Join(dir, mode+".yaml"), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cl := must(wireformat.NewClient(wireformat.Registry{URL: url}))
	enc := wireformat.NewJSONEncoder(must(wireformat.CompileJSONSchema("order.schema.json", datagen.JSONSchema)))
	ctx := context.Background()
	if err := enc.Register(ctx, cl, "jsb-in"); err != nil {
		b.Fatal(err)
	}
	modes := []string{"json", "json-schema-in", "json-schema"}
	trs, recs := map[string]pipeline.Transform{}, map[string][]pipeline.Record{}
	for _, mode := range modes {
		cfg := filepath.Join(dir, mode+".yaml")
		if mode == "json-schema" {
			cfg = "examples/etl-json-schema.yaml"
		}
		trs[mode] = must(topologyFor("etl").New(Options{Config: cfg, Output: "jsb-out", SchemaRegistry: SchemaRegistry{URL: url}}))
		for i := range 1024 {
			v := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), 100)
			if mode != "json" {
				v = must(enc.Append(nil, "jsb-in", v))
			}
			recs[mode] = append(recs[mode], pipeline.Record{Topic: "jsb-in", Offset: int64(i), Value: v})
		}
	}
	var out discard
	b.ReportAllocs()
	cpu := interleavedCPU(b, modes, func(mode string, i int) error {
		return trs[mode].Process(ctx, &recs[mode][i%1024], &out)
	})
	for _, mode := range modes {
		b.ReportMetric(cpu[mode], mode+"-cpu-ns/rec")
	}
	b.ReportMetric(cpu["json"]/cpu["json-schema-in"], "json/json-schema-in-cpu")
	b.ReportMetric(cpu["json"]/cpu["json-schema"], "json/json-schema-cpu")
}
