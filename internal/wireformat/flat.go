package wireformat

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/hamba/avro/v2"
)

// A flat record is what most topic schemas are: a record whose fields are
// primitives (null, boolean, int, long, float, double, string), enums, or
// unions of those (["null", "string"]). Records of that shape are
// transcoded by hand, field by field, straight between the Avro binary and
// JSON bytes; anything else (nested records, arrays, maps, bytes, fixed,
// logical types) goes through hamba/avro's generic decoder and
// encoding/json on input, and is refused as an output schema.

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kLong
	kFloat
	kDouble
	kString
	kEnum
	kUnion
)

// flatType is one field's type.
type flatType struct {
	k        kind
	symbols  []string   // kEnum
	branches []flatType // kUnion
}

// flatField is a field of a flat record.
type flatField struct {
	name string
	t    flatType
	// def is the default's Avro binary (encoder) or JSON (decoder), nil if
	// there is none.
	def []byte
}

// flatOf returns the fields of s if s is a flat record, else the reason it
// is not.
func flatOf(s avro.Schema) ([]flatField, error) {
	rs, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("the schema is a %s, not a record", s.Type())
	}
	var out []flatField
	for _, f := range rs.Fields() {
		t, err := flatTypeOf(f.Type(), true)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name(), err)
		}
		out = append(out, flatField{name: f.Name(), t: t})
	}
	return out, nil
}

func flatTypeOf(s avro.Schema, unionOK bool) (flatType, error) {
	switch x := s.(type) {
	case *avro.NullSchema:
		return flatType{k: kNull}, nil
	case *avro.PrimitiveSchema:
		if x.Logical() != nil {
			return flatType{}, fmt.Errorf("logical type %s is not supported yet", x.Logical().Type())
		}
		switch x.Type() {
		case avro.Null:
			return flatType{k: kNull}, nil
		case avro.Boolean:
			return flatType{k: kBool}, nil
		case avro.Int:
			return flatType{k: kInt}, nil
		case avro.Long:
			return flatType{k: kLong}, nil
		case avro.Float:
			return flatType{k: kFloat}, nil
		case avro.Double:
			return flatType{k: kDouble}, nil
		case avro.String:
			return flatType{k: kString}, nil
		}
	case *avro.EnumSchema:
		return flatType{k: kEnum, symbols: x.Symbols()}, nil
	case *avro.UnionSchema:
		if !unionOK {
			return flatType{}, fmt.Errorf("a union inside a union")
		}
		t := flatType{k: kUnion}
		for _, b := range x.Types() {
			bt, err := flatTypeOf(b, false)
			if err != nil {
				return flatType{}, err
			}
			t.branches = append(t.branches, bt)
		}
		return t, nil
	}
	return flatType{}, fmt.Errorf("type %s is not supported yet (flat records of primitives, enums and unions of them)", s.Type())
}

// reader is a plan for decoding records of one writer schema into JSON
// objects with the reader schema's fields, in the reader's order.
type reader struct {
	fields []flatField // writer's fields, in the order the payload has them
	slot   []int       // writer field -> reader field, -1 if the reader has none
	// enumMap, per writer enum field (or union branch of one), maps the
	// writer's symbol index to the reader's symbol ("" if the reader lacks
	// it and has no default).
	names [][]byte // reader field names as JSON keys with the colon: "name":
	defs  [][]byte // reader field -> default JSON for fields the writer lacks
	// readerEnums: reader symbols per reader field, to check enum values.
	readerEnums [][]string
	readerEnumD []string // reader enum default, "" if none
	// scratch: per reader field, where its JSON is in buf.
	at  [][2]int
	buf []byte
	// keys and spans: after appendJSON, each reader field's name and where
	// its value is in the JSON appended, so that a caller need not parse it.
	keys  []string
	spans [][2]int
	// same: the reader's fields are the writer's (no reader schema, or
	// the same one): values go straight to dst, in the payload's order.
	same bool
}

// appendSame is appendJSON when reader and writer schemas are the same.
func (r *reader) appendSame(dst, p []byte) ([]byte, error) {
	dst = append(dst, '{')
	var err error
	for j, f := range r.fields {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, r.names[j]...)
		start := len(dst)
		if dst, p, err = decodeValue(dst, p, f.t); err != nil {
			return dst, fmt.Errorf("field %q: %w", f.name, err)
		}
		r.spans[j] = [2]int{start, len(dst)}
	}
	if len(p) != 0 {
		return dst, fmt.Errorf("%d bytes after the record", len(p))
	}
	return append(dst, '}'), nil
}

func newReader(writer, readerSchema avro.Schema) (*reader, error) {
	wf, err := flatOf(writer)
	if err != nil {
		return nil, err
	}
	rf := wf
	var rs *avro.RecordSchema
	if readerSchema != nil {
		if rf, err = flatOf(readerSchema); err != nil {
			return nil, err
		}
		rs = readerSchema.(*avro.RecordSchema)
	} else {
		rs = writer.(*avro.RecordSchema)
	}
	r := &reader{fields: wf, slot: make([]int, len(wf)), defs: make([][]byte, len(rf)), at: make([][2]int, len(rf)),
		readerEnums: make([][]string, len(rf)), readerEnumD: make([]string, len(rf)), spans: make([][2]int, len(rf))}
	for i, f := range rf {
		r.names = append(r.names, append(appendJSONString(nil, f.name), ':'))
		r.keys = append(r.keys, f.name)
		af := rs.Fields()[i]
		if e, ok := af.Type().(*avro.EnumSchema); ok && readerSchema != nil {
			r.readerEnums[i] = e.Symbols()
			if e.HasDefault() {
				r.readerEnumD[i] = e.Default()
			}
		}
		if !slices.ContainsFunc(wf, func(w flatField) bool { return w.name == f.name }) {
			if !af.HasDefault() {
				return nil, fmt.Errorf("reader field %q is not in the writer schema and has no default", f.name)
			}
			d, err := json.Marshal(af.Default())
			if err != nil {
				return nil, fmt.Errorf("reader field %q: default: %w", f.name, err)
			}
			r.defs[i] = d
		}
	}
	for i, w := range wf {
		r.slot[i] = slices.IndexFunc(rf, func(f flatField) bool { return f.name == w.name })
	}
	r.same = readerSchema == nil || readerSchema.Fingerprint() == writer.Fingerprint()
	return r, nil
}

// appendJSON decodes payload and appends it to dst as a JSON object.
func (r *reader) appendJSON(dst, p []byte) ([]byte, error) {
	if r.same {
		return r.appendSame(dst, p)
	}
	r.buf = r.buf[:0]
	for i := range r.at {
		r.at[i] = [2]int{-1, -1}
	}
	var err error
	for i, f := range r.fields {
		start := len(r.buf)
		if r.buf, p, err = decodeValue(r.buf, p, f.t); err != nil {
			return dst, fmt.Errorf("field %q: %w", f.name, err)
		}
		if j := r.slot[i]; j >= 0 {
			if syms := r.readerEnums[j]; syms != nil && r.buf[start] == '"' {
				sym := string(r.buf[start+1 : len(r.buf)-1])
				if !slices.Contains(syms, sym) {
					if r.readerEnumD[j] == "" {
						return dst, fmt.Errorf("field %q: symbol %q is not in the reader's enum and it has no default", f.name, sym)
					}
					r.buf = appendJSONString(r.buf[:start], r.readerEnumD[j])
				}
			}
			r.at[j] = [2]int{start, len(r.buf)}
		}
	}
	if len(p) != 0 {
		return dst, fmt.Errorf("%d bytes after the record", len(p))
	}
	dst = append(dst, '{')
	for j, name := range r.names {
		if j > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, name...)
		start := len(dst)
		if a := r.at[j]; a[0] >= 0 {
			dst = append(dst, r.buf[a[0]:a[1]]...)
		} else {
			dst = append(dst, r.defs[j]...)
		}
		r.spans[j] = [2]int{start, len(dst)}
	}
	return append(dst, '}'), nil
}

var errShort = fmt.Errorf("the payload ends early")

func varint(p []byte) (int64, []byte, error) {
	u, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, p, errShort
	}
	return int64(u>>1) ^ -int64(u&1), p[n:], nil
}

func decodeValue(dst, p []byte, t flatType) ([]byte, []byte, error) {
	switch t.k {
	case kNull:
		return append(dst, "null"...), p, nil
	case kBool:
		if len(p) < 1 {
			return dst, p, errShort
		}
		return strconv.AppendBool(dst, p[0] != 0), p[1:], nil
	case kInt, kLong:
		n, p, err := varint(p)
		return strconv.AppendInt(dst, n, 10), p, err
	case kFloat:
		if len(p) < 4 {
			return dst, p, errShort
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(p))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return dst, p, fmt.Errorf("%v is not a JSON number", f)
		}
		return strconv.AppendFloat(dst, float64(f), 'g', -1, 32), p[4:], nil
	case kDouble:
		if len(p) < 8 {
			return dst, p, errShort
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(p))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return dst, p, fmt.Errorf("%v is not a JSON number", f)
		}
		return appendFloat(dst, f), p[8:], nil
	case kString:
		n, p, err := varint(p)
		if err != nil {
			return dst, p, err
		}
		if n < 0 || int64(len(p)) < n {
			return dst, p, errShort
		}
		return appendJSONBytes(dst, p[:n]), p[n:], nil
	case kEnum:
		n, p, err := varint(p)
		if err != nil {
			return dst, p, err
		}
		if n < 0 || n >= int64(len(t.symbols)) {
			return dst, p, fmt.Errorf("enum index %d out of range", n)
		}
		return appendJSONString(dst, t.symbols[n]), p, nil
	case kUnion:
		n, p, err := varint(p)
		if err != nil {
			return dst, p, err
		}
		if n < 0 || n >= int64(len(t.branches)) {
			return dst, p, fmt.Errorf("union index %d out of range", n)
		}
		return decodeValue(dst, p, t.branches[n])
	}
	return dst, p, fmt.Errorf("unknown kind %d", t.k)
}

// appendFloat appends a finite float as encoding/json would write it.
func appendFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

func appendJSONString(b []byte, s string) []byte { return appendJSONBytes(b, []byte(s)) }

// appendJSONBytes appends s as a JSON string: plain ASCII directly, the
// rest through encoding/json's escaping.
func appendJSONBytes(b []byte, s []byte) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			out, _ := json.Marshal(string(s)) // invalid UTF-8 becomes U+FFFD, as encoding/json does
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
