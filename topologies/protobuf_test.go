package topologies

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
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
func (w protoWriter) decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	if len(b) < 6 || b[0] != 0 || binary.BigEndian.Uint32(b[1:5]) != w.id || b[5] != 0 {
		t.Fatalf("output %x is not in the wire format with schema id %d, index [0]", b, w.id)
	}
	m := dynamicpb.NewMessage(w.msg)
	if err := proto.Unmarshal(b[6:], m); err != nil {
		t.Fatalf("output does not decode: %v", err)
	}
	js := must((protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}).Marshal(m))
	var v map[string]any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
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
	var rs []*kgo.Record
	ref, bad := map[int]map[string]any{}, map[int]string{}
	ts := time.UnixMilli(1_700_000_000_000)
	for i := range n {
		at := ts.Add(time.Duration(i) * 10 * time.Millisecond)
		v := map[string]any{"seq": int64(i), "ts": at.UnixMilli(), "user": datagen.User(int64(i)), "amount": datagen.Amount(int64(i)), "pad": "xx"}
		var value []byte
		if i < n/2 {
			value = v1.encode(t, v)
			v["channel"] = "" // proto3's default, through the reader
		} else {
			v["channel"] = "app-" + strconv.Itoa(i%3)
			value = v2.encode(t, v)
		}
		switch amount := v["amount"].(float64); {
		case i%97 == 13:
			value, bad[i] = datagen.Value(int64(i), at, 100), "wire-format"
		case i%97 == 50:
			value, bad[i] = append(value, 0x22, 0x10), "protobuf-decode" // field 4, 16 bytes that are not there
		case amount >= 99:
			bad[i] = "protobuf-encode" // size HUGE: not in the enum
		default:
			ref[i] = v
		}
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value})
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
	got := map[string]map[string]any{}
	for _, r := range e.read(out) {
		src := strings.Split(headers(r)[pipeline.IdempotencyKeyHeader], "/")
		k := src[1] + "/" + src[2]
		if _, dup := got[k]; dup {
			t.Fatalf("output of %s written twice", k)
		}
		v := outW.decode(t, r.Value)
		if string(r.Key) != v["user"] {
			t.Fatalf("output of %s has key %q, want its user %v", k, r.Key, v["user"])
		}
		got[k] = v
	}
	if len(got) != len(want) {
		t.Fatalf("%d output records, the reference has %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; !reflect.DeepEqual(g, w) {
			t.Fatalf("output of %s:\n got  %v\n want %v", k, g, w)
		}
	}
	wantDL := map[string]string{}
	for i, reason := range bad {
		if reason == "protobuf-encode" && datagen.Amount(int64(i)) < 10 {
			continue
		}
		wantDL[at(rs[i])] = reason
	}
	if dl := e.deadLetters("proto-etl-dlq", "etl", in); !reflect.DeepEqual(dl, wantDL) {
		t.Fatalf("dead letters %v,\nwant %v", dl, wantDL)
	}
	t.Logf("%d records: %d kept, %d dead letters; %d commits, %d aborts", n, len(want), len(wantDL), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}
