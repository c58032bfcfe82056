package wireformat

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoV1 has one of everything the JSON mapping covers, and a second and
// a nested message to pick by index.
const protoV1 = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
enum Status { NEW = 0; PAID = 1; }
message Order {
  int64 id = 1;
  string user = 2;
  double amount = 3;
  Status status = 4;
  repeated string tags = 5;
  map<string, int64> counts = 6;
  Line line = 7;
  bytes blob = 8;
  optional string note = 9;
  oneof pay { string card = 10; int32 cash = 11; }
  repeated Line lines = 12;
  uint64 big = 13;
  sint32 delta = 14;
  float ratio = 15;
  google.protobuf.Timestamp at = 16;
  message Line { string sku = 1; int32 qty = 2; }
}
message Refund { int64 id = 1; string why = 2; }
`

// protoV2 adds a field to Order.
var protoV2 = strings.Replace(protoV1, "  message Line {", "  string currency = 17;\n  message Line {", 1)

// wireProto registers text under subject and encodes js as its message
// (by Parse's message name) with package wireformat's encoder.
func wireProto(t *testing.T, cl *sr.Client, subject, text, message, js string) ([]byte, Encoder) {
	t.Helper()
	s, err := ParseProto(text, message)
	if err != nil {
		t.Fatal(err)
	}
	e, err := protobufFormat{}.NewEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	topic := strings.TrimSuffix(subject, "-value")
	if err := e.Register(context.Background(), cl, topic); err != nil {
		t.Fatal(err)
	}
	b, err := e.Append(nil, topic, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return b, e
}

func decodeProto(t *testing.T, d Decoder, b []byte) map[string]any {
	t.Helper()
	js, err := d.AppendJSON(context.Background(), nil, b)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return m
}

func TestProtobufRoundTripsThroughTheJSONMapping(t *testing.T) {
	cl := fake(t)
	in := `{"id": 9007199254740993, "user": "ann \"x\"", "amount": 12.5, "status": "PAID", "tags": ["a", "b"],
	  "counts": {"x": 3}, "line": {"sku": "s1", "qty": 2}, "blob": "AQID", "card": "visa",
	  "lines": [{"sku": "s2", "qty": 1}], "big": 18446744073709551615, "delta": -5, "ratio": 1.5,
	  "at": {"seconds": 1700000000, "nanos": 5}, "extra": "ignored"}`
	b, _ := wireProto(t, cl, "o-value", protoV1, "", in)
	if b[5] != 0 {
		t.Fatalf("the first message's index list is %x, want the single byte 0", b[5])
	}
	d, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	got := decodeProto(t, d, b)
	want := map[string]any{
		"id": json.Number("9007199254740993"), "user": "ann \"x\"", "amount": json.Number("12.5"), "status": "PAID",
		"tags": []any{"a", "b"}, "counts": map[string]any{"x": json.Number("3")},
		"line": map[string]any{"sku": "s1", "qty": json.Number("2")}, "blob": "AQID", "note": nil, "card": "visa",
		"lines": []any{map[string]any{"sku": "s2", "qty": json.Number("1")}}, "big": json.Number("18446744073709551615"),
		"delta": json.Number("-5"), "ratio": json.Number("1.5"), "at": map[string]any{"seconds": json.Number("1700000000"), "nanos": json.Number("5")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%v\nwant\n%v", got, want)
	}

	// The encoder judged by protojson: the payload is the message protojson
	// reads from the same JSON (which spells a Timestamp in RFC 3339).
	s, _ := ParseProto(protoV1, "")
	md := ProtoMessage(s)
	ref := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(strings.Replace(in, `{"seconds": 1700000000, "nanos": 5}`, `"2023-11-14T22:13:20.000000005Z"`, 1)), ref); err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(b[6:], m); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m, ref) {
		t.Fatalf("encoded %v, protojson reads %v", m, ref)
	}

	// Absent proto3 scalars show their default, so "amount > 0" works.
	b, _ = wireProto(t, cl, "o-value", protoV1, "", `{"id": 1}`)
	got = decodeProto(t, d, b)
	if got["amount"] != json.Number("0") || got["user"] != "" || got["status"] != "NEW" || got["line"] != nil || got["note"] != nil {
		t.Fatalf("defaults: %v", got)
	}
	if _, ok := got["card"]; ok {
		t.Fatalf("an unset oneof shows: %v", got)
	}
}

func TestProtobufIndexesOtherThanTheFirstMessage(t *testing.T) {
	cl := fake(t)
	d, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	for _, c := range []struct {
		message string
		index   []byte // the list as written: count, then zigzag indexes
		js      string
	}{
		{"Refund", []byte{2, 2}, `{"id":4,"why":"late"}`},
		// Line is Order's second nested type: the map field's entry type is
		// the first, as in the descriptor Confluent's serializers index.
		{"Order.Line", []byte{4, 0, 2}, `{"sku":"q","qty":7}`},
	} {
		b, _ := wireProto(t, cl, "idx-value", protoV1, c.message, c.js)
		if !bytes.Equal(b[5:5+len(c.index)], c.index) {
			t.Errorf("%s: index list %x, want %x", c.message, b[5:5+len(c.index)], c.index)
		}
		js, err := d.AppendJSON(context.Background(), nil, b)
		if err != nil || string(js) != c.js {
			t.Errorf("%s: decoded %s, %v; want %s", c.message, js, err, c.js)
		}
	}
}

func TestProtobufEvolutionAddsFieldsAndReaderDefaults(t *testing.T) {
	cl := fake(t)
	old, _ := wireProto(t, cl, "e-value", protoV1, "", `{"id": 1, "user": "a"}`)
	newer, _ := wireProto(t, cl, "e-value", protoV2, "", `{"id": 2, "user": "b", "currency": "USD"}`)
	d, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	if got := decodeProto(t, d, old); got["currency"] != nil {
		t.Errorf("the v1 record has a currency: %v", got)
	}
	if got := decodeProto(t, d, newer); got["currency"] != "USD" {
		t.Errorf("the field added mid-stream does not appear: %v", got)
	}
	reader, _ := ParseProto(protoV2, "")
	d, _ = protobufFormat{}.NewDecoder(cl, reader, nil)
	if got := decodeProto(t, d, old); got["currency"] != "" || got["user"] != "a" {
		t.Errorf("through the v2 reader the v1 record's currency is not its default: %v", got)
	}
	readerV1, _ := ParseProto(protoV1, "")
	d, _ = protobufFormat{}.NewDecoder(cl, readerV1, nil)
	if got := decodeProto(t, d, newer); got["currency"] != nil || got["user"] != "b" {
		t.Errorf("through the v1 reader the v2 record shows currency: %v", got)
	}
}

func TestProtobufBadRecordsAreBadDataWithTheirReason(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	good, e := wireProto(t, cl, "b-value", protoV1, "", `{"id": 1}`)
	avroID := wire(t, cl, "a-value", v1, map[string]any{"id": int64(1), "user": "u", "amount": 1.0, "status": "NEW", "note": nil})
	d, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	for _, c := range []struct {
		name, reason string
		b            []byte
	}{
		{"json", "wire-format", []byte(`{"id":1}`)},
		{"short", "wire-format", []byte{0, 0, 0}},
		{"index list cut", "wire-format", good[:5]},
		{"index past the messages", "protobuf-decode", append(append([]byte{}, good[:5]...), 2, 18)},
		{"payload cut", "protobuf-decode", append(append([]byte{}, good[:6]...), 0x0a, 5, 'a')},
		{"an avro schema", "protobuf-decode", avroID},
	} {
		_, err := d.AppendJSON(ctx, nil, c.b)
		var bd *BadDataError
		if !errors.As(err, &bd) || bd.Reason != c.reason {
			t.Errorf("%s: %v, want bad data %s", c.name, err, c.reason)
		}
	}
	for _, js := range []string{`{"id": "seven"}`, `{"id": 1.5}`, `{"status": "GONE"}`, `{"tags": "a"}`, `{"line": 3}`, `{"delta": 3000000000}`, `[1]`} {
		_, err := e.Append(nil, "b", []byte(js))
		var bd *BadDataError
		if !errors.As(err, &bd) || bd.Reason != "protobuf-encode" {
			t.Errorf("encoding %s: %v, want bad data protobuf-encode", js, err)
		}
	}
}

func TestProtobufIncompatibleOutputNamesSubjectAndField(t *testing.T) {
	cl := fake(t)
	wireProto(t, cl, "c-value", protoV1, "", `{"id": 1}`)
	s, _ := ParseProto(strings.Replace(protoV1, "string user = 2;", "int64 user = 2;", 1), "")
	e, _ := protobufFormat{}.NewEncoder(s)
	err := e.Register(context.Background(), cl, "c")
	if !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "c-value") || !strings.Contains(err.Error(), `"user"`) {
		t.Fatalf("got %v, want a config error naming c-value and user", err)
	}
}

func TestProtobufSchemaErrorsSayWhat(t *testing.T) {
	for text, want := range map[string]string{
		`syntax = "proto3"; message A { int64 a = 1 }`: "protocompile",
		`syntax = "proto3"; enum E { X = 0; }`:         "declares no message",
	} {
		if _, err := ParseProto(text, ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
	if _, err := ParseProto(protoV1, "Nope"); err == nil || !strings.Contains(err.Error(), `no message "Nope"`) {
		t.Errorf("a missing message: %v", err)
	}
}

func TestProtobufSchemaReferencesAreFetchedWithTheSchema(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	common := "syntax = \"proto3\";\npackage common;\nmessage Money { int64 cents = 1; string currency = 2; }\n"
	pay := "syntax = \"proto3\";\nimport \"common.proto\";\nmessage Pay { string id = 1; common.Money amount = 2; }\n"
	if _, err := cl.CreateSchema(ctx, "common-value", sr.Schema{Schema: common, Type: sr.TypeProtobuf}); err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(ctx, "pay-value", sr.Schema{Schema: pay, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common-value", Version: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"common.proto": common, "pay.proto": pay} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := protobufFormat{}.Parse(filepath.Join(dir, "pay.proto"), []byte(pay), "")
	if err != nil {
		t.Fatal(err)
	}
	m := dynamicpb.NewMessage(ProtoMessage(s))
	const js = `{"id":"p1","amount":{"cents":250,"currency":"EUR"}}`
	if err := protojson.Unmarshal([]byte(js), m); err != nil {
		t.Fatal(err)
	}
	b := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID)), 0)
	b, _ = proto.MarshalOptions{}.MarshalAppend(b, m)
	d, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	got, err := d.AppendJSON(ctx, nil, b)
	if err != nil || string(got) != js {
		t.Fatalf("decoded %s, %v; want %s", got, err, js)
	}
	// An output schema with imports of its own is refused at start.
	e, _ := protobufFormat{}.NewEncoder(s)
	if err := e.Register(ctx, cl, "pay-out"); !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "common.proto") {
		t.Fatalf("registering an output schema with imports: %v", err)
	}
}

func TestProtobufUnreachableRegistryIsRetriedNotBadData(t *testing.T) {
	cl, err := NewClient(Registry{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	d, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	_, err = d.AppendJSON(ctx, nil, []byte{0, 0, 0, 0, 9, 0, 8, 1})
	var bd *BadDataError
	if errors.As(err, &bd) || !errors.Is(err, eos.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable after retrying", err)
	}
}

// protoFlatMsg is a flat message with a field of every scalar kind.
const protoFlatMsg = `syntax = "proto3";
enum E { ZERO = 0; ONE = 1; }
message F {
  int32 a = 1; int64 b = 2; uint32 c = 3; uint64 d = 4; sint32 e = 5; sint64 f = 6;
  fixed32 g = 7; fixed64 h = 8; sfixed32 i = 9; sfixed64 j = 10; float k = 11; double l = 12;
  bool m = 13; string n = 14; bytes o = 15; E p = 16; optional string q = 17; optional int64 r = 18;
}
`

// The flat path (a protowire walk) gives what dynamicpb and the generic
// JSON writer give, byte for byte, on random messages of every scalar
// kind with fields repeated (the last wins), unknown fields, fields of
// the wrong wire type, cut payloads and enum numbers the enum lacks.
func TestProtobufFlatPathMatchesDynamicpb(t *testing.T) {
	cl := fake(t)
	ss, err := cl.CreateSchema(context.Background(), "f-value", sr.Schema{Schema: protoFlatMsg, Type: sr.TypeProtobuf})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ParseProto(protoFlatMsg, "")
	if newProtoFlat(ProtoMessage(s)) == nil {
		t.Fatal("F is not flat")
	}
	fast, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	slow, _ := protobufFormat{}.NewDecoder(cl, nil, nil)
	slow.(*protoDecoder).generic = true
	rng := rand.New(rand.NewPCG(1, 2))
	hdr := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID)), 0)
	for range 20000 {
		b := append([]byte(nil), hdr...)
		for range rng.IntN(12) {
			num := protowire.Number(1 + rng.IntN(20)) // 19, 20: unknown
			switch typ := rng.IntN(4); typ {
			case 0:
				b = protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), rng.Uint64()>>(rng.IntN(64)))
			case 1:
				b = protowire.AppendFixed32(protowire.AppendTag(b, num, protowire.Fixed32Type), rng.Uint32())
			case 2:
				b = protowire.AppendFixed64(protowire.AppendTag(b, num, protowire.Fixed64Type), rng.Uint64())
			case 3:
				s := []byte("héllo\"\\\x01")[:rng.IntN(10)]
				b = protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), s)
			}
		}
		if rng.IntN(20) == 0 && len(b) > len(hdr) {
			b = b[:len(b)-1]
		}
		want, werr := slow.AppendJSON(context.Background(), nil, b)
		got, gerr := fast.AppendJSON(context.Background(), nil, b)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Fatalf("% x:\n flat    %s (%v)\n dynamic %s (%v)", b, got, gerr, want, werr)
		}
		if werr == nil {
			// Fields() points at each field's value in the JSON.
			keys, spans := fast.Fields()
			var m map[string]json.RawMessage
			if err := json.Unmarshal(got, &m); err != nil || len(keys) != len(m) {
				t.Fatalf("%s: %v", got, err)
			}
			for i, k := range keys {
				if string(got[spans[i][0]:spans[i][1]]) != string(m[k]) {
					t.Fatalf("%s: field %s at %v", got, k, spans[i])
				}
			}
		}
	}
}
