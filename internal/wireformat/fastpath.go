package wireformat

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// The fast path: a topology that reads and writes flat Avro records can
// skip the JSON text in between. Record decodes a payload field by field
// into a table of scalars (no pointers: filling it costs no GC write
// barrier), Value hands a field to an expression exactly as the JSON path
// would (decoding the JSON text appendJSON writes), and AvroEncoder.AppendShaped
// writes the output schema's fields from the table, copying the Avro bytes
// of an input field whose type is the output's and encoding computed values
// directly. Anything it cannot do exactly as the JSON path does (a payload
// that does not decode, a writer schema read through a different reader
// schema, a string that is not valid UTF-8, a schema id not fetched yet) it
// declines, and the caller runs the JSON path, which gives the record its
// dead letter or its registry fetch.

// Record is one payload decoded field by field: the reader's fields, which
// are the writer's (a plan whose schemas are the same). It is reused from
// record to record.
type Record struct {
	r      *reader
	p      []byte
	fields []field
	id     uint32
}

// field is one decoded field: where its Avro bytes are in the payload
// (union index included), and its value by the branch's kind.
type field struct {
	start, end int32
	k          kind
	branch     int8  // the union's branch, or -1
	n          int64 // bool (0 or 1), int, long, enum index; string: its length
	s          int32 // string: where its bytes start in the payload
	f          float64
}

// ID returns the writer schema id of the last record Decode accepted.
func (rec *Record) ID() uint32 { return rec.id }

// Names returns the record's field names, in order; they are the same for
// every record of one schema id.
func (rec *Record) Names() []string { return rec.r.keys }

// Decode decodes the wire-format record b into rec, if its schema id is
// one the decoder has already fetched, its plan is a flat record read as
// written, and every field decodes; otherwise it returns false and leaves
// the record to AppendJSON. rec aliases b until the next call.
func (d *AvroDecoder) Decode(b []byte, rec *Record) bool {
	if len(b) < 5 || b[0] != 0 {
		return false
	}
	id := binary.BigEndian.Uint32(b[1:5])
	p, ok := d.plans[id]
	if !ok || p.flat == nil || !p.flat.same {
		return false
	}
	rec.r, rec.p, rec.id = p.flat, b[5:], id
	fs := p.flat.fields
	if cap(rec.fields) < len(fs) {
		rec.fields = make([]field, len(fs))
	}
	rec.fields = rec.fields[:len(fs)]
	pos := 5
	for i := range fs {
		fd := &rec.fields[i]
		*fd = field{start: int32(pos - 5), branch: -1}
		n, ok := decodeField(fd, b, pos, &fs[i].t)
		if !ok {
			return false
		}
		fd.end = int32(n - 5)
		fd.s -= 5
		pos = n
	}
	return pos == len(b)
}

// decodeField decodes the value of type t at b[i:] into fd: where the
// next value starts.
func decodeField(fd *field, b []byte, i int, t *flatType) (int, bool) {
	if t.k == kUnion {
		n, next, ok := varintAt(b, i)
		if !ok || n < 0 || n >= int64(len(t.branches)) {
			return 0, false
		}
		fd.branch = int8(n)
		return decodeField(fd, b, next, &t.branches[n])
	}
	fd.k = t.k
	switch t.k {
	case kNull:
		return i, true
	case kBool:
		if i >= len(b) {
			return 0, false
		}
		if b[i] != 0 {
			fd.n = 1
		}
		return i + 1, true
	case kInt, kLong, kEnum:
		n, next, ok := varintAt(b, i)
		if !ok || t.k == kEnum && (n < 0 || n >= int64(len(t.symbols))) {
			return 0, false
		}
		fd.n = n
		return next, true
	case kFloat:
		if len(b)-i < 4 {
			return 0, false
		}
		fd.f = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
		return i + 4, !math.IsNaN(fd.f) && !math.IsInf(fd.f, 0)
	case kDouble:
		if len(b)-i < 8 {
			return 0, false
		}
		fd.f = math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
		return i + 8, !math.IsNaN(fd.f) && !math.IsInf(fd.f, 0)
	case kString:
		n, next, ok := varintAt(b, i)
		if !ok || n < 0 || int64(len(b)-next) < n || !utf8.Valid(b[next:next+int(n)]) {
			return 0, false
		}
		fd.n, fd.s = n, int32(next)
		return next + int(n), true
	}
	return 0, false
}

func varintAt(b []byte, i int) (int64, int, bool) {
	if i < len(b) && b[i] < 0x80 { // one byte: most ints, lengths, indexes
		u := uint64(b[i])
		return int64(u>>1) ^ -int64(u&1), i + 1, true
	}
	u, n := binary.Uvarint(b[i:])
	if n <= 0 {
		return 0, 0, false
	}
	return int64(u>>1) ^ -int64(u&1), i + n, true
}

// Value returns field i as the JSON path's expressions see it: the value
// that decoding the JSON text of the field gives (integers as int, other
// numbers as float64, a double with an integral value as int, enums and
// strings as string, null as nil).
func (rec *Record) Value(i int) any {
	fd := &rec.fields[i]
	switch fd.k {
	case kBool:
		return fd.n != 0
	case kInt, kLong:
		return int(fd.n)
	case kDouble:
		// appendFloat writes an integral double below 1e21 without a
		// fraction or exponent, which the JSON path decodes as an int if
		// it fits one: the double itself below 2^53, its shortest decimal
		// (zeros for the last digits) above.
		if fd.f != math.Trunc(fd.f) {
			return fd.f
		}
		if math.Abs(fd.f) < 1<<53 {
			return int(fd.f)
		}
		var buf [32]byte
		return jsonNumber(appendFloat(buf[:0], fd.f))
	case kFloat:
		var buf [32]byte
		return jsonNumber(strconv.AppendFloat(buf[:0], fd.f, 'g', -1, 32))
	case kString:
		return string(rec.p[fd.s : fd.s+int32(fd.n)])
	case kEnum:
		return rec.symbol(i)
	}
	return nil
}

// jsonNumber decodes the JSON number s as the JSON path does.
func jsonNumber(s []byte) any {
	for _, c := range s {
		if c == '.' || c == 'e' || c == 'E' {
			f, _ := strconv.ParseFloat(string(s), 64)
			return f
		}
	}
	if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		return int(n)
	}
	f, _ := strconv.ParseFloat(string(s), 64)
	return f
}

func (rec *Record) symbol(i int) string {
	t, fd := rec.r.fields[i].t, &rec.fields[i]
	if fd.branch >= 0 {
		t = t.branches[fd.branch]
	}
	return t.symbols[fd.n]
}

// appendJSONField appends field i's JSON text, as AppendJSON writes it.
func (rec *Record) appendJSONField(dst []byte, i int) []byte {
	fd := &rec.fields[i]
	out, _, err := decodeValue(dst, rec.p[fd.start:fd.end], rec.r.fields[i].t)
	if err != nil { // Decode decoded it
		panic(err)
	}
	return out
}

// Source says where an output field's value comes from: field Input of
// the input record, value Computed of the caller's, or neither (-1 both):
// the field is not in the output.
type Source struct{ Input, Computed int }

// Shape is how one output schema's fields are written from the records
// of one input schema; build it once per schema id with AvroEncoder.Shape.
type Shape struct {
	fields []shapeField
	toJSON func([]byte, any) ([]byte, error)
}

type shapeField struct {
	src  Source
	copy bool // the input's Avro bytes are the output's
}

// Shape returns how e writes its fields from records shaped like rec, the
// sources of its fields named by src; toJSON writes a computed value as
// the JSON path writes it, for the values encoded through their JSON text.
func (e *AvroEncoder) Shape(rec *Record, src func(name string) Source, toJSON func([]byte, any) ([]byte, error)) *Shape {
	sh := &Shape{toJSON: toJSON}
	for _, f := range e.w.fields {
		s := src(f.name)
		c := s.Input >= 0 && copyable(rec.r.fields[s.Input].t, f.t)
		sh.fields = append(sh.fields, shapeField{src: s, copy: c})
	}
	return sh
}

// copyable says whether a value of Avro type in, written as JSON and
// encoded as type out, gives back its own bytes: the same type, and for a
// union one whose branches no JSON value can confuse (a null and one
// other).
func copyable(in, out flatType) bool {
	if in.k != out.k || in.k == kFloat { // a float's text is read back as a double
		return false
	}
	switch in.k {
	case kEnum:
		return slicesEqual(in.symbols, out.symbols)
	case kUnion:
		if len(in.branches) != 2 || len(out.branches) != 2 {
			return false
		}
		for i := range in.branches {
			if in.branches[i].k == kUnion || !copyable(in.branches[i], out.branches[i]) {
				return false
			}
		}
		return in.branches[0].k == kNull || in.branches[1].k == kNull
	}
	return true
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// AppendShaped appends the wire-format record for topic (which Register
// must have seen) whose fields come from rec and computed as sh says: the
// same bytes Append writes for the JSON object the JSON path would have
// built. A value that does not fit the schema is a *BadDataError
// (avro-encode).
func (e *AvroEncoder) AppendShaped(dst []byte, topic string, rec *Record, sh *Shape, computed []any) ([]byte, error) {
	body, err := e.header(dst, topic)
	if err != nil {
		return dst, err
	}
	out := body
	var scratch [64]byte
	for j, f := range e.w.fields {
		sf := sh.fields[j]
		switch {
		case sf.copy:
			fd := &rec.fields[sf.src.Input]
			out = append(out, rec.p[fd.start:fd.end]...)
		case sf.src.Input >= 0:
			out, err = encodeRaw(out, rec.appendJSONField(scratch[:0], sf.src.Input), f.t)
		case sf.src.Computed >= 0:
			out, err = sh.encodeValue(out, computed[sf.src.Computed], f.t)
		case f.def != nil:
			out = append(out, f.def...)
		default:
			return encoded(dst, out, errMissing(f.name))
		}
		if err != nil {
			return encoded(dst, out, errField(f.name, err))
		}
	}
	return out, nil
}

// encodeValue encodes an expression's result as Avro type t: as
// encodeRaw encodes the JSON text the JSON path writes for it, directly
// for the common pairs.
func (sh *Shape) encodeValue(dst []byte, v any, t flatType) ([]byte, error) {
	switch x := v.(type) {
	case int:
		if t.k == kLong || t.k == kInt && x >= math.MinInt32 && x <= math.MaxInt32 {
			return appendVarint(dst, int64(x)), nil
		}
	case string:
		if t.k == kString && utf8.ValidString(x) {
			return append(appendVarint(dst, int64(len(x))), x...), nil
		}
		if t.k == kEnum {
			for i, sym := range t.symbols {
				if sym == x {
					return appendVarint(dst, int64(i)), nil
				}
			}
		}
	case float64:
		if t.k == kDouble && !math.IsNaN(x) && !math.IsInf(x, 0) {
			return binary.LittleEndian.AppendUint64(dst, math.Float64bits(x)), nil
		}
	case bool:
		if t.k == kBool {
			if x {
				return append(dst, 1), nil
			}
			return append(dst, 0), nil
		}
	}
	var scratch [64]byte
	raw, err := sh.toJSON(scratch[:0], v)
	if err != nil {
		return dst, err
	}
	return encodeRaw(dst, raw, t)
}
