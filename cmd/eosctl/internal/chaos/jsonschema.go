package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topologyJSONSchema is the etl topology on JSON Schema topics: see
// jsonSchemaCopying.
const topologyJSONSchema = "etl-json-schema"

// jsonSchemaConfig reads datagen's orders in JSON Schema and writes each
// with the fields of jsonSchemaOut: every record kept, its key kept, so
// that verify judges the output like a copy.
const jsonSchemaConfig = `topology: etl
format: {input: json-schema, output: json-schema, output_schema: out.schema.json}
map:
  cents: int(round(amount * 100))
drop: [pad, ts]
`

const jsonSchemaOut = `{"type": "object", "additionalProperties": false,
  "properties": {"seq": {"type": "integer"}, "user": {"type": "string"},
    "amount": {"type": "number"}, "cents": {"type": "integer"}},
  "required": ["seq", "user", "amount", "cents"]}`

// jsonSchemaCopying is avroCopying with JSON Schema: the input is datagen's
// orders in the Confluent wire format, their schema (datagen.JSONSchema)
// registered, each validated by the workers against it; the output is
// judged by verify like a copy, and record by record by encoding/json
// (not the topology's validator) against the fields datagen derives from
// the key, with no field beyond them.
type jsonSchemaCopying struct{ avroCopying }

func (j *jsonSchemaCopying) topology(h *harness) ([]string, error) {
	return j.startWith(h, "etl-json-schema.yaml", jsonSchemaConfig, "out.schema.json", jsonSchemaOut)
}

func (j *jsonSchemaCopying) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	cl, err := wireformat.NewClient(wireformat.Registry{URL: j.reg.URL()})
	if err != nil {
		return nil, err
	}
	s, err := wireformat.CompileJSONSchema("order.schema.json", datagen.JSONSchema)
	if err != nil {
		return nil, err
	}
	enc := wireformat.NewJSONEncoder(s)
	if err := enc.Register(ctx, cl, in); err != nil {
		return nil, err
	}
	return h.ProduceConfig(ctx, datagen.Config{Topic: in, Count: n, Size: 100, Partitions: partitions, Rate: rate,
		Encode: func(js []byte) ([]byte, error) { return enc.Append(nil, in, js) }})
}

func (j *jsonSchemaCopying) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	return j.copying.finishChecked(ctx, h, res, app, in, out, partitions,
		"JSON Schema output records read by encoding/json after the wire-format header and checked field by field", "are not their input's fields",
		func(r *kgo.Record) string {
			i, err := strconv.ParseInt(string(r.Key), 10, 64)
			var v struct {
				Seq    int64   `json:"seq"`
				User   string  `json:"user"`
				Amount float64 `json:"amount"`
				Cents  int64   `json:"cents"`
			}
			if err == nil && (len(r.Value) < 5 || r.Value[0] != 0) {
				err = fmt.Errorf("not in the wire format")
			}
			if err == nil {
				d := json.NewDecoder(bytes.NewReader(r.Value[5:]))
				d.DisallowUnknownFields()
				err = d.Decode(&v)
			}
			amount := datagen.Amount(i)
			if err != nil || v.Seq != i || v.User != datagen.User(i) || v.Amount != amount || v.Cents != int64(math.Round(amount*100)) {
				return fmt.Sprintf("%q (%v)", r.Value, err)
			}
			return ""
		})
}

// jsonSchemaKills SIGKILLs the JSON Schema etl's two workers
// mid-transaction at random; each restart fetches and compiles the input's
// schema again and registers the output schema again (the same id).
func jsonSchemaKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "json-schema")
}
