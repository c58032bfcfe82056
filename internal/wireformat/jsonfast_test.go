package wireformat

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/valyala/fastjson"
)

// bounds exercises every keyword the fast plan follows.
const bounds = `{"type": "object", "required": ["n"],
 "properties": {
  "n": {"type": "integer", "minimum": 0, "maximum": 100},
  "x": {"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 2.5},
  "s": {"type": ["string", "null"], "minLength": 1, "maxLength": 3},
  "e": {"enum": ["NEW", "big", "ü"]},
  "b": {"type": "boolean"},
  "any": {}}}`

// The fast plan answers only "certainly valid": on random documents (types
// mixed, bounds hit exactly, duplicates, escapes, huge and tiny numbers,
// fields missing and unknown) it never accepts one the validator refuses,
// and it does accept most valid ones (else it would be no faster).
func TestJSONSchemaFastPathNeverAcceptsWhatTheValidatorRefuses(t *testing.T) {
	clean, err := os.ReadFile("../../topologies/examples/order-clean.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	values := []string{`null`, `true`, `false`, `0`, `-0`, `0.0`, `1`, `1.0`, `1e2`, `-5`, `2.5`, `-1.5`, `100`, `100.0`,
		`101`, `1e400`, `-1e400`, `1e-400`, `-1e-400`, `9007199254740993`, `3`, `12.3`, `"NEW"`, `"big"`, `"normal"`,
		`""`, `"ü"`, `"\u00fc"`, `"abc"`, `"abcd"`, `"a\"b"`, `"user-07"`, `[]`, `[1]`, `{}`, `{"a":1}`}
	for _, c := range []struct {
		name, schema string
		base         [][2]string // a valid document's fields, mutated below
	}{
		{"order", datagen.JSONSchema, [][2]string{{"seq", "1"}, {"ts", "17"}, {"user", `"user-07"`}, {"amount", "12.3"}, {"pad", `"xx"`}}},
		{"order-clean", string(clean), [][2]string{{"seq", "1"}, {"ts", "17"}, {"user", `"u"`}, {"amount", "12.3"}, {"cents", "1230"}, {"size", `"normal"`}}},
		{"bounds", bounds, [][2]string{{"n", "3"}, {"x", "0.5"}, {"s", `"ab"`}, {"e", `"NEW"`}, {"b", "true"}, {"any", "[1]"}}},
	} {
		s, err := CompileJSONSchema(c.name, c.schema)
		if err != nil {
			t.Fatal(err)
		}
		if s.fast == nil {
			t.Fatalf("%s: no fast plan", c.name)
		}
		var keys []string
		for k := range s.fast.props {
			keys = append(keys, k)
		}
		keys = append(keys, "extra", "Seq")
		rng := rand.New(rand.NewPCG(7, uint64(len(c.name))))
		var p fastjson.Parser
		fastValid, valid := 0, 0
		for range 20000 {
			fields := append([][2]string{}, c.base...)
			for range rng.IntN(4) {
				switch i := rng.IntN(len(fields)); rng.IntN(4) {
				case 0: // a field set to another value
					fields[i][1] = values[rng.IntN(len(values))]
				case 1: // a field gone
					fields = append(fields[:i], fields[i+1:]...)
				case 2: // a field repeated, with another value
					fields = append(fields, [2]string{fields[i][0], values[rng.IntN(len(values))]})
				default: // a field added
					fields = append(fields, [2]string{keys[rng.IntN(len(keys))], values[rng.IntN(len(values))]})
				}
				if len(fields) == 0 {
					break
				}
			}
			var b strings.Builder
			b.WriteByte('{')
			for i, f := range fields {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`"` + f[0] + `":` + f[1])
			}
			b.WriteByte('}')
			doc := b.String()
			v, err := p.Parse(doc)
			if err != nil {
				t.Fatal(err)
			}
			fast := s.fast.valid(v)
			full := s.s.Validate(value(v)) == nil
			if fast && !full {
				t.Fatalf("%s: the fast plan accepts %s, which the validator refuses: %v", c.name, doc, firstError(s.s.Validate(value(v))))
			}
			if full {
				valid++
			}
			if fast {
				fastValid++
			}
		}
		t.Logf("%s: %d valid documents of 20000, %d of them accepted by the fast plan", c.name, valid, fastValid)
		if valid == 0 || fastValid < valid/3 {
			t.Fatalf("%s: the fast plan accepted %d of %d valid documents", c.name, fastValid, valid)
		}
	}
}

// A schema with any keyword the fast plan does not follow gets none: the
// validator judges every document.
func TestJSONSchemaFastPathOnlyForFlatObjects(t *testing.T) {
	for _, text := range []string{
		`{"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}`,
		`{"type": "object", "properties": {"a": {"type": "string", "format": "date-time"}}}`,
		`{"type": "object", "properties": {"a": {"type": "object"}}}`,
		`{"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}`,
		`{"type": "object", "properties": {"a": {"enum": [1, 2]}}}`,
		`{"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}, "definitions": {"x": {"type": "string"}}}`,
		`{"type": "object", "allOf": [{"required": ["a"]}]}`,
		`{"type": "object", "patternProperties": {"^x": {"type": "string"}}}`,
		`{"type": "object", "additionalProperties": {"type": "string"}}`,
		`{"type": "object", "minProperties": 1}`,
		`{"properties": {"a": {"type": "string"}}}`,
		`{"type": ["object", "null"]}`,
	} {
		s, err := CompileJSONSchema("x", text)
		if err != nil {
			t.Fatal(err)
		}
		if s.fast != nil {
			t.Errorf("%s: a fast plan", text)
		}
	}
}
