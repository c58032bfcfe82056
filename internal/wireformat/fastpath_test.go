package wireformat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/hamba/avro/v2"
)

// wide has a field of every kind the fast path reads.
const wide = `{"type":"record","name":"W","fields":[
 {"name":"l","type":"long"},{"name":"i","type":"int"},{"name":"d","type":"double"},
 {"name":"f","type":"float"},{"name":"b","type":"boolean"},{"name":"s","type":"string"},
 {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
 {"name":"n","type":"null"},
 {"name":"ns","type":["null","string"]},{"name":"nd","type":["null","double"]},
 {"name":"nl","type":["long","null"]},
 {"name":"ne","type":["null",{"type":"enum","name":"E2","symbols":["X","Y"]}]}]}`

// fastSchemas are the shipped schemas and wide.
func fastSchemas(t testing.TB) map[string]avro.Schema {
	clean, err := os.ReadFile("../../topologies/examples/order-clean.avsc")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]avro.Schema{"order": avro.MustParse(datagen.AvroSchema), "order-clean": avro.MustParse(string(clean)), "wide": avro.MustParse(wide)}
}

// planned returns a decoder that knows schema id 1 as s, and an encoder
// of s for topic t: no registry needed.
func planned(t testing.TB, s avro.Schema) (*AvroDecoder, *AvroEncoder) {
	r, err := newReader(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewAvroDecoder(nil, nil, nil)
	d.plans[1] = &plan{flat: r}
	e, err := NewAvroEncoder(s)
	if err != nil {
		t.Fatal(err)
	}
	e.ids["t"] = 1
	return d, e
}

var strs = []string{"", "ann", `quote " and \ back`, "tab\tnew\nline\x01", "é ü 日本 🙂", "<&>", "\u2028", strings.Repeat("x", 200)}

var floats = []float64{0, math.Copysign(0, -1), 1, -3, 42, 12.5, 0.1, 1e-7, 1e20, 1e21, 9.3e18, -(1 << 63), 1 << 63, 1e300, 3.4e38, 1e6, 16777217, math.SmallestNonzeroFloat64}

// randomValue is a value hamba encodes as type s.
func randomValue(rng *rand.Rand, s avro.Schema) any {
	switch x := s.(type) {
	case *avro.NullSchema:
		return nil
	case *avro.EnumSchema:
		return x.Symbols()[rng.IntN(len(x.Symbols()))]
	case *avro.UnionSchema:
		b := x.Types()[rng.IntN(len(x.Types()))]
		if b.Type() == avro.Null {
			return nil
		}
		if e, ok := b.(*avro.EnumSchema); ok { // hamba names a union's named branch
			return map[string]any{e.FullName(): randomValue(rng, b)}
		}
		return randomValue(rng, b)
	case *avro.PrimitiveSchema:
		switch x.Type() {
		case avro.Boolean:
			return rng.IntN(2) == 1
		case avro.Int:
			return []int32{0, -1, 1, 63, -64, 64, math.MaxInt32, math.MinInt32, rng.Int32()}[rng.IntN(9)]
		case avro.Long:
			return []int64{0, -1, 300, math.MaxInt64, math.MinInt64, 1 << 53, rng.Int64(), -rng.Int64N(1 << 40)}[rng.IntN(8)]
		case avro.Float:
			if f := float32(floats[rng.IntN(len(floats))] * []float64{1, rng.Float64()}[rng.IntN(2)]); !math.IsInf(float64(f), 0) {
				return f
			}
			return float32(math.MaxFloat32)
		case avro.Double:
			return floats[rng.IntN(len(floats))] * []float64{1, rng.Float64() * 1000}[rng.IntN(2)]
		case avro.String:
			return strs[rng.IntN(len(strs))]
		}
	}
	panic(fmt.Sprintf("no values for %s", s.Type()))
}

// randomRecord encodes a random record of s with hamba/avro.
func randomRecord(t testing.TB, rng *rand.Rand, s avro.Schema) (map[string]any, []byte) {
	m := map[string]any{}
	for _, f := range s.(*avro.RecordSchema).Fields() {
		m[f.Name()] = randomValue(rng, f.Type())
	}
	b, err := avro.Marshal(s, m)
	if err != nil {
		t.Fatal(err)
	}
	return m, append([]byte{0, 0, 0, 0, 1}, b...)
}

// fromJSON decodes a field's JSON text as the etl topology's expressions
// see it (integers as int, other numbers as float64), independently of
// the code under test.
func fromJSON(t testing.TB, raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	if n, ok := v.(json.Number); ok {
		if !strings.ContainsAny(string(n), ".eE") {
			if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
				return int(i)
			}
		}
		f, _ := strconv.ParseFloat(string(n), 64)
		return f
	}
	return v
}

// TestFastDecodeEqualsTheGenericDecode: on random records of the shipped
// schemas, every field the fast path decodes is what the JSON path's
// expressions see (the JSON text AppendJSON writes, decoded) and what
// hamba/avro's generic decoder reads; and writing the record back through
// a shape that copies every field gives the bytes the generic encoder
// writes from that JSON.
func TestFastDecodeEqualsTheGenericDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 6))
	for name, s := range fastSchemas(t) {
		d, e := planned(t, s)
		var rec Record
		for range 3000 {
			want, b := randomRecord(t, rng, s)
			js, err := d.AppendJSON(t.Context(), nil, b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !d.Decode(b, &rec) {
				t.Fatalf("%s: the fast path declined %v", name, want)
			}
			keys, spans := d.Fields()
			for i, k := range keys {
				got, fromText := rec.Value(i), fromJSON(t, js[spans[i][0]:spans[i][1]])
				if got != fromText {
					t.Fatalf("%s: field %s = %#v, the JSON path sees %#v (%s)", name, k, got, fromText, js)
				}
				if !sameValue(got, want[k]) {
					t.Fatalf("%s: field %s = %#v, hamba/avro wrote %#v", name, k, got, want[k])
				}
			}
			sh := e.Shape(&rec, func(n string) Source { return Source{Input: indexOf(keys, n), Computed: -1} }, nil)
			fast, err := e.AppendShaped(nil, "t", &rec, sh, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			slow, err := e.Append(nil, "t", js)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !bytes.Equal(fast, slow) {
				t.Fatalf("%s: fast %x, generic %x for %s", name, fast, slow, js)
			}
		}
	}
}

func indexOf(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// sameValue compares a decoded field with the value hamba encoded it from.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		for _, v := range w {
			return sameValue(got, v)
		}
	case int64:
		return got == int(w)
	case int32:
		return got == int(w)
	case float64:
		switch g := got.(type) {
		case int:
			return float64(g) == w
		case float64:
			return g == w
		}
		return false
	case float32:
		switch g := got.(type) {
		case int:
			return float32(g) == w
		case float64:
			return float32(g) == w
		}
		return false
	}
	return got == want
}

// testJSON writes a computed value's JSON text as the etl topology does.
func testJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, fmt.Errorf("%v is not a JSON number", x)
		}
		return appendFloat(b, x), nil
	case string:
		return appendJSONString(b, x), nil
	}
	out, err := json.Marshal(v)
	return append(b, out...), err
}

// TestFastEncodeEqualsTheGenericEncode: computed values of every type
// written into fields of every kind give the bytes, or the error, that
// encoding their JSON text gives.
func TestFastEncodeEqualsTheGenericEncode(t *testing.T) {
	s := avro.MustParse(wide)
	d, e := planned(t, s)
	rng := rand.New(rand.NewPCG(26, 7))
	_, b := randomRecord(t, rng, s)
	var rec Record
	if !d.Decode(b, &rec) {
		t.Fatal("declined")
	}
	values := []any{nil, true, false, 0, 1, -1, math.MaxInt32 + 1, math.MinInt32, math.MaxInt64, int64(5), 2.0, 2.5, -0.0, 1e21, math.NaN(), math.Inf(1),
		"", "A", "B", "Y", "x", "é", "bad \xff utf8", "q\"", []any{1}, map[string]any{"a": 1}}
	names := rec.Names()
	for _, target := range names {
		for _, v := range values {
			vals := make([]any, len(names))
			sh := e.Shape(&rec, func(n string) Source {
				if n == target {
					return Source{Input: -1, Computed: 0}
				}
				return Source{Input: indexOf(names, n), Computed: -1}
			}, testJSON)
			vals[0] = v
			fast, ferr := e.AppendShaped(nil, "t", &rec, sh, vals)
			slow, serr := e.AppendFields(nil, "t", func(n string) ([]byte, bool) {
				if n == target {
					raw, err := testJSON(nil, v)
					return raw, err == nil
				}
				return rec.appendJSONField(nil, indexOf(names, n)), true
			})
			if fmt.Sprint(ferr) != fmt.Sprint(serr) && !(ferr != nil && serr != nil && isNotJSON(v)) {
				t.Fatalf("%s = %#v: fast error %v, generic %v", target, v, ferr, serr)
			}
			if ferr == nil && !bytes.Equal(fast, slow) {
				t.Fatalf("%s = %#v: fast %x, generic %x", target, v, fast, slow)
			}
		}
	}
}

// isNotJSON: values the JSON path dead-letters before encoding them.
func isNotJSON(v any) bool {
	f, ok := v.(float64)
	return ok && (math.IsNaN(f) || math.IsInf(f, 0))
}

// FuzzFastDecodeAgreesWithAppendJSON: on any payload, the fast path either
// declines it or reads what AppendJSON reads; it never accepts a record
// the JSON path dead-letters.
func FuzzFastDecodeAgreesWithAppendJSON(f *testing.F) {
	s := avro.MustParse(wide)
	rng := rand.New(rand.NewPCG(26, 8))
	for range 20 {
		_, b := randomRecord(f, rng, s)
		f.Add(b[5:])
	}
	d, _ := planned(f, s)
	f.Fuzz(func(t *testing.T, p []byte) {
		b := append([]byte{0, 0, 0, 0, 1}, p...)
		var rec Record
		ok := d.Decode(b, &rec)
		js, err := d.AppendJSON(t.Context(), nil, b)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("fast path accepted what AppendJSON refuses: %v", err)
		}
		keys, spans := d.Fields()
		for i := range keys {
			raw := js[spans[i][0]:spans[i][1]]
			if got, want := rec.Value(i), fromJSON(t, raw); got != want {
				t.Fatalf("field %s: %#v, JSON path %#v", keys[i], got, want)
			}
		}
	})
}
