package topologies

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/schemaregistry"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// avroWriter registers schema file under subject and encodes with hamba,
// independently of package wireformat.
type avroWriter struct {
	id     uint32
	schema avro.Schema
}

func registerAvro(t *testing.T, cl *sr.Client, subject, file string) avroWriter {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: string(b), Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	return avroWriter{uint32(ss.ID), avro.MustParse(string(b))}
}

func (w avroWriter) encode(t *testing.T, v map[string]any) []byte {
	t.Helper()
	b, err := avro.Marshal(w.schema, v)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, w.id), b...)
}

func registryClient(t *testing.T) (*sr.Client, SchemaRegistry) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a schema registry (a JVM)")
	}
	if testbroker.IsKafka() {
		// CI's share: on Apache Kafka the chaos rows avro-kills,
		// avro-aggregate-kills, protobuf-kills and protobuf-aggregate-kills
		// run the formatted topologies, through SIGKILLs.
		t.Skip("the formatted topologies run on Apache Kafka in the chaos rows avro-kills, avro-aggregate-kills, protobuf-kills and protobuf-aggregate-kills")
	}
	reg := SchemaRegistry{URL: schemaregistry.Shared(t).URL()}
	cl, err := wireformat.NewClient(wireformat.Registry{URL: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	return cl, reg
}

// avroOrders are n datagen orders in Avro: the first half written with
// order.avsc, the rest with order-v2.avsc (a field added with a default,
// mid-stream), every 97th a poison pill (JSON, which is not the wire
// format, or a truncated payload); it returns the records, the reference
// field values of each good one as order-v2 reads it, and the poison's
// reasons.
func avroOrders(t *testing.T, cl *sr.Client, subject string, n int) ([]*kgo.Record, map[int]map[string]any, map[int]string) {
	v1 := registerAvro(t, cl, subject, "examples/order.avsc")
	v2 := registerAvro(t, cl, subject, "testdata/avro/order-v2.avsc")
	return wireOrders(t, n, v1, v2, "web", func(b []byte) []byte { return b[:len(b)-4] }, "avro-decode")
}

// wireOrders are n datagen orders in a wire format: the first half
// written with v1, the rest with v2, which adds channel (v1's records get
// channel def, their reader's default, in the reference), every 97th a
// poison pill (JSON, which is not the wire format; or the record cut made
// of it, reason cutReason); it returns the records, the reference field
// values of each good one as v2 reads it, and the poison's reasons.
func wireOrders(t *testing.T, n int, v1, v2 wireWriter, def string, cut func([]byte) []byte, cutReason string) ([]*kgo.Record, map[int]map[string]any, map[int]string) {
	var rs []*kgo.Record
	ref, bad := map[int]map[string]any{}, map[int]string{}
	ts := time.UnixMilli(1_700_000_000_000)
	for i := range n {
		at := ts.Add(time.Duration(i) * 10 * time.Millisecond)
		v := map[string]any{"seq": int64(i), "ts": at.UnixMilli(), "user": datagen.User(int64(i)), "amount": datagen.Amount(int64(i)), "pad": "xx"}
		var value []byte
		if i < n/2 {
			value = v1.encode(t, v)
			v["channel"] = def
		} else {
			v["channel"] = "app-" + strconv.Itoa(i%3)
			value = v2.encode(t, v)
		}
		switch {
		case i%97 == 13:
			value, bad[i] = datagen.Value(int64(i), at, 100), "wire-format"
		case i%97 == 50:
			value, bad[i] = cut(value), cutReason
		default:
			ref[i] = v
		}
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value})
	}
	return rs, ref, bad
}

// The etl topology on Avro topics, through aborted transactions and a
// writer schema that changes mid-stream: every output record, decoded by
// hamba/avro with the output schema (not by the topology's transcoder),
// equals what a reference computes from the input; records written with
// the old schema get the new field's default; every poison pill is
// dead-lettered once with its reason; nothing else.
func TestETLOnAvroWithSchemaEvolutionMatchesReference(t *testing.T) {
	cl, reg := registryClient(t)
	const n = 4000
	e := newTEnv(t)
	in, out := "avro-etl-in-"+strconv.FormatInt(time.Now().UnixNano(), 36), "avro-etl-out-"+strconv.FormatInt(time.Now().UnixNano(), 36)
	rs, ref, bad := avroOrders(t, cl, wireformat.Subject(in), n)
	tr, err := topologyFor("etl").New(Options{Config: "testdata/avro/etl-evolve.yaml", Output: out, SchemaRegistry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e.topic(in, 3)
	w := e.run("avro-etl", "etl", tr, in, out, nil, func(c *pipeline.Config) { e.abortFraction = 0.2; c.MaxTxnRecords = 200; c.DLQ = "avro-etl-dlq" },
		func() { e.produce(in, 3, rs) })
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted; the test needs some")
	}
	outSchema := avro.MustParse(string(must(os.ReadFile("testdata/avro/order-clean-v2.avsc"))))
	want := map[string]map[string]any{}
	for i, v := range ref {
		amount := v["amount"].(float64)
		if amount < 10 {
			continue
		}
		size := "normal"
		if amount >= 90 {
			size = "big"
		}
		want[at(rs[i])] = map[string]any{"seq": v["seq"], "ts": v["ts"], "user": v["user"], "amount": amount,
			"cents": int64(math.Round(amount * 100)), "size": size, "channel": v["channel"]}
	}
	e.checkOutputs(out, want, func(k string, r *kgo.Record) map[string]any {
		if len(r.Value) < 5 || r.Value[0] != 0 {
			t.Fatalf("output %x is not in the wire format", r.Value)
		}
		var v map[string]any
		if err := avro.Unmarshal(outSchema, r.Value[5:], &v); err != nil {
			t.Fatalf("output of %s does not decode with the output schema: %v", k, err)
		}
		return v
	})
	wantDL := checkDeadLetters(t, e, "avro-etl-dlq", in, rs, bad)
	t.Logf("%d records: %d kept, %d dead letters; %d commits, %d aborts", n, len(want), len(wantDL), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}

func topologyFor(name string) Topology {
	t, err := Lookup(name)
	if err != nil {
		panic(err)
	}
	return t
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A format the topologies do not read yet, or a schema missing, is a
// configuration error at its line.
func TestFormatConfigErrorsAtTheirLine(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"bad.json": `{"type": "objekt"}`, "notjson.json": `{"type":`} {
		if err := os.WriteFile(dir+"/"+name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(dir+"/bad.proto", []byte("syntax = \"proto3\";\nmessage A { int64 a = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/order.proto", []byte(datagen.ProtoSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"topology: etl\nformat:\n  output: json-schema\n", ":2: format: output: json-schema needs output_schema: FILE.json"},
		{"topology: etl\nformat:\n  output: json-schema\n  output_schema: nope.json\n", ":4: format.output_schema: open"},
		{"topology: etl\nformat:\n  output: json-schema\n  output_schema: bad.json\n", "bad.json: not a JSON Schema: not a valid JSON Schema: at '/type'"},
		{"topology: etl\nformat:\n  output: json-schema\n  output_schema: notjson.json\n", ":4: format.output_schema: " + dir + "/notjson.json: not a JSON Schema: not JSON"},
		{"topology: etl\nformat:\n  input: json-schema\n  reader_schema: bad.json\n", ":4: format.reader_schema: input: json-schema checks each record against the schema it was written with"},
		{"topology: etl\nformat:\n  output: protobuf\n", ":2: format: output: protobuf needs output_schema: FILE.proto"},
		{"topology: etl\nformat:\n  output: protobuf\n  output_schema: bad.proto\n", ":4: format.output_schema: " + dir + "/bad.proto: not a .proto file"},
		{"topology: etl\nformat:\n  output: protobuf\n  output_schema: order.proto\n  output_message: Nope\n", `:5: format.output_message: ` + dir + `/order.proto: no message "Nope"`},
		{"topology: etl\nformat:\n  output: avro\n  output_schema: x.avsc\n  output_message: Order\n", ":5: format.output_message: output_message names the message of output: protobuf"},
		{"topology: etl\nformat:\n  output: avro\n", ":2: format: output: avro needs output_schema"},
		{"topology: etl\nformat:\n  input: avro\n  reader_schema: nope.avsc\n", ":4: format.reader_schema: open"},
		{"topology: aggregate\ngroup_by: user\nwindow: {size: 1m}\naggregations: {n: count()}\nformat:\n  input: xml\n", `:6: format.input: want json, avro`},
		{"topology: etl\nformat:\n  input: avro\n", "--schema-registry"},
		{"topology: dedup\nkey: seq\nretention: 1h\nformat:\n  input: avro\n  output: protobuf\n  output_schema: order.proto\n", ":6: format.output: this topology passes each record unchanged, in its input's format (here avro): it takes no output format"},
	} {
		p := dir + "/c.yaml"
		if err := os.WriteFile(p, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		name, _ := TopologyOf(p)
		_, err := topologyFor(name).New(Options{Config: p, Output: "out"})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}

// A registry outage mid-run, on Avro and on Protobuf topics: records
// whose schema ids the worker has seen keep flowing while the registry is
// down (ids are cached, no call per record); a record with an id it has
// not seen waits, retried, neither dead-lettered nor skipped, and flows
// once the registry is back; at the end every record is in the output
// once. The registry is the test's own, SIGKILLed and restarted (its
// storage is in memory: the test registers the same schemas again, in the
// same order, and gets the same ids). It is about the registry, not the
// broker: embedded broker only.
func TestRegistryOutageRetriesNewIDsAndKeepsCachedOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a schema registry (a JVM) and restarts it")
	}
	if testbroker.IsKafka() {
		t.Skip("a registry outage does not depend on the broker: the embedded suite runs it")
	}
	type writers struct {
		v1, v2   wireWriter
		id1, id2 int
		config   string // the etl reading v1 and v2 as v2
	}
	for _, c := range []struct {
		format   string
		register func(cl *sr.Client, subject string) writers // v1 and v2 under subject
	}{
		{"avro", func(cl *sr.Client, subject string) writers {
			v1 := registerAvro(t, cl, subject, "examples/order.avsc")
			v2 := registerAvro(t, cl, subject, "testdata/avro/order-v2.avsc")
			return writers{v1, v2, int(v1.id), int(v2.id), "testdata/avro/etl-evolve.yaml"}
		}},
		{"protobuf", func(cl *sr.Client, subject string) writers {
			v1 := registerProto(t, cl, subject, "examples/order.proto", "")
			v2 := registerProto(t, cl, subject, "testdata/protobuf/order-v2.proto", "")
			return writers{v1, v2, int(v1.id), int(v2.id), "testdata/protobuf/etl-evolve.yaml"}
		}},
	} {
		t.Run(c.format, func(t *testing.T) {
			// A registry of its own: after the restart the test registers
			// its schemas again and needs the same ids back.
			reg := schemaregistry.StartT(t)
			cl, err := wireformat.NewClient(wireformat.Registry{URL: reg.URL()})
			if err != nil {
				t.Fatal(err)
			}
			e := newTEnv(t)
			in, out, dlq := "outage-in-"+c.format, "outage-out-"+c.format, "outage-dlq-"+c.format
			// The writer schemas, registered before the worker starts:
			// v2's id is one the worker first meets while the registry is
			// down.
			ws := c.register(cl, wireformat.Subject(in))
			tr, err := topologyFor("etl").New(Options{Config: ws.config, Output: out, SchemaRegistry: SchemaRegistry{URL: reg.URL()}})
			if err != nil {
				t.Fatal(err)
			}
			batch := func(v2 bool, from, n int) []*kgo.Record {
				var rs []*kgo.Record
				w := ws.v1
				if v2 {
					w = ws.v2
				}
				for i := from; i < from+n; i++ {
					v := map[string]any{"seq": int64(i), "ts": int64(1_700_000_000_000 + i), "user": datagen.User(int64(i)), "amount": 50.0, "pad": ""}
					if v2 {
						v["channel"] = "app"
					}
					rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: w.encode(t, v)})
				}
				return rs
			}
			e.topic(in, 3)
			ctx, cancel := context.WithCancel(e.ctx)
			defer cancel()
			w, err := pipeline.New(pipeline.Config{App: "outage-" + c.format, Instance: "0", Inputs: []string{in}, Output: out, DLQ: dlq, Topology: "etl",
				CommitInterval: 50 * time.Millisecond, ClientOpts: e.opts, InputWait: 10 * time.Second}, tr)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			outputs := func() int { return len(e.read(out)) }
			wait := func(n int, what string) {
				t.Helper()
				testenv.Eventually(t, time.Minute, what, func() (bool, string) {
					got := outputs()
					return got == n, fmt.Sprintf("%d outputs, want %d", got, n)
				})
			}
			e.produce(in, 3, batch(false, 0, 300))
			wait(300, "the first records, registry up")
			reg.Kill()
			e.produce(in, 3, batch(false, 300, 300))
			wait(600, "records of a cached id while the registry is down")
			e.produce(in, 3, batch(true, 600, 300))
			time.Sleep(3 * time.Second)
			if got := outputs(); got != 600 {
				t.Fatalf("%d outputs while the registry is down and the worker has not seen v2's id: want 600 (the v2 records wait)", got)
			}
			if dl := e.read(dlq); len(dl) != 0 {
				t.Fatalf("%d dead letters while the registry is down: records of an id it cannot fetch must wait", len(dl))
			}
			if err := reg.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			if again := c.register(cl, wireformat.Subject(in)); again.id1 != ws.id1 || again.id2 != ws.id2 {
				t.Fatalf("the restarted registry gave ids %d, %d, want %d, %d", again.id1, again.id2, ws.id1, ws.id2)
			}
			wait(900, "the v2 records once the registry is back")
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, r := range e.read(out) {
				src := headers(r)[pipeline.IdempotencyKeyHeader]
				if seen[src] {
					t.Fatalf("output of %s twice", src)
				}
				seen[src] = true
			}
			if dl := e.read(dlq); len(dl) != 0 {
				t.Fatalf("%d dead letters", len(dl))
			}
		})
	}
}

// The aggregate topology reading Avro: tumbling windows through the
// repartition topic (which stays JSON, internal) and aborted transactions;
// every window's final result equals the reference computed from the
// events, once, and the late records and the poison pills (JSON, which is
// not the wire format) are dead-lettered once each.
func TestAggregateOnAvroMatchesReference(t *testing.T) {
	cl, reg := registryClient(t)
	e := newTEnv(t)
	app := "avro-agg-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	w := registerAvro(t, cl, wireformat.Subject(app+"-in"), "testdata/avro/event.avsc")
	e.wire, e.registry = w, reg
	evs := genEvents(6_000, 10, 5)
	rs, wk := runAggregate(t, e, app, evs, 1, false, "1s", "1s", "500ms", "final", true, "format: {input: avro}\n")
	checkAggregate(t, e, app, evs, rs, oneStream(len(evs)), 1000, 1000, 500)
	t.Logf("%d commits, %d aborts, %d dead letters", wk.Stats().Committed.Load(), wk.Stats().Aborted.Load(), wk.Stats().DeadLetters.Load())
}
