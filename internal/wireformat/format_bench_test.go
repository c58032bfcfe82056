package wireformat

import (
	"context"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
)

// The codecs on datagen's order, each decoding its own wire-format record
// to JSON and encoding JSON back (srfake registry, ids cached):
//
//	go test ./internal/wireformat -run - -bench 'Order' -benchmem
func BenchmarkOrderDecode(b *testing.B) {
	for _, k := range []Kind{Avro, Protobuf} {
		b.Run(string(k), func(b *testing.B) {
			dec, enc := orderCodec(b, k)
			rec, err := enc.Append(nil, "o", datagen.Value(7, fixedTime, 100))
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = dec.AppendJSON(context.Background(), buf[:0], rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOrderEncode(b *testing.B) {
	for _, k := range []Kind{Avro, Protobuf} {
		b.Run(string(k), func(b *testing.B) {
			_, enc := orderCodec(b, k)
			js := datagen.Value(7, fixedTime, 100)
			var buf []byte
			var err error
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = enc.Append(buf[:0], "o", js); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var fixedTime = time.UnixMilli(1_700_000_000_000)

func orderCodec(b *testing.B, k Kind) (Decoder, Encoder) {
	cl := fake(b)
	f := Lookup(k)
	text := map[Kind]string{Avro: datagen.AvroSchema, Protobuf: datagen.ProtoSchema}[k]
	s, err := f.Parse("order"+f.SchemaExt(), []byte(text), "")
	if err != nil {
		b.Fatal(err)
	}
	enc, err := f.NewEncoder(s)
	if err != nil {
		b.Fatal(err)
	}
	if err := enc.Register(context.Background(), cl, "o"); err != nil {
		b.Fatal(err)
	}
	dec, err := f.NewDecoder(cl, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	return dec, enc
}
