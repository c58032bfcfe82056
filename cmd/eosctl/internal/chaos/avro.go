package chaos

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/schemaregistry"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topologyAvro is the etl topology on Avro topics: see avroCopying.
const topologyAvro = "etl-avro"

// avroConfig reads datagen's orders in Avro and writes each with the
// fields of avroOutSchema: every record kept, its key kept, so that verify
// judges the output like a copy.
const avroConfig = `topology: etl
format: {input: avro, output: avro, output_schema: out.avsc}
map:
  cents: int(round(amount * 100))
drop: [pad, ts]
`

const avroOutSchema = `{"type": "record", "name": "Out", "fields": [
  {"name": "seq", "type": "long"}, {"name": "user", "type": "string"},
  {"name": "amount", "type": "double"}, {"name": "cents", "type": "long"}]}`

// avroCopying runs the etl topology with format avro against a real Schema
// Registry it starts (Apicurio, internal/schemaregistry): the input is
// datagen's orders in the Confluent wire format, written with their schema
// registered, and the output is judged twice: by verify like a copy (every
// key once, in input order per partition, the concurrent read_committed
// reader seeing no key twice), and record by record by hamba/avro decoding
// it with the output schema (not the topology's transcoder), against the
// fields datagen derives from the key.
type avroCopying struct {
	copying
	reg *schemaregistry.Registry
}

func (a *avroCopying) topology(h *harness) ([]string, error) {
	var err error
	if a.reg, err = schemaregistry.Start(context.Background(), schemaregistry.Config{Dir: filepath.Join(h.dir, "registry")}); err != nil {
		return nil, err
	}
	cfg := filepath.Join(h.dir, "etl-avro.yaml")
	if err := os.WriteFile(filepath.Join(h.dir, "out.avsc"), []byte(avroOutSchema), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, []byte(avroConfig), 0o644); err != nil {
		return nil, fmt.Errorf("writing the etl configuration: %w", err)
	}
	return []string{"etl", "--config", cfg, "--schema-registry", a.reg.URL()}, nil
}

func (a *avroCopying) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	cl, err := wireformat.NewClient(wireformat.Registry{URL: a.reg.URL()})
	if err != nil {
		return nil, err
	}
	enc, err := wireformat.NewEncoder(avro.MustParse(datagen.AvroSchema))
	if err != nil {
		return nil, err
	}
	if err := enc.Register(ctx, cl, in); err != nil {
		return nil, err
	}
	return h.ProduceConfig(ctx, datagen.Config{Topic: in, Count: n, Size: 100, Partitions: partitions, Rate: rate,
		Encode: func(js []byte) ([]byte, error) { return enc.Append(nil, in, js) }})
}

func (a *avroCopying) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	schema := avro.MustParse(avroOutSchema)
	return a.copying.finishChecked(ctx, h, res, app, in, out, partitions,
		"Avro output records decoded by hamba/avro with the output schema and checked field by field", "are not the Avro of their input",
		func(r *kgo.Record) string {
			i, err := strconv.ParseInt(string(r.Key), 10, 64)
			var v struct {
				Seq    int64   `avro:"seq"`
				User   string  `avro:"user"`
				Amount float64 `avro:"amount"`
				Cents  int64   `avro:"cents"`
			}
			if err == nil && (len(r.Value) < 5 || r.Value[0] != 0) {
				err = fmt.Errorf("not in the wire format")
			}
			if err == nil {
				err = avro.Unmarshal(schema, r.Value[5:], &v)
			}
			amount := datagen.Amount(i)
			if err != nil || v.Seq != i || v.User != datagen.User(i) || v.Amount != amount || v.Cents != int64(math.Round(amount*100)) {
				return fmt.Sprintf("%+v (%v)", v, err)
			}
			return ""
		})
}

func (a *avroCopying) close() {
	a.copying.close()
	if a.reg != nil {
		a.reg.Kill()
	}
}

// avroKills SIGKILLs the Avro etl's two workers mid-transaction at random;
// each restart fetches the input's schema again (its cache died with it)
// and registers the output schema again (the same id).
func avroKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "avro")
}
