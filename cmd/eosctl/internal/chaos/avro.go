package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/schemaregistry"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
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
	return a.startWith(h, "etl-avro.yaml", avroConfig, "out.avsc", avroOutSchema)
}

// startWith starts the registry and writes the etl configuration config
// (as file cfgName) and its output schema (as schemaName) for the workers.
func (a *avroCopying) startWith(h *harness, cfgName, config, schemaName, schema string) ([]string, error) {
	var err error
	if a.reg, err = schemaregistry.Start(context.Background(), schemaregistry.Config{Dir: filepath.Join(h.dir, "registry")}); err != nil {
		return nil, err
	}
	cfg := filepath.Join(h.dir, cfgName)
	if err := os.WriteFile(filepath.Join(h.dir, schemaName), []byte(schema), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, fmt.Errorf("writing the etl configuration: %w", err)
	}
	return []string{"etl", "--config", cfg, "--schema-registry", a.reg.URL()}, nil
}

func (a *avroCopying) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	enc, err := wireformat.NewAvroEncoder(avro.MustParse(datagen.AvroSchema))
	if err != nil {
		return nil, err
	}
	return a.produceWith(ctx, h, enc, in, partitions, n, rate)
}

// produceWith registers enc's schema under in's subject and writes
// datagen's orders to in encoded with it.
func (a *avroCopying) produceWith(ctx context.Context, h *harness, enc wireformat.Encoder, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	cl, err := wireformat.NewClient(wireformat.Registry{URL: a.reg.URL()})
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

// topologyAvroAggregate is the aggregate topology reading Avro: see
// avroAggregating.
const topologyAvroAggregate = "aggregate-avro"

// avroEventSchema is the schema of aggcheck's records in Avro: late
// defaults to false, so a regular record decodes with "late":false, which
// the topology ignores, and a late one exactly as aggcheck wrote it.
const avroEventSchema = `{"type": "record", "name": "Event", "fields": [
  {"name": "user", "type": "string"}, {"name": "ts", "type": "long"},
  {"name": "amount", "type": "long"}, {"name": "late", "type": "boolean", "default": false}]}`

// avroAggregating is the aggregate drill (aggcheck's input, config and
// judge) with the input in the Confluent wire format against a registry
// it starts: aggcheck's records are encoded as they are written (its
// poison pills, which are not JSON objects, left out), and the reference
// is computed from the JSON they were encoded from, at the partitions and
// offsets they were written to. The repartition topic stays JSON, so a late
// record's dead letter carries its decoded JSON, byte for byte what
// aggcheck wrote.
type avroAggregating struct {
	*aggregating
	reg *schemaregistry.Registry
	// encoder makes the input's encoder (format's, of aggcheck's events).
	encoder func() (wireformat.Encoder, error)
}

func newAvroAggregating() *avroAggregating {
	return newWireAggregating(wireformat.Avro, func() (wireformat.Encoder, error) {
		return wireformat.NewAvroEncoder(avro.MustParse(avroEventSchema))
	})
}

// newWireAggregating is the aggregate drill reading format, its input
// encoded with what encoder makes.
func newWireAggregating(format wireformat.Kind, encoder func() (wireformat.Encoder, error)) *avroAggregating {
	a := &avroAggregating{encoder: encoder}
	a.aggregating = &aggregating{config: aggcheck.Config + "format: {input: " + string(format) + "}\n", newInput: a.newInput, judge: a.judge}
	return a
}

func (a *avroAggregating) topology(h *harness) ([]string, error) {
	var err error
	if a.reg, err = schemaregistry.Start(context.Background(), schemaregistry.Config{Dir: filepath.Join(h.dir, "registry")}); err != nil {
		return nil, err
	}
	args, err := a.aggregating.topology(h)
	return append(args, "--schema-registry", a.reg.URL()), err
}

func (a *avroAggregating) newInput(topic string, n int, seed uint64) *aggcheck.Input {
	in := aggcheck.NewInput(topic, n, seed)
	in.Records = slices.DeleteFunc(in.Records, func(r *kgo.Record) bool { return !json.Valid(r.Value) })
	in.Encode = func([]byte) ([]byte, error) { return nil, fmt.Errorf("no registry") }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := wireformat.NewClient(wireformat.Registry{URL: a.reg.URL()})
	if err != nil {
		return in
	}
	enc, err := a.encoder()
	if err == nil {
		err = enc.Register(ctx, cl, topic)
	}
	if err != nil {
		in.Encode = func([]byte) ([]byte, error) { return nil, err }
		return in
	}
	in.Encode = func(js []byte) ([]byte, error) { return enc.Append(nil, topic, js) }
	return in
}

// judge is aggcheck's judge with the reference computed from the JSON the
// input was encoded from.
func (a *avroAggregating) judge(ctx context.Context, opts []kgo.Opt, t aggcheck.Topics) (*aggcheck.Report, error) {
	read := func(topic string) ([]*kgo.Record, error) {
		parts, err := committed.Read(ctx, opts, topic)
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, nil
		}
		return committed.Flatten(parts), err
	}
	results, err := read(t.Output)
	if err != nil {
		return nil, err
	}
	dls, err := read(t.DeadLetters)
	if err != nil {
		return nil, err
	}
	rep := aggcheck.NewReference(t.Input, a.input.Records).Judge(results, dls)
	rep.Output, rep.DeadLetterTopic = t.Output, t.DeadLetters
	return rep, nil
}

func (a *avroAggregating) close() {
	a.aggregating.close()
	if a.reg != nil {
		a.reg.Kill()
	}
}

// avroAggregateKills SIGKILLs the Avro aggregate's two workers
// mid-transaction at random; each restart restores its windows from the
// changelog and fetches the input's schema again.
func avroAggregateKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "avro-agg")
}
