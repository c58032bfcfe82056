package wireformat

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A flat message is what most topic schemas are: singular scalars, strings,
// bytes and enums, no nested message, repeated field, map or oneof (proto3
// optional fields are fine). Those are read here with a protowire walk,
// straight into the JSON, with the same result as dynamicpb and
// appendMessageJSON give (which read everything else): each field's last
// occurrence wins, a field of an unknown number or of the wrong wire type
// is skipped (dynamicpb keeps it as an unknown field, which the JSON does
// not show), a proto3 string must be valid UTF-8.

// protoFlat is a plan for decoding one flat message type.
type protoFlat struct {
	fields []flatProtoField
	byNum  map[protowire.Number]int // field number -> index in fields
	// vals and set hold the last record's values, per field.
	vals []protoRaw
	set  []bool
	// keys and spans are where the last JSON's fields are (Fields).
	keys  []string
	spans [][2]int
}

type flatProtoField struct {
	fd       protoreflect.FieldDescriptor
	key      []byte // `"name":`
	wire     protowire.Type
	nullable bool // proto3 optional: null when absent
	utf8     bool // a proto3 string: checked
}

// protoRaw is one field's value as the wire has it.
type protoRaw struct {
	n uint64
	b []byte
}

// newProtoFlat returns md's plan, or nil if md is not flat.
func newProtoFlat(md protoreflect.MessageDescriptor) *protoFlat {
	fs := md.Fields()
	p := &protoFlat{byNum: map[protowire.Number]int{}}
	for i := 0; i < fs.Len(); i++ {
		fd := fs.Get(i)
		if fd.IsList() || fd.IsMap() || fd.Message() != nil || fd.ContainingOneof() != nil && !fd.ContainingOneof().IsSynthetic() ||
			fd.Enum() != nil && fd.Enum().IsClosed() { // dynamicpb keeps a closed enum's unknown number as an unknown field
			return nil
		}
		f := flatProtoField{fd: fd, key: append(appendJSONString(nil, string(fd.Name())), ':'), wire: wireType(fd.Kind()),
			nullable: fd.HasPresence() && fd.Syntax() == protoreflect.Proto3, utf8: fd.Kind() == protoreflect.StringKind && fd.Syntax() == protoreflect.Proto3}
		p.byNum[fd.Number()] = len(p.fields)
		p.fields = append(p.fields, f)
		p.keys = append(p.keys, string(fd.Name()))
	}
	p.vals, p.set, p.spans = make([]protoRaw, len(p.fields)), make([]bool, len(p.fields)), make([][2]int, len(p.fields))
	return p
}

func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}

// appendJSON decodes the message b and appends it to dst as JSON.
func (p *protoFlat) appendJSON(dst, b []byte) ([]byte, error) {
	clear(p.set)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return dst, protowire.ParseError(n)
		}
		b = b[n:]
		i, known := p.byNum[num]
		if !known || p.fields[i].wire != typ {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return dst, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		var v protoRaw
		switch typ {
		case protowire.VarintType:
			v.n, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v.n = uint64(x)
		case protowire.Fixed64Type:
			v.n, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			v.b, n = protowire.ConsumeBytes(b)
		}
		if n < 0 {
			return dst, protowire.ParseError(n)
		}
		b = b[n:]
		if p.fields[i].utf8 && !utf8.Valid(v.b) {
			return dst, fmt.Errorf("field %s: a string that is not valid UTF-8", p.fields[i].fd.Name())
		}
		p.vals[i], p.set[i] = v, true
	}
	base := len(dst)
	dst = append(dst, '{')
	for i := range p.fields {
		f := &p.fields[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, f.key...)
		start := len(dst) - base
		switch {
		case p.set[i]:
			dst = appendFlatValue(dst, f.fd, p.vals[i])
		case f.nullable:
			dst = append(dst, "null"...)
		default:
			dst = appendValueJSON(dst, f.fd, f.fd.Default())
		}
		p.spans[i] = [2]int{start, len(dst) - base}
	}
	return append(dst, '}'), nil
}

// appendFlatValue appends the JSON of field fd's wire value v, as
// appendValueJSON does for the value dynamicpb makes of it.
func appendFlatValue(dst []byte, fd protoreflect.FieldDescriptor, v protoRaw) []byte {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(dst, v.n != 0)
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(dst, int64(int32(v.n)), 10)
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(dst, int64(v.n), 10)
	case protoreflect.Sint32Kind:
		return strconv.AppendInt(dst, int64(int32(protowire.DecodeZigZag(v.n&math.MaxUint32))), 10)
	case protoreflect.Sint64Kind:
		return strconv.AppendInt(dst, protowire.DecodeZigZag(v.n), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(dst, uint64(uint32(v.n)), 10)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(dst, v.n, 10)
	case protoreflect.FloatKind:
		return appendValueJSON(dst, fd, protoreflect.ValueOfFloat32(math.Float32frombits(uint32(v.n))))
	case protoreflect.DoubleKind:
		return appendValueJSON(dst, fd, protoreflect.ValueOfFloat64(math.Float64frombits(v.n)))
	case protoreflect.StringKind:
		return appendJSONBytes(dst, v.b)
	case protoreflect.BytesKind:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.b)
		return append(dst, '"')
	case protoreflect.EnumKind:
		return appendValueJSON(dst, fd, protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(v.n))))
	}
	return append(dst, "null"...)
}
