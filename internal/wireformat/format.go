package wireformat

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/sr"
)

// Kind names a record format as configurations and --format spell it.
type Kind string

// The formats. JSON is plain JSON values, outside this package; the others
// are in the Confluent wire format, each with its own Format.
const (
	JSON       Kind = "json"
	Avro       Kind = "avro"
	Protobuf   Kind = "protobuf"
	JSONSchema Kind = "json-schema"
)

// DecodeReason is the dead-letter reason of a record of kind k whose
// payload does not decode (avro-decode, protobuf-decode, ...).
func (k Kind) DecodeReason() string { return string(k) + "-decode" }

// EncodeReason is the dead-letter reason of an output that does not fit
// the output schema of kind k (avro-encode, protobuf-encode, ...).
func (k Kind) EncodeReason() string { return string(k) + "-encode" }

// Schema is a schema file parsed by its Format (an avro.Schema for Avro);
// only that Format's decoders and encoders take it.
type Schema any

// Decoder turns wire-format records into the JSON objects the topologies
// evaluate. A Decoder is not safe for concurrent use: each worker has its
// own.
type Decoder interface {
	// AppendJSON decodes the wire-format record b and appends it to dst
	// as a JSON object. Errors are a *BadDataError (the record is
	// dead-lettered with its Reason) or, the registry unreachable until
	// ctx ended, wrap eos.ErrUnreachable (the record is retried).
	AppendJSON(ctx context.Context, dst, b []byte) ([]byte, error)
	// Fields returns the top-level fields of the JSON object the last
	// AppendJSON appended to an empty dst, their names and where their
	// values are, or nil if it does not know them. They are valid until
	// the next call.
	Fields() ([]string, [][2]int)
}

// Encoder writes JSON objects as wire-format records of one output schema,
// registered under each output topic's subject (TopicNameStrategy:
// TOPIC-value).
type Encoder interface {
	// Register checks the output schema's compatibility with the latest
	// version under topic's subject, registers it and keeps its id. An
	// incompatible schema is an eos.ErrConfig naming the subject and the
	// field; a registry that does not answer wraps eos.ErrUnreachable.
	Register(ctx context.Context, cl *sr.Client, topic string) error
	// Append encodes the JSON object js as a wire-format record for topic
	// (which Register must have seen). A value that does not fit the
	// schema is a *BadDataError (Kind.EncodeReason).
	Append(dst []byte, topic string, js []byte) ([]byte, error)
	// AppendFields is Append for an output already split into its
	// fields: get returns a field's raw JSON value (valid JSON), or false
	// if the output has no such field.
	AppendFields(dst []byte, topic string, get func(name string) ([]byte, bool)) ([]byte, error)
}

// Format builds the decoders and encoders of one wire format.
type Format interface {
	// Parse reads a schema file's text; path locates the file (its
	// imports, messages) and message picks a message type of a file that
	// has several ("" the format's default). Errors say what is wrong
	// with the file, without naming it.
	Parse(path string, text []byte, message string) (Schema, error)
	// NewDecoder reads each record with its writer schema from cl, and
	// then as reader if reader is not nil (schema evolution). warn
	// receives the registry's failures while they are retried.
	NewDecoder(cl *sr.Client, reader Schema, warn func(string, ...any)) (Decoder, error)
	// NewEncoder writes records of the output schema s; an error says why
	// s cannot be an output schema.
	NewEncoder(s Schema) (Encoder, error)
	// SchemaExt is the extension of the format's schema files (.avsc),
	// for messages.
	SchemaExt() string
}

var formats = map[Kind]Format{}

// register adds a format; each format's file registers itself.
func register(k Kind, f Format) { formats[k] = f }

// Lookup returns kind's Format, or nil if it is not one (json, or a
// format not built yet).
func Lookup(k Kind) Format { return formats[k] }

// Kinds returns the wire formats there are, sorted.
func Kinds() []Kind {
	var ks []Kind
	for k := range formats {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

// splitHeader reads the wire format's header: the magic byte 0 and the
// 4-byte big-endian schema id; the rest is the payload.
func splitHeader(b []byte) (uint32, []byte, error) {
	if len(b) < 5 || b[0] != 0 {
		if len(b) > 0 && b[0] != 0 {
			return 0, nil, bad("wire-format", "not in the Confluent wire format: the first byte is 0x%02x, want the magic byte 0", b[0])
		}
		return 0, nil, bad("wire-format", "not in the Confluent wire format: %d bytes, want at least 5 (magic byte, schema id)", len(b))
	}
	return binary.BigEndian.Uint32(b[1:5]), b[5:], nil
}

// appendHeader appends the magic byte and the schema id registered for
// topic (which an encoder's Register must have seen).
func appendHeader(dst []byte, ids map[string]uint32, topic string) ([]byte, error) {
	id, ok := ids[topic]
	if !ok {
		return dst, fmt.Errorf("wireformat: no schema registered for topic %s", topic)
	}
	return binary.BigEndian.AppendUint32(append(dst, 0), id), nil
}

// cachedPlan returns plans[id], built by build the first time id is seen
// (an error from build, the registry unreachable, is not cached).
func cachedPlan[P any](ctx context.Context, plans map[uint32]P, id uint32, build func(context.Context, uint32) (P, error)) (P, error) {
	p, ok := plans[id]
	if ok {
		return p, nil
	}
	p, err := build(ctx, id)
	if err == nil {
		plans[id] = p
	}
	return p, err
}
