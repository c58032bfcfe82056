package topologies

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// Formats
//
// The etl, aggregate and dedup topologies (and the etl's join) read and
// write JSON by default. With a format key they read and write Avro or
// Protobuf in the Confluent wire format (a zero byte, the 4-byte schema
// id, for Protobuf the message-index list, then the payload) against a
// Schema Registry (Options.SchemaRegistry; eosctl's --schema-registry):
//
//	format:
//	  input: avro                 # json (default), avro or protobuf
//	  reader_schema: order.avsc   # optional: read every writer schema as this one
//	  output: avro                # json (default), avro or protobuf
//	  output_schema: order.avsc   # required with output avro or protobuf
//	  output_message: Order       # protobuf: the message of output_schema (default the first)
//
// Decoded records are presented to the expressions as JSON objects with the
// same fields (Avro longs and ints, Protobuf's integers of every width, as
// integers; floats and doubles as numbers; enums and strings as strings;
// null as nil; Protobuf's nested messages as objects, repeated fields as
// arrays, maps as objects, absent proto3 scalars as their defaults; see
// package wireformat), so a configuration works on any format. Schema
// files are relative to the configuration file.
//
// The output schema is registered at start under each output topic's
// subject (TopicNameStrategy: TOPIC-value) after a compatibility check
// against the subject's latest version; an incompatible schema stops the
// start with a line naming the subject and the field. A record that is not
// in the wire format or does not decode goes to the dead-letter topic with
// reason wire-format or avro-decode / protobuf-decode, an output that does
// not fit the output schema with avro-encode / protobuf-encode, in the
// same transaction as everything else. A schema id seen for the first time
// while the registry is down is retried until the registry answers (the
// worker waits; the record is never dead-lettered for it); ids seen before
// are cached and need no registry.
//
// json-schema (JSON Schema in the wire format: the header, then the JSON
// document) is not transcoded: each input record is validated against its
// writer schema (fetched by id, compiled once) and handed to the
// expressions as the JSON it is; one that is not valid goes to the
// dead-letter topic with reason json-schema-invalid and the validator's
// first error. Outputs are validated against output_schema (a .json file;
// json-schema-encode if not valid). There is no reader_schema. The
// compatibility check is the registry's: Apicurio applies the subject's
// compatibility level (NONE by default, BACKWARD as internal/schemaregistry
// starts it), and under BACKWARD refuses, among others, a field added to an
// open schema (one without additionalProperties: false).

// SchemaRegistry says how to reach a Schema Registry's Confluent-compatible
// API: its URL (for Apicurio, ending in /apis/ccompat/v7), optional TLS
// files and basic auth.
type SchemaRegistry struct {
	URL                    string
	TLSCA, TLSCert, TLSKey string
	User, Password         string
}

var formatKeys = []string{"input", "output", "reader_schema", "output_schema", "output_message"}

// format is a configuration's format key.
type format struct {
	in, out        wireformat.Kind // json if not given
	reader, output wireformat.Schema
	outputLine     *yaml.Node
	outLine        int // format.output's line, 0 if not given
	file           string
}

// readFormat reads the format key of the configuration at path; nil if it
// has none or says json both ways.
func readFormat(path string) (*format, error) {
	d, err := readDoc(path)
	if err != nil {
		return nil, err
	}
	fs, err := d.fields(d.root, "", nil)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.name == "format" {
			return d.format(f)
		}
	}
	return nil, nil
}

// formatNames lists the formats there are, for messages: "json or avro".
func formatNames() string {
	names := []string{string(wireformat.JSON)}
	for _, k := range wireformat.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (d *doc) format(f field) (*format, error) {
	fs, err := d.fields(f.value, f.key, formatKeys)
	if err != nil {
		return nil, err
	}
	fm := &format{file: d.file, in: wireformat.JSON, out: wireformat.JSON}
	var readerField, outputField, messageField *field
	for _, x := range fs {
		switch x.name {
		case "input", "output":
			s, err := d.str(x)
			if err != nil {
				return nil, err
			}
			k := wireformat.Kind(s)
			switch {
			case k == wireformat.JSON || wireformat.Lookup(k) != nil:
			case k == wireformat.Avro || k == wireformat.Protobuf || k == wireformat.JSONSchema:
				return nil, d.errAt(x.value, x.key, "%s is not supported yet (%s)", s, formatNames())
			default:
				return nil, d.errAt(x.value, x.key, "want %s, got %q", formatNames(), s)
			}
			if x.name == "input" {
				fm.in = k
			} else {
				fm.out, fm.outLine = k, x.value.Line
			}
		case "reader_schema":
			readerField = &x
		case "output_schema":
			outputField, fm.outputLine = &x, x.value
		case "output_message":
			messageField = &x
		}
	}
	switch {
	case readerField != nil && fm.in == wireformat.JSON:
		return nil, d.errAt(readerField.line, readerField.key, "a reader schema is for an input in a wire format (input: %s)", strings.Join(kindNames(), ", input: "))
	case readerField != nil && fm.in == wireformat.JSONSchema:
		return nil, d.errAt(readerField.line, readerField.key, "input: json-schema checks each record against the schema it was written with: it takes no reader schema")
	case outputField != nil && fm.out == wireformat.JSON:
		return nil, d.errAt(outputField.line, outputField.key, "an output schema is for an output in a wire format (output: %s)", strings.Join(kindNames(), ", output: "))
	case messageField != nil && fm.out != wireformat.Protobuf:
		return nil, d.errAt(messageField.line, messageField.key, "output_message names the message of output: protobuf")
	case fm.out != wireformat.JSON && outputField == nil:
		return nil, d.errAt(f.line, f.key, "output: %s needs output_schema: FILE%s (the schema the output records are written with)", fm.out, wireformat.Lookup(fm.out).SchemaExt())
	}
	message := ""
	if messageField != nil {
		if message, err = d.str(*messageField); err != nil {
			return nil, err
		}
	}
	if readerField != nil {
		if fm.reader, err = d.schema(*readerField, fm.in, ""); err != nil {
			return nil, err
		}
	}
	if outputField != nil {
		if fm.output, err = d.schema(*outputField, fm.out, message); err != nil {
			var ce *ConfigError
			if messageField != nil && errors.As(err, &ce) && strings.Contains(ce.Reason, "no message") {
				return nil, d.errAt(messageField.value, messageField.key, "%s", ce.Reason) // at the message's line
			}
			return nil, err
		}
		if _, err := wireformat.Lookup(fm.out).NewEncoder(fm.output); err != nil {
			return nil, d.errAt(outputField.value, outputField.key, "%v", err)
		}
	}
	if fm.in == wireformat.JSON && fm.out == wireformat.JSON {
		return nil, nil
	}
	return fm, nil
}

// kindNames lists the wire formats' names.
func kindNames() []string {
	var names []string
	for _, k := range wireformat.Kinds() {
		names = append(names, string(k))
	}
	return names
}

// schema reads the schema file x names, relative to the configuration, as
// a schema of format k (message: the message type, for protobuf).
func (d *doc) schema(x field, k wireformat.Kind, message string) (wireformat.Schema, error) {
	p, err := d.str(x)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(d.file), p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, d.errAt(x.value, x.key, "%v", err)
	}
	s, err := wireformat.Lookup(k).Parse(p, b, message)
	if err != nil {
		return nil, d.errAt(x.value, x.key, "%s: %v", p, err)
	}
	return s, nil
}

// withFormat builds a topology with build and, if its configuration has a
// format key, wraps it to read and write that format.
func withFormat[T pipeline.Transform](o Options, build func(Options) (T, error)) (pipeline.Transform, error) {
	t, err := build(o)
	if err != nil {
		return nil, err
	}
	fm, err := readFormat(o.Config)
	if err != nil || fm == nil {
		return t, err
	}
	if _, ok := any(t).(unchangedPasser); ok && fm.out != wireformat.JSON {
		return nil, &ConfigError{File: fm.file, Line: fm.outLine, Key: "format.output",
			Reason: fmt.Sprintf("this topology passes each record unchanged, in its input's format (here %s): it takes no output format", fm.in)}
	}
	if o.CheckOnly {
		return t, nil
	}
	return fm.wrap(t, o)
}

// unchangedPasser is a topology whose outputs are its input records as
// they came (dedup): around it, the format is only how the expressions
// read a record, and what it emits is the record's own bytes, in the
// wire format, never the JSON they were decoded to.
type unchangedPasser interface{ passesUnchanged() }

// registerTimeout bounds the registry calls of a start.
const registerTimeout = 30 * time.Second

func (fm *format) wrap(t pipeline.Transform, o Options) (pipeline.Transform, error) {
	r := o.SchemaRegistry
	cl, err := wireformat.NewClient(wireformat.Registry{URL: r.URL, CA: r.TLSCA, Cert: r.TLSCert, Key: r.TLSKey, User: r.User, Password: r.Password})
	if err != nil {
		return nil, err
	}
	w := &formatted{inner: t}
	if dt, ok := t.(pipeline.Declarer); ok {
		w.decl = dt.Declare()
	}
	warn := func(format string, args ...any) {
		if o.Warn != nil {
			o.Warn(fmt.Sprintf(format, args...))
		}
	}
	if fm.in != wireformat.JSON {
		if w.dec, err = wireformat.Lookup(fm.in).NewDecoder(cl, fm.reader, warn); err != nil {
			return nil, err
		}
		if h, ok := t.(interface{ inputObject() *jsonObject }); ok {
			w.obj = h.inputObject()
		}
	}
	outWire := fm.out != wireformat.JSON
	_, w.unchanged = t.(unchangedPasser)
	// The decoded JSON's buffer is reused from record to record when no
	// output keeps it: every output encoded into a buffer of its own
	// (output in a wire format, no repartition topic, which stays JSON),
	// or every output the record's own bytes (unchanged).
	w.reuse = outWire && w.decl.Repartition == "" || w.unchanged
	// json-schema judges an output as the whole document it is: the etl
	// need not record its fields.
	w.whole = fm.out == wireformat.JSONSchema
	if e, ok := t.(*ETL); ok && outWire && !w.whole {
		e.shaped.on = true
	}
	if outWire {
		if o.Output == "" {
			return nil, eos.BadConfig("topologies.Options.Output", "output: %s registers its schema under the output topic's subject: the output topic is needed", fm.out)
		}
		w.kind = fm.out
		if w.enc, err = wireformat.Lookup(fm.out).NewEncoder(fm.output); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
		defer cancel()
		w.topics = map[string]string{"": o.Output}
		maps.Copy(w.topics, w.decl.Outputs)
		for _, topic := range w.topics {
			if err := w.enc.Register(ctx, cl, topic); err != nil {
				if errors.Is(err, eos.ErrConfig) {
					var ce *eos.ConfigError
					errors.As(err, &ce)
					return nil, &ConfigError{File: fm.file, Line: fm.outputLine.Line, Key: "format.output_schema", Reason: ce.Reason}
				}
				return nil, err
			}
		}
	}
	w.fast = newAvroETL(w)
	if _, ok := t.(pipeline.Flusher); ok {
		return &formattedFlusher{w}, nil
	}
	if st, ok := t.(pipeline.Starter); ok && !etlWithoutJoin(t) {
		return &formattedStarter{w, st}, nil
	}
	return w, nil
}

// etlWithoutJoin says whether t is an etl with nothing to start (every
// etl is a pipeline.Starter, for its join).
func etlWithoutJoin(t pipeline.Transform) bool {
	e, ok := t.(*ETL)
	return ok && e.join == nil
}

// formattedStarter is a formatted topology that follows the worker's
// assignment (the etl's join, whose table the worker starts and syncs):
// the worker drives the inner topology's Starter through it. The table's
// own topic is read as JSON: the format is the input's and the output's.
type formattedStarter struct {
	*formatted
	pipeline.Starter
}

// formatted reads its input from and writes its output to the wire format
// around a topology that reads and writes JSON.
type formatted struct {
	inner  pipeline.Transform
	decl   pipeline.Declaration
	dec    wireformat.Decoder
	enc    wireformat.Encoder
	kind   wireformat.Kind   // the output's format
	whole  bool              // the encoder takes the output's JSON as it is (Append)
	topics map[string]string // output name -> topic ("" the main output)
	em     encodingEmitter
	out    jsonObject // an output split into its fields, to encode
	// obj is the topology's parsed input, which the decoder fills
	// directly; nil if the topology does not say where it is.
	obj   *jsonObject
	reuse bool // the decoded JSON's buffer can be reused (see Process)
	buf   []byte
	// unchanged: the topology passes records unchanged (unchangedPasser):
	// its repartitioned records are in the input's format too, and each
	// output that is the decoded record is given the record's own bytes.
	unchanged bool
	fast      *avroETL // nil unless an etl reads and writes Avro
}

// Declare implements pipeline.Declarer.
func (w *formatted) Declare() pipeline.Declaration { return w.decl }

// Unwrap returns the JSON topology inside.
func (w *formatted) Unwrap() pipeline.Transform { return w.inner }

// Process implements pipeline.Transform.
func (w *formatted) Process(ctx context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	if w.fast != nil && !in.Repartitioned {
		if done, err := w.fast.process(in, out); done {
			return err
		}
	}
	decode := w.dec != nil && (!in.Repartitioned || w.unchanged)
	if p, ok := w.dec.(payloader); ok && decode {
		// json-schema: the record's own JSON, validated, not copied (the
		// record's value is not written to while the topology may alias it).
		js, err := p.Payload(ctx, in.Value)
		if err != nil {
			return deadLetterBad(err)
		}
		if w.obj != nil {
			w.obj.pre = nil
		}
		orig := in.Value
		in.Value = js
		defer func() { in.Value = orig }()
		if w.unchanged {
			return w.inner.Process(ctx, in, asIs{out, js, orig})
		}
	} else if decode {
		// What the topology emits may alias the JSON until the
		// transaction's records are produced, so it gets a new buffer each
		// time, unless every output is encoded into a buffer of its own
		// (output avro, no repartition topic, which stays JSON).
		buf := w.buf[:0]
		if !w.reuse {
			buf = make([]byte, 0, 2*len(in.Value)+16)
		}
		js, err := w.dec.AppendJSON(ctx, buf, in.Value)
		if err != nil {
			return deadLetterBad(err)
		}
		if w.reuse {
			w.buf = js
		}
		if w.obj != nil {
			if keys, spans := w.dec.Fields(); keys != nil {
				w.obj.preparsed(js, keys, spans)
			} else {
				w.obj.pre = nil
			}
		}
		orig := in.Value
		in.Value = js
		defer func() { in.Value = orig }()
		if w.unchanged {
			return w.inner.Process(ctx, in, asIs{out, js, orig})
		}
	}
	if w.enc == nil {
		return w.inner.Process(ctx, in, out)
	}
	w.em = encodingEmitter{w: w, out: out}
	if err := w.inner.Process(ctx, in, &w.em); err != nil {
		return err
	}
	if w.em.err != nil {
		return deadLetterBad(w.em.err)
	}
	return nil
}

// asIs emits, for an output whose value is the decoded record (js), the
// record's own bytes (orig) instead.
type asIs struct {
	out      pipeline.Emitter
	js, orig []byte
}

func (a asIs) Emit(o pipeline.Output) {
	if len(o.Value) == len(a.js) && len(o.Value) > 0 && &o.Value[0] == &a.js[0] {
		o.Value = a.orig
	}
	a.out.Emit(o)
}

// payloader is a Decoder whose records carry their JSON as it is
// (json-schema's): Payload returns it, validated, as a slice of the record.
type payloader interface {
	Payload(ctx context.Context, b []byte) ([]byte, error)
}

func deadLetterBad(err error) error {
	var bd *wireformat.BadDataError
	if errors.As(err, &bd) {
		return pipeline.DeadLetter(bd.Reason, bd.Err)
	}
	return err
}

// encodingEmitter encodes what a topology emits to the output schema; the
// first value that does not fit is kept, and its input dead-lettered.
type encodingEmitter struct {
	w    *formatted
	out  pipeline.Emitter
	err  error
	keys []string // emitFields' output, for field
	raws [][]byte
}

func (e *encodingEmitter) Emit(o pipeline.Output) {
	if e.err != nil {
		return
	}
	if o.To != "" && o.To == e.w.decl.Repartition {
		e.out.Emit(o) // internal: stays JSON
		return
	}
	if e.w.whole {
		e.encode(o, nil)
		return
	}
	if err := e.w.out.parse(o.Value); err != nil {
		e.err = &wireformat.BadDataError{Reason: e.w.kind.EncodeReason(), Err: fmt.Errorf("the output is not a JSON object: %w", err)}
		return
	}
	e.encode(o, e.w.out.get)
}

// encode emits o with its value encoded from the fields get returns, or
// from the value as it is if get is nil.
func (e *encodingEmitter) encode(o pipeline.Output, get func(string) ([]byte, bool)) {
	dst, topic := make([]byte, 0, len(o.Value)+5), e.w.topics[o.To]
	var v []byte
	var err error
	if get == nil {
		v, err = e.w.enc.Append(dst, topic, o.Value)
	} else {
		v, err = e.w.enc.AppendFields(dst, topic, get)
	}
	if err != nil {
		e.err = err
		return
	}
	o.Value = v
	e.out.Emit(o)
}

type formattedFlusher struct{ *formatted }

// Flush implements pipeline.Flusher: a held-back output that does not fit
// the output schema stops the worker (it stands for many input records,
// none of which alone can be dead-lettered).
func (w *formattedFlusher) Flush(ctx context.Context, out pipeline.Emitter) error {
	f := w.inner.(pipeline.Flusher)
	if w.enc == nil {
		return f.Flush(ctx, out)
	}
	w.em = encodingEmitter{w: w.formatted, out: out}
	if err := f.Flush(ctx, &w.em); err != nil {
		return err
	}
	if w.em.err != nil {
		return fmt.Errorf("topologies: an output does not fit the output schema: %w", w.em.err)
	}
	return nil
}

// Discard implements pipeline.Flusher.
func (w *formattedFlusher) Discard() { w.inner.(pipeline.Flusher).Discard() }

// Prefetch implements pipeline.Prefetcher for a topology that is one
// (dedup: what it reads ahead, a header or the Kafka key, is the same in
// every format).
func (w *formattedFlusher) Prefetch(records []*kgo.Record) {
	if p, ok := w.inner.(pipeline.Prefetcher); ok {
		p.Prefetch(records)
	}
}

// inputObject is where the etl topology parses its input: the decoder of
// a formatted etl fills it directly.
func (t *ETL) inputObject() *jsonObject { return &t.env.obj }

// preparsed sets o to the fields of the JSON object b that a decoder just
// wrote (names, and where their values are), so that the next parse of b
// itself is skipped: b was written field by field and is valid.
func (o *jsonObject) preparsed(b []byte, keys []string, spans [][2]int) {
	o.keys, o.raws = append(o.keys[:0], keys...), o.raws[:0]
	for _, sp := range spans {
		o.raws = append(o.raws, b[sp[0]:sp[1]])
	}
	o.pre = b
}

// fieldsEmitter is an Emitter that takes an output already split into its
// top-level fields (names and raw JSON values, the last of a repeated name
// winning), as the etl topology has it: the encoder of a formatted
// topology, which would otherwise parse the JSON again.
type fieldsEmitter interface {
	emitFields(o pipeline.Output, keys []string, raws [][]byte)
}

// shapedFields records where reshape put each output field, once on is
// set (by an encoder that will ask for them).
type shapedFields struct {
	on    bool
	keys  []string
	spans [][2]int
	raws  [][]byte
	// buf is the last output's buffer: with on, every output is encoded
	// into a buffer of its own, so the JSON's can serve the next record.
	buf []byte
}

// output returns an empty buffer of capacity n or more for reshape.
func (s *shapedFields) output(n int) []byte {
	if s.on && cap(s.buf) >= n {
		return s.buf[:0]
	}
	return make([]byte, 0, n)
}

func (s *shapedFields) reset() { s.keys, s.spans = s.keys[:0], s.spans[:0] }

func (s *shapedFields) add(name string, start, end int) {
	if s.on {
		s.keys, s.spans = append(s.keys, name), append(s.spans, [2]int{start, end})
	}
}

// outputFields returns the fields of the value Process emits: reshape's,
// or the input's when the value is the input.
func (t *ETL) outputFields(value []byte, reshaped bool) ([]string, [][]byte) {
	if !reshaped {
		return t.env.obj.keys, t.env.obj.raws
	}
	s := &t.shaped
	s.buf = value // encoded into a buffer of its own: reusable
	s.raws = s.raws[:0]
	for _, sp := range s.spans {
		s.raws = append(s.raws, value[sp[0]:sp[1]])
	}
	return s.keys, s.raws
}

func (e *encodingEmitter) emitFields(o pipeline.Output, keys []string, raws [][]byte) {
	if e.err != nil {
		return
	}
	e.keys, e.raws = keys, raws
	e.encode(o, e.field)
}

// field returns the raw value of the last field called name.
func (e *encodingEmitter) field(name string) ([]byte, bool) {
	for i := len(e.keys) - 1; i >= 0; i-- {
		if e.keys[i] == name {
			return e.raws[i], true
		}
	}
	return nil, false
}
