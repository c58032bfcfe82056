package chaos

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
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
// the workers decode them with dynamicpb. The output is judged by verify
// like a copy, and record by record by a protowire walk of protoOutSchema's
// fields written here (not the topology's dynamicpb decoding), against the
// fields datagen derives from the key.
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

// protoOut is protoOutSchema's message as the judge reads it.
type protoOut struct {
	Seq    int64
	User   string
	Amount float64
	Cents  int64
}

// readProtoOut reads a wire-format record of protoOutSchema's message
// field by field with protowire: the header (magic byte, schema id, the
// message-index list [0] as its single 0 byte), then fields 1-4 with their
// wire types; anything else is an error.
func readProtoOut(b []byte) (protoOut, error) {
	var v protoOut
	if len(b) < 6 || b[0] != 0 || b[5] != 0 {
		return v, fmt.Errorf("not in the wire format with message index [0]: % x", b[:min(len(b), 6)])
	}
	_ = binary.BigEndian.Uint32(b[1:5]) // any id: each worker registers the same schema
	b = b[6:]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return v, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case (num == 1 || num == 4) && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return v, protowire.ParseError(n)
			}
			if num == 1 {
				v.Seq = int64(x)
			} else {
				v.Cents = int64(x)
			}
			b = b[n:]
		case num == 2 && typ == protowire.BytesType:
			s, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return v, protowire.ParseError(n)
			}
			v.User, b = string(s), b[n:]
		case num == 3 && typ == protowire.Fixed64Type:
			x, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return v, protowire.ParseError(n)
			}
			v.Amount, b = math.Float64frombits(x), b[n:]
		default:
			return v, fmt.Errorf("field %d with wire type %d is not in message Out", num, typ)
		}
	}
	return v, nil
}

func (p *protoCopying) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	return p.copying.finishChecked(ctx, h, res, app, in, out, partitions,
		"Protobuf output records read field by field with protowire and checked against their input's fields", "are not the Protobuf of their input",
		func(r *kgo.Record) string {
			i, err := strconv.ParseInt(string(r.Key), 10, 64)
			var v protoOut
			if err == nil {
				v, err = readProtoOut(r.Value)
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
// workers decoded, with dynamicpb) is byte for byte what aggcheck wrote;
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
