package wireformat

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// orderV1 is closed (additionalProperties false); orderV2 adds an optional
// field, so a record written with v2 is invalid against v1.
const orderV1 = `{"type":"object","additionalProperties":false,
 "properties":{"id":{"type":"integer"},"user":{"type":"string"},"amount":{"type":"number","minimum":0},
  "status":{"enum":["NEW","PAID"]}},
 "required":["id","user","amount"]}`

var orderV2 = strings.Replace(orderV1, `"status":`, `"channel":{"type":"string"},"status":`, 1)

func jsonWire(t *testing.T, cl *sr.Client, subject, schema, doc string) []byte {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: schema, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID)), doc...)
}

// A valid record's JSON comes out as it was written, byte for byte; a
// schema evolved mid-stream (a new optional field) is fetched by its own
// id and its records validated against it, while the old id's records are
// still judged by the old schema.
func TestJSONSchemaDecodeValidatesEachRecordAgainstItsWriterSchema(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	docV1 := `{"id":1,"user":"ann \"x\"","amount":12.5,"status":"PAID"}`
	docV2 := `{"id":2, "user":"bob","amount":3,"channel":"app"}`
	r1 := jsonWire(t, cl, "j-value", orderV1, docV1)
	r2 := jsonWire(t, cl, "j-value", orderV2, docV2)
	// The same document under v1's id: v1 is closed, channel is unknown.
	r2as1 := append(append([]byte{}, r1[:5]...), docV2...)
	d := NewJSONDecoder(cl, nil)
	for _, c := range []struct {
		in   []byte
		want string
	}{{r1, docV1}, {r2, docV2}, {r1, docV1}} {
		js, err := d.Payload(ctx, c.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(js) != c.want {
			t.Fatalf("got %s, want %s", js, c.want)
		}
	}
	_, err := d.Payload(ctx, r2as1)
	var bd *BadDataError
	if !errors.As(err, &bd) || bd.Reason != "json-schema-invalid" || !strings.Contains(err.Error(), "channel") {
		t.Fatalf("v2's field under v1's id: %v, want json-schema-invalid naming channel", err)
	}
	if len(d.schemas) != 2 {
		t.Fatalf("%d schemas cached, want 2 (one per id)", len(d.schemas))
	}
}

// Every kind of bad record is bad data with its reason, and the
// validator's first error on one line.
func TestJSONSchemaBadRecordsAreBadDataWithTheirReason(t *testing.T) {
	cl := fake(t)
	ctx := context.Background()
	good := jsonWire(t, cl, "jb-value", orderV1, `{"id":1,"user":"u","amount":1}`)
	avroID := wire(t, cl, "jb-avro-value", v1, map[string]any{"id": int64(1), "user": "u", "amount": 1.0, "status": "NEW", "note": nil})
	under := func(doc string) []byte { return append(append([]byte{}, good[:5]...), doc...) }
	d := NewJSONDecoder(cl, nil)
	s, err := CompileJSONSchema("out", orderV1)
	if err != nil {
		t.Fatal(err)
	}
	e := NewJSONEncoder(s)
	if err := e.Register(ctx, cl, "jb-out"); err != nil {
		t.Fatal(err)
	}
	dec := func(b []byte) func() error {
		return func() error { _, err := d.Payload(ctx, b); return err }
	}
	enc := func(doc string) func() error {
		return func() error { _, err := e.Append(nil, "jb-out", []byte(doc)); return err }
	}
	for name, c := range map[string]struct {
		err    func() error
		reason string
		msg    string
	}{
		"plain json":   {dec([]byte(`{"id":1}`)), "wire-format", "first byte is 0x7b"},
		"short":        {dec([]byte{0, 0}), "wire-format", "2 bytes"},
		"empty":        {dec(nil), "wire-format", "0 bytes"},
		"not json":     {dec(under(`{"id":1,`)), "json-schema-invalid", "not JSON"},
		"trailing":     {dec(under(`{"id":1} x`)), "json-schema-invalid", "not JSON"},
		"missing":      {dec(under(`{"id":1,"user":"u"}`)), "json-schema-invalid", `missing property 'amount'`},
		"type":         {dec(under(`{"id":"1","user":"u","amount":1}`)), "json-schema-invalid", `at '/id': got string, want integer`},
		"minimum":      {dec(under(`{"id":1,"user":"u","amount":-1}`)), "json-schema-invalid", `at '/amount'`},
		"two errors":   {dec(under(`{"id":1.5,"user":2,"amount":1}`)), "json-schema-invalid", `at '/id': got number, want integer (and 1 more)`},
		"avro schema":  {dec(avroID), "json-schema-invalid", "a AVRO schema, not JSON"},
		"enc missing":  {enc(`{"id":1}`), "json-schema-encode", "missing properties 'user', 'amount'"},
		"enc symbol":   {enc(`{"id":1,"user":"u","amount":1,"status":"GONE"}`), "json-schema-encode", "at '/status'"},
		"enc not json": {enc(`{"id":`), "json-schema-encode", "not JSON"},
	} {
		err := c.err()
		var bd *BadDataError
		if !errors.As(err, &bd) || bd.Reason != c.reason || !strings.Contains(err.Error(), c.msg) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line, a BadDataError %s saying %q", name, err, c.reason, c.msg)
		}
	}
	// A valid output is the header and the JSON as it was.
	out, err := e.Append([]byte("x"), "jb-out", []byte(`{"id":1,"user":"u","amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if id, _, _ := splitHeader(out[1:]); string(out[6:]) != `{"id":1,"user":"u","amount":1}` || id != e.ids["jb-out"] || out[0] != 'x' {
		t.Fatalf("encoded %q", out)
	}
}

// A schema file that is not JSON, or not a schema, is refused in one line;
// a $ref to anything outside the schema loads nothing.
func TestCompileJSONSchemaRefusesBadSchemas(t *testing.T) {
	for text, want := range map[string]string{
		`{"type":"object"`:                           "not JSON",
		`{"type":"objekt"}`:                          "not a valid JSON Schema: at '/type'",
		`{"type":"object","minProperties":"two"}`:    "minProperties",
		`{"$ref":"file:///etc/passwd"}`:              "file:///etc/passwd",
		`{"properties":{"a":{"$ref":"#/$defs/no"}}}`: "no",
		`{"$ref":"http://example.com/schema.json"}`:  "example.com",
	} {
		_, err := CompileJSONSchema("x.json", text)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line naming %q", text, err, want)
		}
	}
}

// A new schema id while the registry is down is retried until the context
// ends, never bad data.
func TestJSONSchemaUnreachableRegistryIsRetriedNotBadData(t *testing.T) {
	cl, err := NewClient(Registry{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700_000_000)
	defer cancel()
	_, err = NewJSONDecoder(cl, nil).Payload(ctx, []byte{0, 0, 0, 0, 9, '{', '}'})
	var bd *BadDataError
	if errors.As(err, &bd) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("got %v, want unreachable after retrying", err)
	}
}
