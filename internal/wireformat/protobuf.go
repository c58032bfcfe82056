package wireformat

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Protobuf in the Confluent wire format: the magic byte, the schema id,
// then the message-index list (zigzag varints: a count and the indexes of
// the message type in the file, nested types after their parents; a lone
// 0 byte is the first message), then the message. Schemas are .proto text,
// compiled at run time with protocompile (google/protobuf's standard
// imports are built in; a registry schema's references are fetched too).
//
// A decoded message is the JSON object the expressions see (a flat
// message through protobuf_flat.go's protowire walk, any other through
// dynamicpb): fields by
// their .proto names, integers (int64 too) as JSON integers, floats as
// numbers (NaN and infinities as the strings protojson writes), bools,
// strings, bytes as base64 strings, enums by name (a number the enum does
// not name as that number), nested messages as objects (absent ones as
// null), repeated fields as arrays, maps as objects, a oneof as its set
// field only. Scalars without presence that are absent show their default
// (0, "", false, the first enum value), so "amount > 0" works on proto3;
// a proto3 optional field that is absent is null.
//
// Encoding takes each field of the output message from the output's field
// of the same name (fields the message lacks are left out, as with Avro; a
// field absent or null is not written, its default on the reader's side);
// a value of the wrong JSON type, out of range, or an enum name the enum
// lacks is bad data (protobuf-encode).

// protoSchema is a compiled .proto file and the message type chosen in it.
type protoSchema struct {
	text    string
	file    protoreflect.FileDescriptor
	msg     protoreflect.MessageDescriptor
	index   []int    // msg's message-index list in file
	imports []string // imports other than google/protobuf's
}

type protobufFormat struct{}

func init() { register(Protobuf, protobufFormat{}) }

func (protobufFormat) SchemaExt() string { return ".proto" }

// Parse compiles the .proto file at path (its text given; imports are
// read relative to its directory) and picks message ("" the first; a
// name, a full name, or Outer.Inner for a nested one).
func (protobufFormat) Parse(path string, text []byte, message string) (Schema, error) {
	dir, name := filepath.Dir(path), filepath.Base(path)
	fd, err := compileProto(name, func(p string) (io.ReadCloser, error) {
		if p == name {
			return io.NopCloser(bytes.NewReader(text)), nil
		}
		return os.Open(filepath.Join(dir, p))
	})
	if err != nil {
		return nil, err
	}
	return newProtoSchema(string(text), fd, message)
}

// ParseProto is Parse for a .proto text without imports of its own, for
// callers outside the topologies (tests, judges).
func ParseProto(text, message string) (Schema, error) {
	return protobufFormat{}.Parse("schema.proto", []byte(text), message)
}

// ProtoMessage returns the message type a protobuf schema chose.
func ProtoMessage(s Schema) protoreflect.MessageDescriptor { return s.(*protoSchema).msg }

func newProtoSchema(text string, fd protoreflect.FileDescriptor, message string) (*protoSchema, error) {
	s := &protoSchema{text: text, file: fd}
	for i := 0; i < fd.Imports().Len(); i++ {
		if p := fd.Imports().Get(i).Path(); !strings.HasPrefix(p, "google/protobuf/") {
			s.imports = append(s.imports, p)
		}
	}
	if fd.Messages().Len() == 0 {
		return nil, fmt.Errorf("the file declares no message")
	}
	if message == "" {
		s.msg, s.index = fd.Messages().Get(0), []int{0}
		return s, nil
	}
	s.msg, s.index = findMessage(fd.Messages(), string(fd.Package()), message, nil)
	if s.msg == nil {
		return nil, fmt.Errorf("no message %q in the file (it has %s)", message, messageNames(fd.Messages()))
	}
	return s, nil
}

// findMessage finds the message called name (short, full, or dotted from
// the package) among ms and their nested messages, with its index list.
func findMessage(ms protoreflect.MessageDescriptors, pkg, name string, path []int) (protoreflect.MessageDescriptor, []int) {
	for i := 0; i < ms.Len(); i++ {
		m := ms.Get(i)
		full := string(m.FullName())
		rel := strings.TrimPrefix(full, pkg+".")
		p := append(append([]int(nil), path...), i)
		if string(m.Name()) == name || full == name || rel == name {
			return m, p
		}
		if found, fp := findMessage(m.Messages(), pkg, name, p); found != nil {
			return found, fp
		}
	}
	return nil, nil
}

func messageNames(ms protoreflect.MessageDescriptors) string {
	var names []string
	for i := 0; i < ms.Len(); i++ {
		names = append(names, string(ms.Get(i).Name()))
	}
	return strings.Join(names, ", ")
}

// messageAt returns the message the index list names in fd.
func messageAt(fd protoreflect.FileDescriptor, index []int) (protoreflect.MessageDescriptor, error) {
	ms := fd.Messages()
	var m protoreflect.MessageDescriptor
	for _, i := range index {
		if i < 0 || i >= ms.Len() {
			return nil, fmt.Errorf("message index %v: the schema has no such message", index)
		}
		m = ms.Get(i)
		ms = m.Messages()
	}
	if m == nil {
		return nil, fmt.Errorf("an empty message index list")
	}
	return m, nil
}

// compileProto compiles the file name, reading it and its imports through
// open; google/protobuf's standard imports are built in.
func compileProto(name string, open func(string) (io.ReadCloser, error)) (protoreflect.FileDescriptor, error) {
	c := protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(&protocompile.SourceResolver{Accessor: open}),
		MaxParallelism: 1,
	}
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		return nil, fmt.Errorf("not a .proto file protocompile accepts: %w", err)
	}
	return files[0], nil
}

func (protobufFormat) NewDecoder(cl *sr.Client, reader Schema, warn func(string, ...any)) (Decoder, error) {
	d := &protoDecoder{cl: cl, warn: warn, plans: map[uint32]*protoPlan{}}
	if reader != nil {
		d.reader = reader.(*protoSchema)
	}
	return d, nil
}

func (protobufFormat) NewEncoder(s Schema) (Encoder, error) {
	ps := s.(*protoSchema)
	hdr, _ := (&sr.ConfluentHeader{}).AppendEncode(nil, 0, ps.index)
	return &protoEncoder{schema: ps, index: hdr[5:], ids: map[string]uint32{}}, nil
}

// protoDecoder decodes wire-format protobuf records: see NewDecoder.
type protoDecoder struct {
	cl     *sr.Client
	reader *protoSchema
	warn   func(string, ...any)
	plans  map[uint32]*protoPlan
	keys   []string // Fields
	spans  [][2]int
	// generic makes every message go through dynamicpb (tests compare the
	// flat path with it).
	generic bool
}

// protoPlan is a writer schema: its file, and the message type each index
// list read so far resolves to (the reader's, with a reader schema).
type protoPlan struct {
	file  protoreflect.FileDescriptor
	first *protoMsg // index [0]
	msgs  map[string]*protoMsg
	err   error
}

// protoMsg is a message type to decode, with its flat plan if it is flat.
type protoMsg struct {
	md   protoreflect.MessageDescriptor
	flat *protoFlat
}

func (d *protoDecoder) Fields() ([]string, [][2]int) { return d.keys, d.spans }

func (d *protoDecoder) AppendJSON(ctx context.Context, dst, b []byte) ([]byte, error) {
	id, payload, err := splitHeader(b)
	if err != nil {
		return dst, err
	}
	index, body := []int(nil), payload
	if len(payload) > 0 && payload[0] == 0 {
		body = payload[1:] // the first message: spares DecodeIndex's slice
	} else if index, body, err = (&sr.ConfluentHeader{}).DecodeIndex(payload, 64); err != nil {
		return dst, bad("wire-format", "schema id %d: the message-index list does not decode: %v", id, err)
	}
	p, err := cachedPlan(ctx, d.plans, id, d.newPlan)
	if err != nil {
		return dst, err
	}
	if p.err != nil {
		return dst, bad("protobuf-decode", "schema id %d: %v", id, p.err)
	}
	pm := p.first
	if index != nil && (len(index) != 1 || index[0] != 0) {
		key := fmt.Sprint(index)
		var ok bool
		if pm, ok = p.msgs[key]; !ok {
			md, err := d.message(p.file, index)
			if err != nil {
				return dst, bad("protobuf-decode", "schema id %d: %v", id, err)
			}
			pm = &protoMsg{md: md, flat: newProtoFlat(md)}
			p.msgs[key] = pm
		}
	}
	d.keys, d.spans = nil, nil
	if pm.flat != nil && !d.generic {
		base := len(dst)
		out, err := pm.flat.appendJSON(dst, body)
		if err != nil {
			return dst, bad("protobuf-decode", "schema id %d, message %s: %v", id, pm.md.FullName(), err)
		}
		if base == 0 { // spans are relative to dst's start
			d.keys, d.spans = pm.flat.keys, pm.flat.spans
		}
		return out, nil
	}
	m := dynamicpb.NewMessage(pm.md)
	if err := proto.Unmarshal(body, m); err != nil {
		return dst, bad("protobuf-decode", "schema id %d, message %s: %v", id, pm.md.FullName(), err)
	}
	return appendMessageJSON(dst, m), nil
}

// message returns the message type the index list names in the writer's
// file, or the reader schema's message of the same full name (its chosen
// message if it has none of that name).
func (d *protoDecoder) message(fd protoreflect.FileDescriptor, index []int) (protoreflect.MessageDescriptor, error) {
	w, err := messageAt(fd, index)
	if err != nil || d.reader == nil {
		return w, err
	}
	if r, _ := findMessage(d.reader.file.Messages(), "", string(w.FullName()), nil); r != nil {
		return r, nil
	}
	return d.reader.msg, nil
}

func (d *protoDecoder) newPlan(ctx context.Context, id uint32) (*protoPlan, error) {
	s, err := fetch(ctx, d.cl, int(id), d.warn)
	if err != nil {
		return nil, err
	}
	if s.Type != sr.TypeProtobuf {
		return &protoPlan{err: fmt.Errorf("a %s schema, not protobuf", s.Type)}, nil
	}
	srcs := map[string]string{}
	if err := d.references(ctx, s.References, srcs); err != nil {
		if errors.Is(err, eos.ErrUnreachable) {
			return nil, err
		}
		return &protoPlan{err: err}, nil
	}
	name := fmt.Sprintf("schema-id-%d.proto", id)
	srcs[name] = s.Schema
	fd, err := compileProto(name, protocompile.SourceAccessorFromMap(srcs))
	if err != nil {
		return &protoPlan{err: fmt.Errorf("the registry's schema: %v", err)}, nil
	}
	p := &protoPlan{file: fd, msgs: map[string]*protoMsg{}}
	md, err := d.message(fd, []int{0})
	if err != nil {
		return &protoPlan{err: err}, nil
	}
	p.first = &protoMsg{md: md, flat: newProtoFlat(md)}
	return p, nil
}

// references fetches a registry schema's references (and theirs) into
// srcs by their import names, retrying while the registry is down.
func (d *protoDecoder) references(ctx context.Context, refs []sr.SchemaReference, srcs map[string]string) error {
	for _, ref := range refs {
		if _, ok := srcs[ref.Name]; ok {
			continue
		}
		var ss sr.SubjectSchema
		err := retry(ctx, d.warn, "fetching reference "+ref.Name, func() error {
			var err error
			ss, err = d.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
			return err
		})
		if err != nil {
			return err
		}
		srcs[ref.Name] = ss.Schema.Schema
		if err := d.references(ctx, ss.References, srcs); err != nil {
			return err
		}
	}
	return nil
}

// retry calls f until it succeeds, the registry answers with an error
// (returned as is), or ctx ends (an unreachable error).
func retry(ctx context.Context, warn func(string, ...any), what string, f func() error) error {
	for attempt := 0; ; attempt++ {
		err := f()
		var re *sr.ResponseError
		if err == nil || errors.As(err, &re) {
			if err != nil {
				return fmt.Errorf("%s: %v", what, err)
			}
			return nil
		}
		if attempt%10 == 0 && warn != nil {
			warn("schema registry: %s failed, retrying: %v", what, err)
		}
		select {
		case <-ctx.Done():
			return unreachable("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(retryBackoff):
		}
	}
}

// appendMessageJSON appends m as the JSON object the package comment
// describes.
func appendMessageJSON(dst []byte, m protoreflect.Message) []byte {
	fields := m.Descriptor().Fields()
	dst = append(dst, '{')
	n := 0
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && !m.Has(fd) {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = appendJSONString(dst, string(fd.Name()))
		dst = append(dst, ':')
		switch {
		case fd.IsMap():
			dst = append(dst, '{')
			j := 0
			m.Get(fd).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				if j > 0 {
					dst = append(dst, ',')
				}
				j++
				dst = appendJSONString(dst, k.String())
				dst = append(dst, ':')
				dst = appendValueJSON(dst, fd.MapValue(), v)
				return true
			})
			dst = append(dst, '}')
		case fd.IsList():
			l := m.Get(fd).List()
			dst = append(dst, '[')
			for j := 0; j < l.Len(); j++ {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = appendValueJSON(dst, fd, l.Get(j))
			}
			dst = append(dst, ']')
		case fd.HasPresence() && !m.Has(fd) && (fd.Message() != nil || fd.HasOptionalKeyword() && fd.Syntax() == protoreflect.Proto3):
			dst = append(dst, "null"...)
		default:
			dst = appendValueJSON(dst, fd, m.Get(fd))
		}
	}
	return append(dst, '}')
}

// appendValueJSON appends one value of field fd (an element, for lists).
func appendValueJSON(dst []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(dst, v.Bool())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(dst, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(dst, v.Uint(), 10)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f := v.Float()
		switch {
		case math.IsNaN(f):
			return append(dst, `"NaN"`...)
		case math.IsInf(f, 1):
			return append(dst, `"Infinity"`...)
		case math.IsInf(f, -1):
			return append(dst, `"-Infinity"`...)
		}
		if fd.Kind() == protoreflect.FloatKind {
			f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64) // 1.1, not 1.100000023841858
		}
		return appendFloat(dst, f)
	case protoreflect.StringKind:
		return appendJSONString(dst, v.String())
	case protoreflect.BytesKind:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
		return append(dst, '"')
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return appendJSONString(dst, string(ev.Name()))
		}
		return strconv.AppendInt(dst, int64(v.Enum()), 10)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return appendMessageJSON(dst, v.Message())
	}
	return append(dst, "null"...)
}

// protoEncoder writes JSON objects as wire-format records of one message
// type: see NewEncoder.
type protoEncoder struct {
	schema *protoSchema
	index  []byte // the message-index list, encoded
	ids    map[string]uint32
	p      fastjson.Parser
}

type jsonValue = fastjson.Value

func (e *protoEncoder) Register(ctx context.Context, cl *sr.Client, topic string) error {
	if len(e.schema.imports) > 0 {
		return eos.BadConfig("output_schema", "imports %s: an output schema may import only google/protobuf's files (registering references is not supported yet)", strings.Join(e.schema.imports, ", "))
	}
	subject := Subject(topic)
	schema := sr.Schema{Schema: e.schema.text, Type: sr.TypeProtobuf}
	latest, found, err := latestSchema(ctx, cl, subject)
	if err != nil {
		return err
	}
	if found {
		if latest.Type == sr.TypeProtobuf && len(latest.References) == 0 {
			if old, perr := ParseProto(latest.Schema.Schema, ""); perr == nil {
				if why := protoIncompatible(e.schema.msg, old.(*protoSchema)); why != "" {
					return eos.BadConfig("output_schema", "not compatible with subject %s (version %d): %s", subject, latest.Version, why)
				}
			}
		}
		if why := registryIncompatible(ctx, cl, subject, schema); why != "" {
			return eos.BadConfig("output_schema", "the registry finds it not compatible with subject %s (version %d): %s", subject, latest.Version, why)
		}
	}
	id, err := createSchema(ctx, cl, subject, schema)
	if err != nil {
		return err
	}
	e.ids[topic] = id
	return nil
}

// protoIncompatible says why records written with old's message of the
// same full name (else its first) cannot be read as m, naming the field,
// or "" if they can as far as field numbers and types go.
func protoIncompatible(m protoreflect.MessageDescriptor, old *protoSchema) string {
	om, _ := findMessage(old.file.Messages(), "", string(m.FullName()), nil)
	if om == nil {
		om = old.msg
	}
	for i := 0; i < m.Fields().Len(); i++ {
		f := m.Fields().Get(i)
		if g := om.Fields().ByName(f.Name()); g != nil && g.Number() != f.Number() {
			return fmt.Sprintf("field %q has number %d, was %d", f.Name(), f.Number(), g.Number())
		}
		g := om.Fields().ByNumber(f.Number())
		if g == nil {
			continue
		}
		if wireClass(f) != wireClass(g) || f.IsList() != g.IsList() && !(f.IsList() && wireClass(f) != "bytes") {
			was := describeField(g)
			if g.Name() != f.Name() {
				was += fmt.Sprintf(" (field %q)", g.Name())
			}
			return fmt.Sprintf("field %q (number %d) is %s, was %s", f.Name(), f.Number(), describeField(f), was)
		}
	}
	return ""
}

// wireClass groups the field kinds whose values read as one another.
func wireClass(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.BoolKind, protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.EnumKind:
		return "varint"
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return "zigzag"
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		return "fixed32"
	case protoreflect.FloatKind:
		return "float"
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		return "fixed64"
	case protoreflect.DoubleKind:
		return "double"
	case protoreflect.StringKind, protoreflect.BytesKind:
		return "bytes"
	}
	if f.Message() != nil {
		return "message " + string(f.Message().FullName())
	}
	return f.Kind().String()
}

func describeField(f protoreflect.FieldDescriptor) string {
	s := f.Kind().String()
	if f.Message() != nil {
		s = string(f.Message().FullName())
	}
	if f.IsList() {
		return "repeated " + s
	}
	return s
}

func (e *protoEncoder) header(dst []byte, topic string) ([]byte, error) {
	dst, err := appendHeader(dst, e.ids, topic)
	if err != nil {
		return dst, err
	}
	return append(dst, e.index...), nil
}

func (e *protoEncoder) Append(dst []byte, topic string, js []byte) ([]byte, error) {
	body, err := e.header(dst, topic)
	if err != nil {
		return dst, err
	}
	v, err := e.p.ParseBytes(js)
	if err != nil {
		return dst, bad("protobuf-encode", "the output is not JSON: %v", err)
	}
	obj, err := v.Object()
	if err != nil {
		return dst, bad("protobuf-encode", "the output is not a JSON object")
	}
	out, err := appendMessageFields(body, e.schema.msg, func(name string) *jsonValue { return obj.Get(name) })
	return protoEncoded(dst, out, err)
}

func (e *protoEncoder) AppendFields(dst []byte, topic string, get func(name string) ([]byte, bool)) ([]byte, error) {
	body, err := e.header(dst, topic)
	if err != nil {
		return dst, err
	}
	var perr error
	out, err := appendMessageFields(body, e.schema.msg, func(name string) *jsonValue {
		raw, ok := get(name)
		if !ok || perr != nil {
			return nil
		}
		v, err := e.p.ParseBytes(raw) // valid until the next field's
		if err != nil {
			perr = err
		}
		return v
	})
	if perr != nil {
		err = perr
	}
	return protoEncoded(dst, out, err)
}

func protoEncoded(dst, out []byte, err error) ([]byte, error) {
	if err != nil {
		return dst, bad("protobuf-encode", "%v", err)
	}
	return out, nil
}

// appendMessageFields appends the fields of message md that get finds
// (nil or JSON null: not written).
func appendMessageFields(dst []byte, md protoreflect.MessageDescriptor, get func(string) *jsonValue) ([]byte, error) {
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		v := get(string(fd.Name()))
		if v == nil || v.Type() == fastjson.TypeNull {
			if fd.Cardinality() == protoreflect.Required {
				return dst, fmt.Errorf("field %q is required and not in the output", fd.Name())
			}
			continue
		}
		var err error
		if dst, err = appendField(dst, fd, v); err != nil {
			return dst, fmt.Errorf("field %q: %w", fd.Name(), err)
		}
	}
	return dst, nil
}

func appendField(dst []byte, fd protoreflect.FieldDescriptor, v *jsonValue) ([]byte, error) {
	switch {
	case fd.IsMap():
		obj, err := v.Object()
		if err != nil {
			return dst, fmt.Errorf("%s is not a JSON object (a map)", v)
		}
		var ferr error
		obj.Visit(func(k []byte, val *jsonValue) {
			if ferr != nil {
				return
			}
			var entry []byte
			var kv *jsonValue
			if fd.MapKey().Kind() == protoreflect.StringKind {
				kv = (&fastjson.Arena{}).NewStringBytes(k)
			} else if kv, ferr = fastjson.ParseBytes(k); ferr != nil { // map<int64, ...>: the JSON key is the number
				ferr = fmt.Errorf("key %q: %w", k, ferr)
				return
			}
			if entry, ferr = appendSingular(entry, fd.MapKey(), kv); ferr != nil {
				ferr = fmt.Errorf("key %q: %w", k, ferr)
				return
			}
			if entry, ferr = appendSingular(entry, fd.MapValue(), val); ferr != nil {
				ferr = fmt.Errorf("key %q: %w", k, ferr)
				return
			}
			dst = protowire.AppendTag(dst, fd.Number(), protowire.BytesType)
			dst = protowire.AppendBytes(dst, entry)
		})
		return dst, ferr
	case fd.IsList():
		arr, err := v.Array()
		if err != nil {
			return dst, fmt.Errorf("%s is not a JSON array (a repeated field)", v)
		}
		for i, x := range arr {
			if dst, err = appendSingular(dst, fd, x); err != nil {
				return dst, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return dst, nil
	}
	return appendSingular(dst, fd, v)
}

// appendSingular appends one value of fd with its tag.
func appendSingular(dst []byte, fd protoreflect.FieldDescriptor, v *jsonValue) ([]byte, error) {
	num := fd.Number()
	switch k := fd.Kind(); k {
	case protoreflect.BoolKind:
		b, err := v.Bool()
		if err != nil {
			return dst, fmt.Errorf("%s is not a boolean", v)
		}
		return protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), protowire.EncodeBool(b)), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := jsonInt(v)
		if err != nil {
			return dst, err
		}
		if (k == protoreflect.Int32Kind || k == protoreflect.Sint32Kind || k == protoreflect.Sfixed32Kind) && (n < math.MinInt32 || n > math.MaxInt32) {
			return dst, fmt.Errorf("%d does not fit a %s", n, k)
		}
		switch k {
		case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
			return protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), protowire.EncodeZigZag(n)), nil
		case protoreflect.Sfixed32Kind:
			return protowire.AppendFixed32(protowire.AppendTag(dst, num, protowire.Fixed32Type), uint32(n)), nil
		case protoreflect.Sfixed64Kind:
			return protowire.AppendFixed64(protowire.AppendTag(dst, num, protowire.Fixed64Type), uint64(n)), nil
		}
		return protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), uint64(n)), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := v.Uint64()
		if err != nil {
			var i int64
			if i, err = jsonInt(v); err != nil {
				return dst, err
			}
			if i < 0 {
				return dst, fmt.Errorf("%d does not fit a %s", i, k)
			}
			n = uint64(i)
		}
		if (k == protoreflect.Uint32Kind || k == protoreflect.Fixed32Kind) && n > math.MaxUint32 {
			return dst, fmt.Errorf("%d does not fit a %s", n, k)
		}
		switch k {
		case protoreflect.Fixed32Kind:
			return protowire.AppendFixed32(protowire.AppendTag(dst, num, protowire.Fixed32Type), uint32(n)), nil
		case protoreflect.Fixed64Kind:
			return protowire.AppendFixed64(protowire.AppendTag(dst, num, protowire.Fixed64Type), uint64(n)), nil
		}
		return protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), uint64(n)), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f, err := v.Float64()
		if err != nil {
			return dst, fmt.Errorf("%s is not a number", v)
		}
		if k == protoreflect.FloatKind {
			return protowire.AppendFixed32(protowire.AppendTag(dst, num, protowire.Fixed32Type), math.Float32bits(float32(f))), nil
		}
		return protowire.AppendFixed64(protowire.AppendTag(dst, num, protowire.Fixed64Type), math.Float64bits(f)), nil
	case protoreflect.StringKind:
		s, err := v.StringBytes()
		if err != nil {
			return dst, fmt.Errorf("%s is not a string", v)
		}
		return protowire.AppendBytes(protowire.AppendTag(dst, num, protowire.BytesType), s), nil
	case protoreflect.BytesKind:
		s, err := v.StringBytes()
		if err != nil {
			return dst, fmt.Errorf("%s is not a base64 string", v)
		}
		b, err := base64.StdEncoding.DecodeString(string(s))
		if err != nil {
			if b, err = base64.URLEncoding.DecodeString(string(s)); err != nil {
				return dst, fmt.Errorf("%q is not base64", s)
			}
		}
		return protowire.AppendBytes(protowire.AppendTag(dst, num, protowire.BytesType), b), nil
	case protoreflect.EnumKind:
		var n int64
		if s, err := v.StringBytes(); err == nil {
			ev := fd.Enum().Values().ByName(protoreflect.Name(s))
			if ev == nil {
				return dst, fmt.Errorf("%q is not a value of enum %s", s, fd.Enum().FullName())
			}
			n = int64(ev.Number())
		} else if n, err = jsonInt(v); err != nil || n < math.MinInt32 || n > math.MaxInt32 {
			return dst, fmt.Errorf("%s is not a value of enum %s", v, fd.Enum().FullName())
		}
		return protowire.AppendVarint(protowire.AppendTag(dst, num, protowire.VarintType), uint64(n)), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		obj, err := v.Object()
		if err != nil {
			return dst, fmt.Errorf("%s is not a JSON object (message %s)", v, fd.Message().FullName())
		}
		body, err := appendMessageFields(nil, fd.Message(), func(name string) *jsonValue { return obj.Get(name) })
		if err != nil {
			return dst, err
		}
		return protowire.AppendBytes(protowire.AppendTag(dst, num, protowire.BytesType), body), nil
	}
	return dst, fmt.Errorf("kind %s is not supported", fd.Kind())
}

// jsonInt reads an integral JSON number (12, -3, 12.0, 1e3).
func jsonInt(v *jsonValue) (int64, error) {
	if n, err := v.Int64(); err == nil {
		return n, nil
	}
	f, err := v.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("%s is not an integer", v)
	}
	return int64(f), nil
}
