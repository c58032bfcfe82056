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

// BenchmarkETLProcessAvroVsJSON is the per-record CPU of the etl
// topology's Process alone (no broker) on datagen orders, in JSON and in
// Avro (etl-avro.yaml and its JSON twin): what the Avro transcoding adds.
//
//	go test ./topologies -run '^$' -bench ETLProcessAvroVsJSON -benchmem
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
	for _, m := range []string{"json", "avro"} {
		b.Run(m, func(b *testing.B) {
			o := Options{Config: jsonCfg}
			if m == "avro" {
				o = Options{Config: "examples/etl-avro.yaml", Output: "pb-out", SchemaRegistry: SchemaRegistry{URL: url}}
			}
			tr := must(topologyFor("etl").New(o))
			recs := make([]pipeline.Record, 1024)
			for i := range recs {
				v := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), 100)
				if m == "avro" {
					v = must(enc.Append(nil, "pb-in", v))
				}
				recs[i] = pipeline.Record{Topic: "pb-in", Offset: int64(i), Value: v}
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
