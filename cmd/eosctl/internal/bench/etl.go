package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/rangeread"
	"github.com/eosctl/eos/internal/schemaregistry"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// The etl topology's runs compare etl on JSON topics with etl on Avro
// topics (the Confluent wire format against a Schema Registry) for the
// same orders:
//
//   - eos runs etlJSONConfig on the size's JSON backlog, as the copies
//     drain it; eos-avro (ModeEOSAvro) runs etlAvroConfig on the Avro twin
//     of that backlog, the same orders written in the wire format with
//     datagen.AvroSchema registered under the twin's subject, and writes
//     Avro with etlOutSchema, registered by the workers at start. Both
//     map, drop and keep the key, so that the output is judged as a copy.
//   - The judge is verify.Run (every key exactly once, in input order per
//     partition), then every output value is decoded, JSON by
//     encoding/json and Avro by hamba/avro with the output schema (not the
//     topology's transcoder), and checked field by field against the
//     order datagen derives from its key (etlCheck).
//   - The registry is Config.SchemaRegistry: a URL, "fake" for franz-go's
//     in-process srfake (no JVM on the machine's cores; it answers the
//     same few calls a run makes, over HTTP, to child workers too), or
//     empty to start Apicurio with internal/schemaregistry, as the tests
//     do. Schemas are fetched once per worker and id: no registry call
//     per record.
//   - A worker reads one input, so there is no live input and no latency
//     phase: the e2e cells are "-".

// topologyETL is the topology these runs are for.
const topologyETL = "etl"

// ModeEOSAvro is the eos worker running the etl topology on the Avro twin
// of the backlog (etl.go); etl topology only.
const ModeEOSAvro Mode = "eos-avro"

// etlBody is what both etl configurations do: two computed fields, one
// dropped; no filter and no key, so the output is a copy by key.
const etlBody = `map:
  cents: int(round(amount * 100))
  size: 'amount >= 90 ? "big" : "normal"'
drop: [pad]
`

const etlJSONConfig = "topology: etl\n" + etlBody

const etlAvroConfig = `topology: etl
format:
  input: avro
  reader_schema: order.avsc
  output: avro
  output_schema: order-clean.avsc
` + etlBody

// etlOutSchema is topologies/examples/order-clean.avsc.
const etlOutSchema = `{"type": "record", "name": "CleanOrder", "namespace": "eos.examples", "fields": [
  {"name": "seq", "type": "long"}, {"name": "ts", "type": "long"}, {"name": "user", "type": "string"},
  {"name": "amount", "type": "double"}, {"name": "cents", "type": "long"},
  {"name": "size", "type": {"type": "enum", "name": "Size", "symbols": ["normal", "big"]}}]}`

// writeETLConfigs writes both configurations and their schemas into dir.
func writeETLConfigs(dir string) (jsonPath, avroPath string, err error) {
	jsonPath, avroPath = filepath.Join(dir, "etl-json.yaml"), filepath.Join(dir, "etl-avro.yaml")
	for name, text := range map[string]string{jsonPath: etlJSONConfig, avroPath: etlAvroConfig,
		filepath.Join(dir, "order.avsc"): datagen.AvroSchema, filepath.Join(dir, "order-clean.avsc"): etlOutSchema} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return "", "", fmt.Errorf("bench: writing the etl configuration: %w", err)
		}
	}
	return jsonPath, avroPath, nil
}

// startRegistry finds or starts the Schema Registry of the Avro runs:
// its URL, and what stops it.
func (b *bencher) startRegistry(ctx context.Context) error {
	switch b.cfg.SchemaRegistry {
	case "":
		reg, err := schemaregistry.Start(ctx, schemaregistry.Config{})
		if err != nil {
			return fmt.Errorf("bench: starting the Schema Registry (or name one with --schema-registry): %w", err)
		}
		b.registry, b.stopRegistry = reg.URL(), reg.Kill
		b.registryKind = "Apicurio Registry " + schemaregistry.Version + ", started by the bench (internal/schemaregistry)"
	case "fake":
		fake := srfake.New()
		b.registry, b.stopRegistry = fake.URL(), fake.Close
		b.registryKind = "franz-go's in-process srfake (no JVM)"
	default:
		b.registry, b.registryKind = b.cfg.SchemaRegistry, "the registry at "+b.cfg.SchemaRegistry
	}
	return nil
}

// produceAvroTwin writes the Avro twin of the size's JSON backlog: the
// same orders (datagen is deterministic), in the wire format.
func (b *bencher) produceAvroTwin(ctx context.Context, size int, progress func(done, total int64)) (string, error) {
	topic := fmt.Sprintf("%s-in-avro-%d", b.prefix, size)
	b.topics = append(b.topics, topic)
	cl, err := wireformat.NewClient(wireformat.Registry{URL: b.registry})
	if err != nil {
		return "", err
	}
	enc, err := wireformat.NewAvroEncoder(avro.MustParse(datagen.AvroSchema))
	if err != nil {
		return "", err
	}
	if err := enc.Register(ctx, cl, topic); err != nil {
		return "", fmt.Errorf("bench: registering the Avro input's schema: %w", err)
	}
	encode := func(js []byte) ([]byte, error) { return enc.Append(nil, topic, js) }
	if _, err := datagen.Produce(ctx, b.adm, datagen.Config{Topic: topic, Count: b.cfg.records(size), Size: size, Partitions: b.cfg.Partitions,
		Progress: progress, Encode: encode}); err != nil {
		return "", fmt.Errorf("bench: producing the %d-byte Avro input: %w", size, err)
	}
	return topic, nil
}

// etlOut is an output value's fields.
type etlOut struct {
	Seq    int64   `avro:"seq" json:"seq"`
	User   string  `avro:"user" json:"user"`
	Amount float64 `avro:"amount" json:"amount"`
	Cents  int64   `avro:"cents" json:"cents"`
	Size   string  `avro:"size" json:"size"`
	Pad    *string `avro:"-" json:"pad"`
}

// etlCheck reads output with read_committed and checks every value
// against the order its key names: a count of those that are wrong, and
// the first.
func (b *bencher) etlCheck(ctx context.Context, output string, avroOut bool) (int64, string, error) {
	rs, err := rangeread.Whole(ctx, kadm.NewClient(b.adm), output, false)
	if err != nil {
		return 0, "", err
	}
	schema := avro.MustParse(etlOutSchema)
	var bad int64
	first := ""
	err = rangeread.Read(ctx, b.opts, rs, rangeread.Options{}, func(r *kgo.Record) {
		if why := etlWrong(r, schema, avroOut); why != "" {
			if bad++; first == "" {
				first = fmt.Sprintf("partition %d offset %d: %s", r.Partition, r.Offset, why)
			}
		}
	})
	return bad, first, err
}

// etlWrong says what is wrong with the output record r, or "".
func etlWrong(r *kgo.Record, schema avro.Schema, avroOut bool) string {
	i, err := strconv.ParseInt(string(r.Key), 10, 64)
	if err != nil {
		return fmt.Sprintf("key %q is not a datagen key", r.Key)
	}
	var v etlOut
	switch {
	case !avroOut:
		err = json.Unmarshal(r.Value, &v)
	case len(r.Value) < 5 || r.Value[0] != 0:
		err = fmt.Errorf("not in the wire format")
	default:
		err = avro.Unmarshal(schema, r.Value[5:], &v)
	}
	amount := datagen.Amount(i)
	size := "normal"
	if amount >= 90 {
		size = "big"
	}
	if err != nil || v.Seq != i || v.User != datagen.User(i) || v.Amount != amount || v.Cents != int64(math.Round(amount*100)) || v.Size != size || v.Pad != nil {
		return fmt.Sprintf("%+v (%v), want seq %d, user %s, amount %v, size %s, no pad", v, err, i, datagen.User(i), amount, size)
	}
	return ""
}

// writeETLNotes says what the etl cells ran and their Avro/JSON ratios.
func writeETLNotes(w io.Writer, r *Report) {
	p := r.Params
	for _, m := range p.Modes {
		fmt.Fprintf(w, "etl, %s: %s\n", m, strings.TrimSpace(strings.ReplaceAll(p.ETLConfigs[m], "\n", "; ")))
	}
	fmt.Fprintln(w, "etl: eos reads the JSON backlog, eos-avro its Avro twin (the same orders, Confluent wire format); judged by verify (every key exactly once, in order) and every value decoded (encoding/json, hamba/avro) and checked against its order; no e2e latency: one input, no live records")
	if p.SchemaRegistry != "" {
		fmt.Fprintf(w, "etl: Schema Registry: %s\n", p.SchemaRegistry)
	}
	for _, c := range r.Cells {
		vs := c.Ratio(ModeEOSAvro, ModeEOS)
		j, a := c.Modes[ModeEOS], c.Modes[ModeEOSAvro]
		if vs.Median > 0 && j.CPUSecPerM > 0 {
			fmt.Fprintf(w, "threads %d, %s, size %s: eos-avro / eos %.3f (rounds %.3f-%.3f); CPU s per million records eos %.2f, eos-avro %.2f (Avro/JSON %.2f)\n",
				c.Threads, c.Interval, sizeLabel(c.Size), vs.Median, vs.Min, vs.Max, j.CPUSecPerM, a.CPUSecPerM, a.CPUSecPerM/j.CPUSecPerM)
		}
	}
}
