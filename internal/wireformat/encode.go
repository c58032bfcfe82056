package wireformat

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/hamba/avro/v2"
	"github.com/valyala/fastjson"
)

// writer is a plan for encoding JSON objects as records of a flat output
// schema.
type writer struct {
	fields []flatField
	p      fastjson.Parser
}

func newWriter(s avro.Schema) (*writer, error) {
	fs, err := flatOf(s)
	if err != nil {
		return nil, err
	}
	rs := s.(*avro.RecordSchema)
	for i, f := range rs.Fields() {
		if f.HasDefault() {
			d, err := avro.Marshal(f.Type(), f.Default())
			if err != nil {
				return nil, fmt.Errorf("field %q: default: %w", f.Name(), err)
			}
			fs[i].def = d
		}
	}
	return &writer{fields: fs}, nil
}

// appendAvro encodes the JSON object js as the Avro binary of the schema.
func (w *writer) appendAvro(dst, js []byte) ([]byte, error) {
	v, err := w.p.ParseBytes(js)
	if err != nil {
		return dst, fmt.Errorf("the output is not JSON: %w", err)
	}
	obj, err := v.Object()
	if err != nil {
		return dst, fmt.Errorf("the output is not a JSON object")
	}
	for _, f := range w.fields {
		fv := obj.Get(f.name)
		if fv == nil {
			if f.def == nil {
				return dst, fmt.Errorf("field %q is not in the output and the schema gives it no default", f.name)
			}
			dst = append(dst, f.def...)
			continue
		}
		if dst, err = encodeValue(dst, fv, f.t); err != nil {
			return dst, fmt.Errorf("field %q: %w", f.name, err)
		}
	}
	return dst, nil
}

func appendVarint(b []byte, n int64) []byte {
	return binary.AppendUvarint(b, uint64(n<<1)^uint64(n>>63))
}

func encodeValue(dst []byte, v *fastjson.Value, t flatType) ([]byte, error) {
	switch t.k {
	case kNull:
		if v.Type() == fastjson.TypeNull {
			return dst, nil
		}
	case kBool:
		switch v.Type() {
		case fastjson.TypeTrue:
			return append(dst, 1), nil
		case fastjson.TypeFalse:
			return append(dst, 0), nil
		}
	case kInt, kLong:
		if v.Type() == fastjson.TypeNumber {
			n, err := v.Int64()
			if err != nil {
				f, ferr := v.Float64()
				if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
					return dst, fmt.Errorf("%s is not an integer", v)
				}
				n = int64(f)
			}
			if t.k == kInt && (n < math.MinInt32 || n > math.MaxInt32) {
				return dst, fmt.Errorf("%d does not fit an Avro int", n)
			}
			return appendVarint(dst, n), nil
		}
	case kFloat:
		if f, err := v.Float64(); err == nil {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
	case kDouble:
		if f, err := v.Float64(); err == nil {
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
		}
	case kString:
		if s, err := v.StringBytes(); err == nil {
			return append(appendVarint(dst, int64(len(s))), s...), nil
		}
	case kEnum:
		if s, err := v.StringBytes(); err == nil {
			if i := slices.Index(t.symbols, string(s)); i >= 0 {
				return appendVarint(dst, int64(i)), nil
			}
			return dst, fmt.Errorf("%q is not one of the symbols %v", s, t.symbols)
		}
	case kUnion:
		for i, b := range t.branches {
			if fits(v, b) {
				return encodeValue(appendVarint(dst, int64(i)), v, b)
			}
		}
		return dst, fmt.Errorf("%s fits no branch of the union", v)
	}
	return dst, fmt.Errorf("%s is not a %s", v, kindName[t.k])
}

// fits says whether JSON value v has the JSON type of branch t.
func fits(v *fastjson.Value, t flatType) bool {
	switch v.Type() {
	case fastjson.TypeNull:
		return t.k == kNull
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return t.k == kBool
	case fastjson.TypeNumber:
		if t.k == kInt || t.k == kLong {
			_, err := v.Int64()
			return err == nil
		}
		return t.k == kFloat || t.k == kDouble
	case fastjson.TypeString:
		if t.k == kEnum {
			s, _ := v.StringBytes()
			return slices.Contains(t.symbols, string(s))
		}
		return t.k == kString
	}
	return false
}

var kindName = map[kind]string{kNull: "null", kBool: "boolean", kInt: "int", kLong: "long", kFloat: "float", kDouble: "double", kString: "string", kEnum: "enum symbol", kUnion: "union"}
