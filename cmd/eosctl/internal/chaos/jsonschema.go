package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
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
// registered, each validated by the workers against it, and one key in
// jsonSchemaBadEvery written invalid (its amount a string). The output is
// judged by verify like a copy, the invalid keys excepted: each of those
// must be in the dead-letter topic once (read_committed) with reason
// json-schema-invalid and in no output, and every output is checked by
// encoding/json (not the topology's validator) against the fields datagen
// derives from the key, with no field beyond them.
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
		Encode: func(js []byte) ([]byte, error) {
			b, err := enc.Append(nil, in, js)
			if err != nil || !jsonSchemaBad(seqOf(js)) {
				return b, err
			}
			var v map[string]any
			if err := json.Unmarshal(js, &v); err != nil {
				return nil, err
			}
			v["amount"] = "a lot" // the schema wants a number
			bad, err := json.Marshal(v)
			return append(b[:5:5], bad...), err
		}})
}

// jsonSchemaBadEvery: the keys k with k % jsonSchemaBadEvery == 13 are
// written invalid.
const jsonSchemaBadEvery = 97

func jsonSchemaBad(k int64) bool { return k%jsonSchemaBadEvery == 13 }

// seqOf reads the seq datagen writes first in a value, -1 if it cannot.
func seqOf(js []byte) int64 {
	rest, ok := bytes.CutPrefix(js, []byte(`{"seq":`))
	if i := bytes.IndexByte(rest, ','); ok && i > 0 {
		if n, err := strconv.ParseInt(string(rest[:i]), 10, 64); err == nil {
			return n
		}
	}
	return -1
}

func (j *jsonSchemaCopying) finish(ctx context.Context, h *harness, res *Result, app, in, out string, _ int32) error {
	if err := h.WaitCaughtUp(ctx, committed.Wait{Group: app, Topics: []string{in}, Within: catchUp()}); err != nil {
		return err
	}
	h.Stop(20 * time.Second)
	jd, err := h.Judge(ctx, fleet.Verdict{Input: in, Output: out, Timeout: 2 * time.Minute, SettleWithin: settleWithin})
	if err != nil {
		return err
	}
	rep := jd.Verify
	res.Verify, res.Records = rep, rep.InputRecords
	var bad int64
	for k := range rep.InputRecords {
		if jsonSchemaBad(k) {
			bad++
		}
	}
	dl, err := jsonSchemaDeadLetters(ctx, h, app+"-dlq")
	if err != nil {
		return err
	}
	// The invalid keys are the missing ones: as many, each dead-lettered,
	// none in the output (checked below).
	if rep.Missing != bad || int64(len(dl)) != bad {
		return fmt.Errorf("%d keys missing from the output and %d dead-lettered as json-schema-invalid, want the %d written invalid", rep.Missing, len(dl), bad)
	}
	rep.Missing, rep.MissingExamples = 0, nil
	res.Notes = append(res.Notes, fmt.Sprintf("%d invalid records dead-lettered once each as json-schema-invalid, in no output", bad))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_ = j.tail.WaitFor(wctx, rep.InputRecords-bad)
	cancel()
	tr := j.tail.Stop()
	res.Tail = &tr
	return checkRecords(ctx, h, res, out,
		"JSON Schema output records read by encoding/json after the wire-format header and checked field by field", "are not their input's fields",
		func(r *kgo.Record) string {
			i, err := strconv.ParseInt(string(r.Key), 10, 64)
			if err == nil && jsonSchemaBad(i) {
				return "an invalid record in the output"
			}
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

// jsonSchemaDeadLetters reads the dead-letter topic (read_committed) and
// returns its keys, each of which must be an invalid one, there once, with
// reason json-schema-invalid.
func jsonSchemaDeadLetters(ctx context.Context, h *harness, dlq string) (map[int64]bool, error) {
	parts, err := committed.Read(ctx, h.Opts, dlq)
	if err != nil {
		return nil, fmt.Errorf("reading the dead letters: %w", err)
	}
	seen := map[int64]bool{}
	for _, r := range committed.Flatten(parts) {
		reason := ""
		for _, x := range r.Headers {
			if x.Key == pipeline.DeadLetterReasonHeader {
				reason = string(x.Value)
			}
		}
		k, err := strconv.ParseInt(string(r.Key), 10, 64)
		switch {
		case err != nil || !jsonSchemaBad(k):
			return nil, fmt.Errorf("dead letter of key %q (%s): not a key written invalid", r.Key, reason)
		case seen[k]:
			return nil, fmt.Errorf("dead letter of key %d twice", k)
		case reason != "json-schema-invalid":
			return nil, fmt.Errorf("dead letter of key %d with reason %q, want json-schema-invalid", k, reason)
		}
		seen[k] = true
	}
	return seen, nil
}

// jsonSchemaKills SIGKILLs the JSON Schema etl's two workers
// mid-transaction at random; each restart fetches and compiles the input's
// schema again and registers the output schema again (the same id).
func jsonSchemaKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "json-schema")
}
