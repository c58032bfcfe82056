package topologies

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/schemaregistry"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// BenchmarkETLAvroVsJSON compares the etl topology on Avro topics with the
// same topology on JSON topics, for the same records: each op is one round
// in which each mode drains its own fresh backlog of 1,000,000 datagen
// orders (EOS_BENCH_RECORDS to change it) from 6 partitions with one
// in-process worker against a fresh embedded broker, the modes interleaved
// and their order swapped every round. etl-json reads datagen's 100-byte
// JSON values and writes JSON; etl-avro reads the same orders in the
// Confluent wire format (written with topologies/examples/order.avsc) and
// writes Avro (etl-avro.yaml: filter, map, drop and key as the JSON
// config), against the test binary's Schema Registry (Apicurio, started
// once; with EOS_BENCH_REGISTRY=fake, franz-go's in-process srfake instead,
// so that no JVM shares the machine's cores with the worker: the registry
// answers one fetch per drain either way). Rates are measured as BenchmarkTopologyThroughput measures them;
// it reports both medians and their ratio.
//
//	go test ./topologies -run '^$' -bench ETLAvroVsJSON -benchtime 5x
//	EOS_BENCH_REGISTRY=fake go test ./topologies -run '^$' -bench 'ETLAvroVsJSON$' -benchtime 7x
//	EOS_BENCH_MODES=etl-avro go test ./topologies -run '^$' -bench ETLAvroVsJSON -benchtime 1x -cpuprofile avro.prof
func BenchmarkETLAvroVsJSON(b *testing.B) {
	url := benchRegistry(b)
	n := benchRecords()
	ctx := context.Background()
	// The JSON twin of etl-avro.yaml: the same keys without format.
	src, err := os.ReadFile("examples/etl-avro.yaml")
	if err != nil {
		b.Fatal(err)
	}
	body := string(src)
	start, end := strings.Index(body, "format:"), strings.Index(body, "filter:")
	jsonCfg := filepath.Join(b.TempDir(), "etl-json.yaml")
	if err := os.WriteFile(jsonCfg, []byte(body[:start]+body[end:]), 0o644); err != nil {
		b.Fatal(err)
	}
	cl, err := wireformat.NewClient(wireformat.Registry{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	enc, err := wireformat.NewAvroEncoder(must(wireformat.ParseSchema(datagen.AvroSchema)))
	if err != nil {
		b.Fatal(err)
	}
	modes := []string{"etl-json", "etl-avro"}
	rates, cpus := map[string][]float64{}, map[string][]float64{}
	var seq atomic.Int64
	b.ResetTimer()
	for round := range b.N {
		order := modes
		if round%2 == 1 {
			order = []string{modes[1], modes[0]}
		}
		for _, m := range order {
			if only := os.Getenv("EOS_BENCH_MODES"); only != "" && !strings.Contains(only, m) {
				continue
			}
			id := fmt.Sprintf("av%d", seq.Add(1))
			dcfg := datagen.Config{Topic: id + "-in", Count: n, Size: 100, Partitions: 6}
			o := Options{Config: jsonCfg, Output: id + "-out"}
			if m == "etl-avro" {
				if err := enc.Register(ctx, cl, dcfg.Topic); err != nil {
					b.Fatal(err)
				}
				dcfg.Encode = func(js []byte) ([]byte, error) { return enc.Append(nil, dcfg.Topic, js) }
				o = Options{Config: "examples/etl-avro.yaml", Output: id + "-out", SchemaRegistry: SchemaRegistry{URL: url}}
			}
			bl := newBacklogOf(b, ctx, dcfg)
			runtime.GC()
			tr, err := topologyFor("etl").New(o)
			if err != nil {
				b.Fatal(err)
			}
			rate, cpu := drain(b, ctx, bl.cl, bl.opts, id, "etl", n, tr, []string{id + "-in"})
			rates[m], cpus[m] = append(rates[m], rate), append(cpus[m], cpu)
			bl.Close()
		}
	}
	b.StopTimer()
	if len(rates) < 2 {
		return // EOS_BENCH_MODES chose one: a profile, not a comparison
	}
	j, a := median(rates["etl-json"]), median(rates["etl-avro"])
	b.ReportMetric(j, "etl-json-rec/s")
	b.ReportMetric(a, "etl-avro-rec/s")
	b.ReportMetric(a/j, "avro/json")
	for _, m := range modes {
		fmt.Printf("rounds=%d %-8s median %8.0f records/s over %.0f; CPU %.2f µs a record over %.2f\n", b.N, m, median(rates[m]), rates[m], median(cpus[m]), cpus[m])
	}
	fmt.Printf("etl-avro / etl-json = %.2f\n", a/j)
}

// benchRegistry is the URL of the registry a benchmark uses: the test
// binary's Apicurio, or with EOS_BENCH_REGISTRY=fake an in-process fake
// (franz-go's srfake), which takes no CPU between calls.
func benchRegistry(b *testing.B) string {
	if os.Getenv("EOS_BENCH_REGISTRY") == "fake" {
		fake := srfake.New()
		b.Cleanup(fake.Close)
		return fake.URL()
	}
	return schemaregistry.Shared(b).URL()
}
