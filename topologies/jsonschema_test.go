package topologies

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// registerJSONSchema registers schema file under subject and returns its
// wire-format header, written here rather than by package wireformat.
func registerJSONSchema(t *testing.T, cl *sr.Client, subject, file string) []byte {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: string(must(os.ReadFile(file))), Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	return binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID))
}

// The etl topology on JSON Schema topics, through aborted transactions and
// a writer schema that changes mid-stream (a new optional field): every
// input record is, exactly once, either in the output (read
// read_committed, parsed by encoding/json, equal to what a reference
// computes from the input, its header the output schema's), filtered out
// by the configuration, or in the dead-letter topic with its reason and a
// one-line error: wire-format for plain JSON, json-schema-invalid for a
// record its writer schema refuses, json-schema-encode for an output the
// output schema refuses (a channel it does not list).
func TestETLOnJSONSchemaEveryRecordOutputOrDeadLetteredOnce(t *testing.T) {
	cl, reg := registryClient(t)
	const n = 4000
	e := newTEnv(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	in, out, dlq := "js-etl-in-"+suffix, "js-etl-out-"+suffix, "js-etl-dlq-"+suffix
	h1 := registerJSONSchema(t, cl, wireformat.Subject(in), "examples/order.schema.json")
	h2 := registerJSONSchema(t, cl, wireformat.Subject(in), "testdata/jsonschema/order-v2.schema.json")
	var rs []*kgo.Record
	ref, bad, message := map[int]map[string]any{}, map[int]string{}, map[int]string{}
	for i := range n {
		amount := datagen.Amount(int64(i))
		v := map[string]any{"seq": i, "ts": 1_700_000_000_000 + 10*i, "user": datagen.User(int64(i)), "amount": amount, "pad": "xx"}
		header := h1
		if i >= n/2 {
			header, v["channel"] = h2, "app-"+strconv.Itoa(i%3)
		}
		switch {
		case i%97 == 50:
			v["amount"], bad[i], message[i] = "a lot", "json-schema-invalid", "at '/amount': got string, want number"
		case i%97 == 71:
			delete(v, "user")
			bad[i], message[i] = "json-schema-invalid", "missing property 'user'"
		case i%97 == 88 && i >= n/2 && amount >= 10:
			v["channel"], bad[i], message[i] = "fax", "json-schema-encode", "at '/channel'"
		}
		value := append(append([]byte{}, header...), must(json.Marshal(v))...)
		if i%97 == 13 {
			value, bad[i], message[i] = datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000), 100), "wire-format", "first byte is 0x7b"
		}
		if _, isBad := bad[i]; !isBad && amount >= 10 {
			ref[i] = v
		}
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value})
	}
	tr, err := topologyFor("etl").New(Options{Config: "testdata/jsonschema/etl.yaml", Output: out, SchemaRegistry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e.topic(in, 3)
	w := e.run("js-etl-"+suffix, "etl", tr, in, out, nil, func(c *pipeline.Config) { e.abortFraction = 0.2; c.MaxTxnRecords = 200; c.DLQ = dlq },
		func() { e.produce(in, 3, rs) })
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted; the test needs some")
	}
	outID := must(cl.SchemaByVersion(context.Background(), wireformat.Subject(out), -1)).ID
	want := map[string]map[string]any{}
	for i, v := range ref {
		amount := v["amount"].(float64)
		size := "normal"
		if amount >= 90 {
			size = "big"
		}
		o := map[string]any{"seq": float64(i), "ts": float64(v["ts"].(int)), "user": v["user"], "amount": amount, "cents": math.Round(amount * 100), "size": size}
		if c, ok := v["channel"]; ok {
			o["channel"] = c
		}
		want[at(rs[i])] = o
	}
	e.checkOutputs(out, want, func(k string, r *kgo.Record) map[string]any {
		if len(r.Value) < 5 || r.Value[0] != 0 || int(binary.BigEndian.Uint32(r.Value[1:5])) != outID {
			t.Fatalf("output %q is not in the wire format with the output schema's id %d", r.Value, outID)
		}
		var v map[string]any
		if err := json.Unmarshal(r.Value[5:], &v); err != nil {
			t.Fatalf("output of %s is not JSON after its header: %v", k, err)
		}
		return v
	})
	wantDL, wantMsg := map[string]string{}, map[string]string{}
	for i, reason := range bad {
		wantDL[at(rs[i])], wantMsg[at(rs[i])] = reason, message[i]
	}
	if dl := e.deadLetters(dlq, "etl", in); !reflect.DeepEqual(dl, wantDL) {
		t.Fatalf("dead letters %v,\nwant %v", dl, wantDL)
	}
	for _, r := range e.read(dlq) {
		h := headers(r)
		msg := h[pipeline.DeadLetterErrorHeader]
		if k := h[pipeline.DeadLetterPartitionHeader] + "/" + h[pipeline.DeadLetterOffsetHeader]; !strings.Contains(msg, wantMsg[k]) || strings.Contains(msg, "\n") {
			t.Fatalf("dead letter of %s (%s): error %q, want one line saying %q", k, h[pipeline.DeadLetterReasonHeader], msg, wantMsg[k])
		}
	}
	t.Logf("%d records: %d kept, %d dead letters; %d commits, %d aborts", n, len(want), len(wantDL), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}

// An output schema the registry finds incompatible with the subject's
// latest version (under BACKWARD, which the test sets: Apicurio's default
// is NONE) stops the start with a config error at the output_schema line,
// naming the subject and the field.
func TestJSONSchemaIncompatibleOutputSchemaStopsTheStart(t *testing.T) {
	cl, reg := registryClient(t)
	out := "js-compat-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	subject := wireformat.Subject(out)
	if err := cl.Do(context.Background(), "PUT", "/config/"+subject, map[string]string{"compatibility": "BACKWARD"}, nil); err != nil {
		t.Fatal(err)
	}
	registerJSONSchema(t, cl, subject, "examples/order-clean.schema.json")
	dir := t.TempDir()
	// cents becomes a string: SUBSCHEMA_TYPE_CHANGED at /properties/cents.
	changed := strings.Replace(string(must(os.ReadFile("examples/order-clean.schema.json"))), `"cents": {"type": "integer"}`, `"cents": {"type": "string"}`, 1)
	cfg := "topology: etl\nformat:\n  output: json-schema\n  output_schema: out.json\n"
	for name, text := range map[string]string{"out.json": changed, "c.yaml": cfg} {
		if err := os.WriteFile(dir+"/"+name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := topologyFor("etl").New(Options{Config: dir + "/c.yaml", Output: out, SchemaRegistry: reg})
	if !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "c.yaml:4: format.output_schema") ||
		!strings.Contains(err.Error(), "not compatible with subject "+subject) || !strings.Contains(err.Error(), `field "cents"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one config error line at format.output_schema naming %s and field cents", err, subject)
	}
	t.Logf("refused: %v", err)
	// The same schema unchanged registers (the same id again).
	if err := os.WriteFile(dir+"/out.json", must(os.ReadFile("examples/order-clean.schema.json")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := topologyFor("etl").New(Options{Config: dir + "/c.yaml", Output: out, SchemaRegistry: reg}); err != nil {
		t.Fatal(err)
	}
}

// jsonSchemaWriter writes a record's fields as JSON after a wire-format
// header.
type jsonSchemaWriter []byte

func (h jsonSchemaWriter) encode(t *testing.T, v map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{}, h...), b...)
}

// The aggregate topology reading JSON Schema: tumbling windows through the
// repartition topic (which stays plain JSON, internal) and aborted
// transactions; every window's final result equals the reference computed
// from the events, once, and the late records and the poison pills (plain
// JSON, which is not the wire format) are dead-lettered once each.
func TestAggregateOnJSONSchemaMatchesReference(t *testing.T) {
	cl, reg := registryClient(t)
	e := newTEnv(t)
	app := "js-agg-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e.wire, e.registry = jsonSchemaWriter(registerJSONSchema(t, cl, wireformat.Subject(app+"-in"), "testdata/jsonschema/event.schema.json")), reg
	evs := genEvents(6_000, 10, 5)
	rs, wk := runAggregate(t, e, app, evs, 1, false, "1s", "1s", "500ms", "final", true, "format: {input: json-schema}\n")
	checkAggregate(t, e, app, evs, rs, oneStream(len(evs)), 1000, 1000, 500)
	t.Logf("%d commits, %d aborts, %d dead letters", wk.Stats().Committed.Load(), wk.Stats().Aborted.Load(), wk.Stats().DeadLetters.Load())
}
