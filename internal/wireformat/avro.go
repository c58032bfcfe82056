package wireformat

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eosctl/eos"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// AvroDecoder turns Confluent wire-format Avro records into JSON objects. It
// keeps one plan per writer schema id, fetched on first sight. It is not
// safe for concurrent use: each worker has its own.
type AvroDecoder struct {
	cl     *sr.Client
	reader avro.Schema
	warn   func(string, ...any)
	plans  map[uint32]*plan
	keys   []string
	spans  [][2]int
}

// Fields returns the top-level fields of the JSON object the last
// AppendJSON appended to an empty dst: their names and where their values
// are, or nil if it does not know them (a schema read by the generic
// decoder). They are valid until the next call.
func (d *AvroDecoder) Fields() ([]string, [][2]int) {
	return d.keys, d.spans
}

type plan struct {
	flat    *reader
	generic avro.Schema // resolved reader/writer schema for the rest
	err     error       // the writer schema cannot be read: every record is bad
}

// NewAvroDecoder reads records through readerSchema if it is not nil (schema
// evolution: every writer schema is resolved against it), else each with
// its own writer schema. warn receives the registry's failures while they
// are retried.
func NewAvroDecoder(cl *sr.Client, readerSchema avro.Schema, warn func(string, ...any)) *AvroDecoder {
	return &AvroDecoder{cl: cl, reader: readerSchema, warn: warn, plans: map[uint32]*plan{}}
}

// ParseSchema parses an Avro schema's JSON text.
func ParseSchema(text string) (avro.Schema, error) {
	return avro.Parse(text)
}

// AppendJSON decodes the wire-format record b and appends it to dst as a
// JSON object. Errors are a *BadDataError, or (the registry unreachable
// until ctx ended) wrap eos.ErrUnreachable.
func (d *AvroDecoder) AppendJSON(ctx context.Context, dst, b []byte) ([]byte, error) {
	id, payload, err := splitHeader(b)
	if err != nil {
		return dst, err
	}
	b = payload
	p, err := cachedPlan(ctx, d.plans, id, d.newPlan)
	if err != nil {
		return dst, err
	}
	if p.err != nil {
		return dst, bad("avro-decode", "schema id %d: %v", id, p.err)
	}
	if p.flat != nil {
		base := len(dst)
		out, err := p.flat.appendJSON(dst, b)
		if err != nil {
			return dst, bad("avro-decode", "schema id %d: %v", id, err)
		}
		d.keys, d.spans = p.flat.keys, p.flat.spans
		if base != 0 {
			d.keys = nil // spans are relative to dst's start
		}
		return out, nil
	}
	d.keys, d.spans = nil, nil
	var v any
	if err := avro.Unmarshal(p.generic, b, &v); err != nil {
		return dst, bad("avro-decode", "schema id %d: %v", id, err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return dst, bad("avro-decode", "schema id %d: as JSON: %v", id, err)
	}
	return append(dst, js...), nil
}

func (d *AvroDecoder) newPlan(ctx context.Context, id uint32) (*plan, error) {
	s, err := fetch(ctx, d.cl, int(id), d.warn)
	if err != nil {
		return nil, err
	}
	if s.Type != sr.TypeAvro {
		return &plan{err: fmt.Errorf("a %s schema; only avro is supported yet", s.Type)}, nil
	}
	w, err := avro.Parse(s.Schema)
	if err != nil {
		return &plan{err: fmt.Errorf("the registry's schema does not parse: %v", err)}, nil
	}
	if d.reader != nil {
		if err := avro.NewSchemaCompatibility().Compatible(d.reader, w); err != nil {
			return &plan{err: fmt.Errorf("the reader schema cannot read it: %v", err)}, nil
		}
	}
	if r, err := newReader(w, d.reader); err == nil {
		return &plan{flat: r}, nil
	}
	g := w
	if d.reader != nil {
		if g, err = avro.NewSchemaCompatibility().Resolve(d.reader, w); err != nil {
			return &plan{err: fmt.Errorf("the reader schema cannot read it: %v", err)}, nil
		}
	}
	return &plan{generic: g}, nil
}

// AvroEncoder writes JSON objects as Confluent wire-format Avro records of one
// output schema, registered under each output topic's subject
// (TopicNameStrategy: TOPIC-value).
type AvroEncoder struct {
	schema avro.Schema
	w      *writer
	ids    map[string]uint32
}

// NewAvroEncoder takes the output schema; it must be a flat record.
func NewAvroEncoder(s avro.Schema) (*AvroEncoder, error) {
	w, err := newWriter(s)
	if err != nil {
		return nil, err
	}
	return &AvroEncoder{schema: s, w: w, ids: map[string]uint32{}}, nil
}

// Subject is the TopicNameStrategy subject of topic's values.
func Subject(topic string) string { return topic + "-value" }

// Register checks the output schema against the latest version under
// topic's subject (the new schema must read what the old wrote: BACKWARD,
// the registry's default), registers it, and keeps its id. An incompatible
// schema is an eos.ErrConfig naming the subject and the field.
func (e *AvroEncoder) Register(ctx context.Context, cl *sr.Client, topic string) error {
	subject := Subject(topic)
	latest, found, err := latestSchema(ctx, cl, subject)
	if err != nil {
		return err
	}
	if found {
		if old, perr := avro.Parse(latest.Schema.Schema); perr == nil {
			if why := incompatible(e.schema, old); why != "" {
				return eos.BadConfig("output_schema", "not compatible with subject %s (version %d): %s", subject, latest.Version, why)
			}
		}
		if why := registryIncompatible(ctx, cl, subject, sr.Schema{Schema: e.schema.String(), Type: sr.TypeAvro}); why != "" {
			return eos.BadConfig("output_schema", "the registry finds it not compatible with subject %s (version %d): %s", subject, latest.Version, why)
		}
	}
	id, err := createSchema(ctx, cl, subject, sr.Schema{Schema: e.schema.String(), Type: sr.TypeAvro})
	if err != nil {
		return err
	}
	e.ids[topic] = id
	return nil
}

// incompatible says why records written with old cannot be read with s,
// naming the field, or "" if they can.
func incompatible(s, old avro.Schema) string {
	c := avro.NewSchemaCompatibility()
	nr, ok1 := s.(*avro.RecordSchema)
	or, ok2 := old.(*avro.RecordSchema)
	if ok1 && ok2 {
		for _, f := range nr.Fields() {
			i := -1
			for j, g := range or.Fields() {
				if g.Name() == f.Name() {
					i = j
				}
			}
			if i < 0 {
				if !f.HasDefault() {
					return fmt.Sprintf("field %q is new and has no default, so records written before cannot be read", f.Name())
				}
				continue
			}
			if err := c.Compatible(f.Type(), or.Fields()[i].Type()); err != nil {
				return fmt.Sprintf("field %q: %v", f.Name(), err)
			}
		}
	}
	if err := c.Compatible(s, old); err != nil {
		return err.Error()
	}
	return ""
}

// Append encodes the JSON object js as a wire-format record for topic
// (which Register must have seen). A value that does not fit the schema is
// a *BadDataError (avro-encode).
func (e *AvroEncoder) Append(dst []byte, topic string, js []byte) ([]byte, error) {
	body, err := e.header(dst, topic)
	if err != nil {
		return dst, err
	}
	out, err := e.w.appendAvro(body, js)
	return encoded(dst, out, err)
}

// AppendFields is Append for an output already split into its fields: get
// returns a field's raw JSON value (valid JSON), or false if the output has
// no such field. It spares parsing the JSON again.
func (e *AvroEncoder) AppendFields(dst []byte, topic string, get func(name string) ([]byte, bool)) ([]byte, error) {
	body, err := e.header(dst, topic)
	if err != nil {
		return dst, err
	}
	out, err := e.w.appendFields(body, get)
	return encoded(dst, out, err)
}

// header appends the magic byte and topic's schema id.
func (e *AvroEncoder) header(dst []byte, topic string) ([]byte, error) {
	return appendHeader(dst, e.ids, topic)
}

// encoded returns an encoding's result, or dst and its error as bad data.
func encoded(dst, out []byte, err error) ([]byte, error) {
	if err != nil {
		return dst, bad("avro-encode", "%v", err)
	}
	return out, nil
}

// avroFormat is Avro's Format: schema files are Avro schemas' JSON
// (.avsc), and output schemas must be flat records.
type avroFormat struct{}

func init() { register(Avro, avroFormat{}) }

func (avroFormat) Parse(_ string, text []byte, _ string) (Schema, error) {
	s, err := ParseSchema(string(text))
	if err != nil {
		return nil, fmt.Errorf("not an Avro schema: %w", err)
	}
	return s, nil
}

func (avroFormat) NewDecoder(cl *sr.Client, reader Schema, warn func(string, ...any)) (Decoder, error) {
	r, _ := reader.(avro.Schema)
	return NewAvroDecoder(cl, r, warn), nil
}

func (avroFormat) NewEncoder(s Schema) (Encoder, error) {
	return NewAvroEncoder(s.(avro.Schema))
}

func (avroFormat) SchemaExt() string { return ".avsc" }
