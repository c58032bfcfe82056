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
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// topologyProtobuf is the etl topology on Protobuf topics: see
// protoCopying.
const topologyProtobuf = "etl-protobuf"

// protoConfig reads datagen's orders in Protobuf and writes each as
// protoOutSchema's message: every record kept, its key kept, so that
// verify judges the output like a copy.
const protoConfig = `topology: etl
format: {input: protobuf, output: protobuf, output_schema: out.proto}
map:
  cents: int(round(amount * 100))
drop: [pad, ts]
`

const protoOutSchema = `syntax = "proto3";
message Out { int64 seq = 1; string user = 2; double amount = 3; int64 cents = 4; }
`

// protoCopying is avroCopying with Protobuf: the input is datagen's orders
// in the Confluent wire format (message Order of order.proto, registered);
// the workers decode them with their protowire walk (Order is flat) and
// encode the output with protowire. The output is judged by verify like a
// copy, and record by record by dynamicpb and protojson (not the
// workers' code), against the fields datagen derives from the key.
type protoCopying struct{ avroCopying }

func (p *protoCopying) topology(h *harness) ([]string, error) {
	return p.startWith(h, "etl-protobuf.yaml", protoConfig, "out.proto", protoOutSchema)
}

func (p *protoCopying) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	enc, err := protoEncoder(datagen.ProtoSchema)
	if err != nil {
		return nil, err
	}
	return p.produceWith(ctx, h, enc, in, partitions, n, rate)
}

// protoEncoder is package wireformat's encoder of text's first message.
func protoEncoder(text string) (wireformat.Encoder, error) {
	s, err := wireformat.ParseProto(text, "")
	if err != nil {
		return nil, err
	}
	return wireformat.Lookup(wireformat.Protobuf).NewEncoder(s)
}

// protoOut is protoOutSchema's message as protojson writes it (int64 as
// strings).
type protoOut struct {
	Seq    int64   `json:"seq,string"`
	User   string  `json:"user"`
	Amount float64 `json:"amount"`
	Cents  int64   `json:"cents,string"`
}

// readProtoOut reads a wire-format record of protoOutSchema's message
// with dynamicpb and protojson, not with the workers' decoding (a
// protowire walk for flat messages): the header (magic byte, schema id,
// the message-index list [0] as its single 0 byte), then the message, no
// field outside it.
func readProtoOut(out protoreflect.MessageDescriptor, b []byte) (protoOut, error) {
	var v protoOut
	if len(b) < 6 || b[0] != 0 || b[5] != 0 {
		return v, fmt.Errorf("not in the wire format with message index [0]: % x", b[:min(len(b), 6)])
	}
	m := dynamicpb.NewMessage(out)
	if err := proto.Unmarshal(b[6:], m); err != nil {
		return v, err
	}
	if len(m.GetUnknown()) > 0 {
		return v, fmt.Errorf("fields outside message Out: % x", m.GetUnknown())
	}
	js, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return v, err
	}
	d := json.NewDecoder(bytes.NewReader(js))
	d.DisallowUnknownFields()
	return v, d.Decode(&v)
}

func (p *protoCopying) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	s, err := wireformat.ParseProto(protoOutSchema, "")
	if err != nil {
		return err
	}
	md := wireformat.ProtoMessage(s)
	return p.copying.finishChecked(ctx, h, res, app, in, out, partitions,
		"Protobuf output records decoded by dynamicpb and protojson and checked against their input's fields", "are not the Protobuf of their input",
		func(r *kgo.Record) string {
			i, err := strconv.ParseInt(string(r.Key), 10, 64)
			var v protoOut
			if err == nil {
				v, err = readProtoOut(md, r.Value)
			}
			amount := datagen.Amount(i)
			if err != nil || v.Seq != i || v.User != datagen.User(i) || v.Amount != amount || v.Cents != int64(math.Round(amount*100)) {
				return fmt.Sprintf("%+v (%v)", v, err)
			}
			return ""
		})
}

// protobufKills SIGKILLs the Protobuf etl's two workers mid-transaction at
// random; each restart fetches and compiles the input's schema again and
// registers the output schema again (the same id).
func protobufKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "protobuf")
}

// topologyProtobufAggregate is the aggregate topology reading Protobuf:
// see newProtoAggregating.
const topologyProtobufAggregate = "aggregate-protobuf"

// protoEventSchema is aggcheck's records in Protobuf. Fields are in
// aggcheck's JSON order, so a late record's dead letter (the JSON the
// workers decoded) is byte for byte what aggcheck wrote;
// a regular record decodes with "late":false (proto3's default), which the
// topology ignores.
const protoEventSchema = `syntax = "proto3";
message Event { string user = 1; int64 ts = 2; int64 amount = 3; bool late = 4; }
`

// newProtoAggregating is the aggregate drill reading Protobuf: avro-
// aggregate-kills' drill with aggcheck's records in Protobuf, judged the
// same way, against the JSON they were encoded from.
func newProtoAggregating() *avroAggregating {
	return newWireAggregating(wireformat.Protobuf, func() (wireformat.Encoder, error) { return protoEncoder(protoEventSchema) })
}

// protobufAggregateKills SIGKILLs the Protobuf aggregate's two workers
// mid-transaction at random; each restart restores its windows from the
// changelog and fetches and compiles the input's schema again.
func protobufAggregateKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "protobuf-agg")
}
