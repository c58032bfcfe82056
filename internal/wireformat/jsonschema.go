package wireformat

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/eosctl/eos"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/valyala/fastjson"
)

// JSON Schema in the Confluent wire format: the magic byte, the 4-byte
// schema id, then the JSON document itself. Nothing is transcoded: a record
// is checked against its writer schema (JSON Schema, validated by
// santhosh-tekuri/jsonschema) and its JSON handed on as it is; an output is
// checked against the output schema and written after the header.
//
// Schemas without $schema are read as draft-07, the draft Confluent's JSON
// Schema serdes default to (format is then asserted too). A schema's $ref
// may point inside it only: nothing is loaded from files or the network, so
// a registry schema with references to others does not compile, and its
// records are bad data.

// JSONSchemaDef is a compiled JSON Schema.
type JSONSchemaDef struct {
	text string
	s    *jsonschema.Schema
	fast *fastPlan // nil: the validator judges every document
}

// CompileJSONSchema compiles a JSON Schema's text; loc names it in errors.
func CompileJSONSchema(loc, text string) (*JSONSchemaDef, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(nil) // no files, no network: a schema stands alone
	u := "eos:///" + url.PathEscape(loc)
	if err := c.AddResource(u, doc); err != nil {
		return nil, oneLine(err)
	}
	s, err := c.Compile(u)
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", firstError(se.Err))
	}
	if err != nil {
		return nil, oneLine(err)
	}
	return &JSONSchemaDef{text: text, s: s, fast: newFastPlan(s)}, nil
}

// validate parses the JSON document js and checks it against s; the error
// is one line: the validator's first error, by instance location.
func (s *JSONSchemaDef) validate(p *fastjson.Parser, js []byte) error {
	v, err := p.ParseBytes(js)
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if s.fast != nil && s.fast.valid(v) {
		return nil
	}
	if err := s.s.Validate(value(v)); err != nil {
		return firstError(err)
	}
	return nil
}

// value converts a parsed JSON value to what the validator takes (numbers
// as json.Number, exact), without encoding/json's reflection.
func value(v *fastjson.Value) any {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		m := make(map[string]any, o.Len())
		o.Visit(func(k []byte, x *fastjson.Value) { m[string(k)] = value(x) })
		return m
	case fastjson.TypeArray:
		a, _ := v.Array()
		out := make([]any, len(a))
		for i, x := range a {
			out[i] = value(x)
		}
		return out
	case fastjson.TypeString:
		b, _ := v.StringBytes()
		return string(b)
	case fastjson.TypeNumber:
		return json.Number(v.MarshalTo(nil))
	case fastjson.TypeTrue:
		return true
	case fastjson.TypeFalse:
		return false
	}
	return nil
}

// firstError reduces a validation error (a tree of causes) to one line:
// its first leaf by instance location (the validator walks objects in map
// order, so "first" is made deterministic here; at one location, the
// schema's order), and how many more.
func firstError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return oneLine(err)
	}
	var leaves []*jsonschema.ValidationError
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	msg := func(e *jsonschema.ValidationError) string { return strings.Join(strings.Fields(e.Error()), " ") }
	slices.SortStableFunc(leaves, func(a, b *jsonschema.ValidationError) int {
		return slices.Compare(a.InstanceLocation, b.InstanceLocation)
	})
	if len(leaves) == 0 {
		return oneLine(err)
	}
	s := msg(leaves[0])
	if n := len(leaves) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return errors.New(s)
}

func oneLine(err error) error { return errors.New(strings.Join(strings.Fields(err.Error()), " ")) }

// JSONDecoder checks Confluent wire-format JSON Schema records against
// their writer schemas, each fetched once by id and compiled once. It is
// not safe for concurrent use: each worker has its own.
type JSONDecoder struct {
	cl      *sr.Client
	warn    func(string, ...any)
	schemas map[uint32]*jsonPlan
	p       fastjson.Parser
}

type jsonPlan struct {
	s   *JSONSchemaDef
	err error // the writer schema cannot be used: every record is bad
}

// NewJSONDecoder reads records with the registry cl; warn receives the
// registry's failures while they are retried.
func NewJSONDecoder(cl *sr.Client, warn func(string, ...any)) *JSONDecoder {
	return &JSONDecoder{cl: cl, warn: warn, schemas: map[uint32]*jsonPlan{}}
}

// Payload returns the JSON document of the wire-format record b (a slice of
// b, not a copy) once it is valid against its writer schema. Errors are a
// *BadDataError (wire-format, json-schema-invalid, unknown-schema-id), or
// (the registry unreachable until ctx ended) wrap eos.ErrUnreachable.
func (d *JSONDecoder) Payload(ctx context.Context, b []byte) ([]byte, error) {
	id, payload, err := splitHeader(b)
	if err != nil {
		return nil, err
	}
	p, ok := d.schemas[id]
	if !ok {
		s, err := fetch(ctx, d.cl, int(id), d.warn)
		if err != nil {
			return nil, err
		}
		p = &jsonPlan{}
		if s.Type != sr.TypeJSON {
			p.err = fmt.Errorf("a %s schema, not JSON", s.Type)
		} else if p.s, p.err = CompileJSONSchema(fmt.Sprintf("schema-%d", id), s.Schema); p.err != nil {
			p.err = fmt.Errorf("the registry's schema does not compile: %v", p.err)
		}
		d.schemas[id] = p
	}
	if p.err != nil {
		return nil, bad("json-schema-invalid", "schema id %d: %v", id, p.err)
	}
	if err := p.s.validate(&d.p, payload); err != nil {
		return nil, bad("json-schema-invalid", "schema id %d: %v", id, err)
	}
	return payload, nil
}

// AppendJSON implements Decoder: the record's JSON, validated, appended
// to dst as it is.
func (d *JSONDecoder) AppendJSON(ctx context.Context, dst, b []byte) ([]byte, error) {
	js, err := d.Payload(ctx, b)
	if err != nil {
		return dst, err
	}
	return append(dst, js...), nil
}

// Fields implements Decoder: the JSON is not split here (the topology
// parses it).
func (d *JSONDecoder) Fields() ([]string, [][2]int) { return nil, nil }

// JSONEncoder writes JSON documents valid against one output schema as
// Confluent wire-format records, the schema registered under each output
// topic's subject (TopicNameStrategy: TOPIC-value).
type JSONEncoder struct {
	schema *JSONSchemaDef
	ids    map[string]uint32
	p      fastjson.Parser
}

// NewJSONEncoder takes the compiled output schema.
func NewJSONEncoder(s *JSONSchemaDef) *JSONEncoder {
	return &JSONEncoder{schema: s, ids: map[string]uint32{}}
}

// Register checks the output schema's compatibility with the latest
// version under topic's subject, as the registry judges it (the subject's
// compatibility level: Apicurio's default is NONE, which accepts anything),
// registers it (the registry applies the same rule again), and keeps its
// id. An incompatible schema is an eos.ErrConfig naming the subject and,
// when the registry says, the field.
func (e *JSONEncoder) Register(ctx context.Context, cl *sr.Client, topic string) error {
	subject := Subject(topic)
	s := sr.Schema{Schema: e.schema.text, Type: sr.TypeJSON}
	latest, found, err := latestSchema(ctx, cl, subject)
	if err != nil {
		return err
	}
	if found {
		if why := registryIncompatible(ctx, cl, subject, s); why != "" {
			return eos.BadConfig("output_schema", "not compatible with subject %s (version %d)%s: %s", subject, latest.Version, fieldOf(why), why)
		}
	}
	id, err := createSchema(ctx, cl, subject, s)
	if err != nil {
		return err
	}
	e.ids[topic] = id
	return nil
}

// propertyPath finds the property a registry's compatibility message
// points at: Apicurio says "... at /properties/id", Confluent
// "#/properties/id".
var propertyPath = regexp.MustCompile(`/properties/([^/\s,\]]+)`)

// fieldOf returns ` at field "NAME"` if why names a property, else "".
func fieldOf(why string) string {
	m := propertyPath.FindStringSubmatch(why)
	if m == nil {
		return ""
	}
	return fmt.Sprintf(" at field %q", m[1])
}

// Append checks the JSON document js against the output schema and appends
// it as a wire-format record for topic (which Register must have seen). A
// document that is not valid is a *BadDataError (json-schema-encode).
func (e *JSONEncoder) Append(dst []byte, topic string, js []byte) ([]byte, error) {
	id, ok := e.ids[topic]
	if !ok {
		return dst, fmt.Errorf("wireformat: no schema registered for topic %s", topic)
	}
	if err := e.schema.validate(&e.p, js); err != nil {
		return dst, bad("json-schema-encode", "%v", err)
	}
	return append(binary.BigEndian.AppendUint32(append(dst, 0), id), js...), nil
}

// AppendFields implements Encoder, but a JSON Schema judges the whole
// document (additionalProperties, nested values), which get cannot give:
// callers use Append (topologies do, for json-schema).
func (e *JSONEncoder) AppendFields(dst []byte, topic string, _ func(string) ([]byte, bool)) ([]byte, error) {
	return dst, fmt.Errorf("wireformat: json-schema encodes whole documents (Append), not fields, for topic %s", topic)
}

// jsonSchemaFormat is JSON Schema's Format: schema files are JSON Schemas
// (.json); there is no reader schema (each record is checked against its
// writer schema) and no message.
type jsonSchemaFormat struct{}

func init() { register(JSONSchema, jsonSchemaFormat{}) }

func (jsonSchemaFormat) Parse(path string, text []byte, _ string) (Schema, error) {
	s, err := CompileJSONSchema(filepath.Base(path), string(text))
	if err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	return s, nil
}

func (jsonSchemaFormat) NewDecoder(cl *sr.Client, reader Schema, warn func(string, ...any)) (Decoder, error) {
	if reader != nil {
		return nil, eos.BadConfig("reader_schema", "json-schema checks each record against its writer schema: it takes no reader schema")
	}
	return NewJSONDecoder(cl, warn), nil
}

func (jsonSchemaFormat) NewEncoder(s Schema) (Encoder, error) {
	return NewJSONEncoder(s.(*JSONSchemaDef)), nil
}

func (jsonSchemaFormat) SchemaExt() string { return ".json" }
