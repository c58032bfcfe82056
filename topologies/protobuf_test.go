package topologies

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoWriter registers a .proto file under subject and encodes with
// dynamicpb and proto.Marshal, independently of package wireformat's
// encoder.
type protoWriter struct {
	id  uint32
	msg protoreflect.MessageDescriptor
}

func registerProto(t *testing.T, cl *sr.Client, subject, file, message string) protoWriter {
	t.Helper()
	b := must(os.ReadFile(file))
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: string(b), Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	return protoWriter{uint32(ss.ID), wireformat.ProtoMessage(must(wireformat.ParseProto(string(b), message)))}
}

func (w protoWriter) encode(t *testing.T, v map[string]any) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(w.msg)
	for k, x := range v {
		fd := w.msg.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			t.Fatalf("no field %s", k)
		}
		m.Set(fd, protoreflect.ValueOf(x))
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, w.id), append([]byte{0}, b...)...)
}

// decode reads a wire-format record of w's message with dynamicpb and
// protojson (proto names, defaults shown, int64 as strings).
func (w protoWriter) decode(r *kgo.Record) (map[string]any, error) {
	b := r.Value
	if len(b) < 6 || b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != w.id || b[5] != 0 {
		return nil, fmt.Errorf("%x is not in the wire format with schema id %d, index [0]", b, w.id)
	}
	m := dynamicpb.NewMessage(w.msg)
	if err := proto.Unmarshal(b[6:], m); err != nil {
		return nil, fmt.Errorf("does not decode: %w", err)
	}
	var v map[string]any
	err := json.Unmarshal(must((protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}).Marshal(m)), &v)
	return v, err
}

// The etl topology on Protobuf topics, through aborted transactions and a
// writer schema that changes mid-stream (a field added, read through a
// reader schema that has it): every output record, decoded by dynamicpb
// and protojson (not by the topology's encoder's own code), equals what a
// reference computes from the input; records written with the old schema
// get the field's default; every poison pill (JSON, which is not the wire
// format; a cut payload; an output whose enum value the output schema
// lacks) is dead-lettered once with its reason; nothing else.
func TestETLOnProtobufWithSchemaEvolutionMatchesReference(t *testing.T) {
	cl, reg := registryClient(t)
	const n = 4000
	e := newTEnv(t)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	in, out := "proto-etl-in-"+id, "proto-etl-out-"+id
	v1 := registerProto(t, cl, wireformat.Subject(in), "examples/order.proto", "")
	v2 := registerProto(t, cl, wireformat.Subject(in), "testdata/protobuf/order-v2.proto", "")
	// proto3's default for channel, through the reader; a cut record: field
	// 4 with 16 bytes that are not there.
	rs, ref, bad := wireOrders(t, n, v1, v2, "", func(b []byte) []byte { return append(b, 0x22, 0x10) }, "protobuf-decode")
	for i, v := range ref {
		if amount := v["amount"].(float64); amount >= 99 {
			delete(ref, i)
			bad[i] = "protobuf-encode" // kept by the filter, but size HUGE is not in the enum
		}
	}
	tr, err := topologyFor("etl").New(Options{Config: "testdata/protobuf/etl-evolve.yaml", Output: out, SchemaRegistry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e.topic(in, 3)
	w := e.run("proto-etl", "etl", tr, in, out, nil, func(c *pipeline.Config) { e.abortFraction = 0.2; c.MaxTxnRecords = 200; c.DLQ = "proto-etl-dlq" },
		func() { e.produce(in, 3, rs) })
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted; the test needs some")
	}
	outW := protoWriter{msg: wireformat.ProtoMessage(must(wireformat.ParseProto(string(must(os.ReadFile("testdata/protobuf/order-clean.proto"))), "CleanOrder")))}
	latest, err := cl.SchemaByVersion(context.Background(), wireformat.Subject(out), -1)
	if err != nil {
		t.Fatal(err)
	}
	outW.id = uint32(latest.ID)
	want := map[string]map[string]any{}
	for i, v := range ref {
		amount := v["amount"].(float64)
		if amount < 10 {
			continue
		}
		size := "NORMAL"
		if amount >= 90 {
			size = "BIG"
		}
		want[at(rs[i])] = map[string]any{"seq": strconv.FormatInt(v["seq"].(int64), 10), "ts": strconv.FormatInt(v["ts"].(int64), 10), "user": v["user"], "amount": amount,
			"cents": strconv.FormatInt(int64(math.Round(amount*100)), 10), "size": size, "channel": v["channel"]}
	}
	e.checkOutputs(out, want, func(k string, r *kgo.Record) map[string]any {
		v, err := outW.decode(r)
		if err != nil {
			t.Fatalf("output of %s: %v", k, err)
		}
		return v
	})
	wantDL := checkDeadLetters(t, e, "proto-etl-dlq", in, rs, bad)
	t.Logf("%d records: %d kept, %d dead letters; %d commits, %d aborts", n, len(want), len(wantDL), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}

// The etl's join on a Protobuf input: the worker drives the table through
// the format's wrapper (it follows the assignment), so every event whose
// sku has a row is joined with it once, and only events without one are
// dead-lettered (join-missing; a table the worker never started would
// dead-letter every event join-key-partition). The table stays JSON.
func TestJoinOnProtobufInputJoinsEveryEventWithItsRow(t *testing.T) {
	cl, reg := registryClient(t)
	e := newTEnv(t)
	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	in, table, out := "proto-join-in-"+id, "proto-join-cat-"+id, "proto-join-out-"+id
	const skus, events = 50, 1000
	var rows []*kgo.Record
	for k := range skus {
		rows = append(rows, &kgo.Record{Key: []byte("sku-" + strconv.Itoa(k)), Value: catalogRow(k, 1)})
	}
	e.produce(table, 3, rows)
	proto := writeConfig(t, "event.proto", "syntax = \"proto3\";\nmessage Event { int64 seq = 1; string sku = 2; }\n")
	w := registerProto(t, cl, wireformat.Subject(in), proto, "")
	var rs []*kgo.Record
	for i := range events {
		sku := "sku-" + strconv.Itoa(i%(skus+5)) // 5 skus without a row
		rs = append(rs, &kgo.Record{Key: []byte(sku), Value: w.encode(t, map[string]any{"seq": int64(i), "sku": sku})})
	}
	cfg := filepath.Join(filepath.Dir(proto), "join.yaml")
	if err := os.WriteFile(cfg, []byte("topology: etl\nformat: {input: protobuf}\njoin: {table: "+table+", key: sku, as: product}\nmap:\n  price: product.price\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := topologyFor("etl").New(Options{Config: cfg, Output: out, SchemaRegistry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e.topic(in, 3)
	e.run("proto-join", "etl", tr, in, out, nil, func(c *pipeline.Config) { c.DLQ = "proto-join-dlq" }, func() { e.produce(in, 3, rs) })
	joined := map[float64]bool{}
	for _, r := range e.read(out) {
		v := decode(t, r.Value)
		k, _ := strconv.Atoi(strings.TrimPrefix(string(r.Key), "sku-"))
		if joined[v["seq"].(float64)] || v["price"] != float64(100*k+1) {
			t.Fatalf("output %s (key %s): joined twice, or not with its row", r.Value, r.Key)
		}
		joined[v["seq"].(float64)] = true
	}
	dead := e.deadLetters("proto-join-dlq", "etl", in)
	for i, r := range rs {
		_, hasRow := strconv.Atoi(strings.TrimPrefix(string(r.Key), "sku-"))
		want := hasRow == nil && i%(skus+5) < skus
		if dl := dead[at(r)]; joined[float64(i)] != want || (dl != "") == want || dl != "" && dl != "join-missing" {
			t.Fatalf("event %d (%s): joined %v, dead letter %q", i, r.Key, joined[float64(i)], dl)
		}
	}
}

// checkDeadLetters checks that dlq holds exactly the input records rs[i]
// of bad, each once with its reason, and returns them by input position.
func checkDeadLetters(t *testing.T, e *tenv, dlq, in string, rs []*kgo.Record, bad map[int]string) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i, reason := range bad {
		want[at(rs[i])] = reason
	}
	if dl := e.deadLetters(dlq, "etl", in); !reflect.DeepEqual(dl, want) {
		t.Fatalf("dead letters %v,\nwant %v", dl, want)
	}
	return want
}
