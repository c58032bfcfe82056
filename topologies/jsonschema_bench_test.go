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
// topology's Process alone (no broker) on datagen orders: plain JSON
// (etl-json-schema.yaml without its format key), JSON Schema input only
// (each record validated against order.schema.json, the output plain
// JSON), and JSON Schema both ways (the output validated against
// order-clean.schema.json too). The registry is asked once per schema, at
// the first record; EOS_BENCH_REGISTRY=fake runs it in-process.
//
//	EOS_BENCH_REGISTRY=fake go test ./topologies -run '^$' -bench ETLProcessJSONSchemaVsJSON -benchmem -count 5
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
	for _, mode := range []string{"json", "json-schema-in", "json-schema"} {
		b.Run(mode, func(b *testing.B) {
			cfg := filepath.Join(dir, mode+".yaml")
			if mode == "json-schema" {
				cfg = "examples/etl-json-schema.yaml"
			}
			tr := must(topologyFor("etl").New(Options{Config: cfg, Output: "jsb-out", SchemaRegistry: SchemaRegistry{URL: url}}))
			recs := make([]pipeline.Record, 1024)
			for i := range recs {
				v := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), 100)
				if mode != "json" {
					v = must(enc.Append(nil, "jsb-in", v))
				}
				recs[i] = pipeline.Record{Topic: "jsb-in", Offset: int64(i), Value: v}
			}
			var out discard
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := tr.Process(ctx, &recs[i%len(recs)], &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
