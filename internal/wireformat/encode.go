package wireformat

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

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
	return w.appendFields(dst, func(name string) ([]byte, bool) {
		fv := obj.Get(name)
		if fv == nil {
			return nil, false
		}
		return fv.MarshalTo(nil), true
	})
}

// appendFields encodes the fields get returns, as raw JSON values (valid
// JSON: the caller parsed them), in the schema's order.
func (w *writer) appendFields(dst []byte, get func(string) ([]byte, bool)) ([]byte, error) {
	for _, f := range w.fields {
		raw, ok := get(f.name)
		if !ok {
			if f.def == nil {
				return dst, errMissing(f.name)
			}
			dst = append(dst, f.def...)
			continue
		}
		var err error
		if dst, err = encodeRaw(dst, raw, f.t); err != nil {
			return dst, errField(f.name, err)
		}
	}
	return dst, nil
}

func appendVarint(b []byte, n int64) []byte {
	return binary.AppendUvarint(b, uint64(n<<1)^uint64(n>>63))
}

// jsonKind is the JSON type of a raw value by its first byte: n, t (true
// or false), 0 (a number), " (a string), or another byte.
func jsonKind(raw []byte) byte {
	switch c := raw[0]; {
	case c == 't' || c == 'f':
		return 't'
	case c == '-' || '0' <= c && c <= '9':
		return '0'
	default:
		return c
	}
}

// isInteger says whether the raw JSON number has no fraction or exponent.
func isInteger(raw []byte) bool { return bytes.IndexAny(raw, ".eE") < 0 }

// str returns the bytes of a raw JSON string.
func str(raw []byte) ([]byte, error) {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func encodeRaw(dst, raw []byte, t flatType) ([]byte, error) {
	k := jsonKind(raw)
	switch t.k {
	case kNull:
		if k == 'n' {
			return dst, nil
		}
	case kBool:
		if k == 't' {
			if raw[0] == 't' {
				return append(dst, 1), nil
			}
			return append(dst, 0), nil
		}
	case kInt, kLong:
		if k == '0' {
			n, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil {
				f, ferr := strconv.ParseFloat(string(raw), 64)
				if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
					return dst, fmt.Errorf("%s is not an integer", raw)
				}
				n = int64(f)
			}
			if t.k == kInt && (n < math.MinInt32 || n > math.MaxInt32) {
				return dst, fmt.Errorf("%d does not fit an Avro int", n)
			}
			return appendVarint(dst, n), nil
		}
	case kFloat, kDouble:
		if k == '0' {
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil {
				return dst, fmt.Errorf("%s: %w", raw, err)
			}
			if t.k == kFloat {
				return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
			}
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
		}
	case kString:
		if k == '"' {
			s, err := str(raw)
			if err != nil {
				return dst, err
			}
			return append(appendVarint(dst, int64(len(s))), s...), nil
		}
	case kEnum:
		if k == '"' {
			s, err := str(raw)
			if err != nil {
				return dst, err
			}
			for i, sym := range t.symbols {
				if sym == string(s) {
					return appendVarint(dst, int64(i)), nil
				}
			}
			return dst, fmt.Errorf("%q is not one of the symbols %v", s, t.symbols)
		}
	case kUnion:
		for i, b := range t.branches {
			if fits(raw, k, b) {
				return encodeRaw(appendVarint(dst, int64(i)), raw, b)
			}
		}
		return dst, fmt.Errorf("%s fits no branch of the union", raw)
	}
	return dst, fmt.Errorf("%s is not a %s", raw, kindName[t.k])
}

// fits says whether raw JSON of kind k has the JSON type of branch t.
func fits(raw []byte, k byte, t flatType) bool {
	switch k {
	case 'n':
		return t.k == kNull
	case 't':
		return t.k == kBool
	case '0':
		if t.k == kInt || t.k == kLong {
			return isInteger(raw)
		}
		return t.k == kFloat || t.k == kDouble
	case '"':
		if t.k == kEnum {
			s, err := str(raw)
			return err == nil && slices.Contains(t.symbols, string(s))
		}
		return t.k == kString
	}
	return false
}

var kindName = map[kind]string{kNull: "null", kBool: "boolean", kInt: "int", kLong: "long", kFloat: "float", kDouble: "double", kString: "string", kEnum: "enum symbol", kUnion: "union"}

func errMissing(name string) error {
	return fmt.Errorf("field %q is not in the output and the schema gives it no default", name)
}

func errField(name string, err error) error { return fmt.Errorf("field %q: %w", name, err) }
