package topologies

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
)

var jsonSeeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+3,"b":"x\"y\\u00e9\n","c":[1,{"d":null}],"e":true,"f":false}`,
	`{"a":1,"a":2}`, `{"é":"ü"}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":"\x"}`,
	`{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1]`, `"s"`, `1`, `null`, ``, `{"a":1}x`,
	`{"a":[1,2,]}`, `{"a":{"b":}}`, `{"a":tru}`, `{"a":nul}`, `{"a":[}`, `{"a":"unterminated}`, `{"a":1}}`,
	`{"a":"\ud83d\ude00"}`, `{"a":123456789012345678901234567890}`,
}

// The scanner accepts exactly the JSON objects encoding/json accepts, and
// every field's raw value decodes to what encoding/json decodes. o is reused
// from call to call, as a topology reuses it from record to record, so that
// field names remembered from earlier objects are checked too.
func checkJSONObject(t *testing.T, o *jsonObject, b []byte) {
	err := o.parse(b)
	valid := json.Valid(b) && bytes.HasPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("{"))
	if (err == nil) != valid {
		t.Fatalf("%q: scanner says %v, encoding/json says valid=%v", b, err, valid)
	}
	var want map[string]any
	if err != nil || json.Unmarshal(b, &want) != nil {
		return // e.g. a number out of float64's range: decodeJSON fails on it too
	}
	for k, v := range want {
		raw, ok := o.get(k)
		if !ok {
			t.Fatalf("%q: field %q not found", b, k)
		}
		var got any
		if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, v) {
			t.Fatalf("%q: field %q raw %q decodes to %v (%v), want %v", b, k, raw, got, err, v)
		}
		d, err := decodeJSON(raw)
		if err != nil {
			t.Fatalf("%q: decodeJSON(%q): %v", b, raw, err)
		}
		if f, ok := v.(float64); ok {
			switch x := d.(type) {
			case int:
				if float64(x) != f {
					t.Fatalf("%q: %q decoded to int %d, want %v", b, raw, x, f)
				}
			case float64:
				if x != f {
					t.Fatalf("%q: %q decoded to %v, want %v", b, raw, x, f)
				}
			}
		} else if !reflect.DeepEqual(d, v) {
			t.Fatalf("%q: decodeJSON(%q) = %v, want %v", b, raw, d, v)
		}
	}
}

func TestJSONObjectScannerAgreesWithEncodingJSON(t *testing.T) {
	var o jsonObject
	for _, s := range jsonSeeds {
		checkJSONObject(t, &o, []byte(s))
	}
	// Random single-byte corruptions of real records.
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]":,.-+eE0123456789 tfnulr\x"`)
	for i := range 20000 {
		b := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000), 60+i%50)
		for range 1 + rng.IntN(2) {
			b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		}
		checkJSONObject(t, &o, b)
	}
}

func FuzzJSONObject(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	var o jsonObject
	f.Fuzz(func(t *testing.T, b []byte) { checkJSONObject(t, &o, b) })
}

func TestEncodeJSONMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{nil, "plain", "quote\" and \\ and \n and é and <>&", true, 12, -3, 0.1, 12.5, 1e21, 1e-7, 123456789.0, 0.0} {
		got, err := encodeJSON(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		want, _ := json.Marshal(v)
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("encodeJSON(%v) = %s, encoding/json %s", v, got, want)
		}
	}
}

// skipPlain's eight-bytes-at-a-time test finds the same byte as a plain
// loop, at every offset, with the special bytes among the ones most likely
// to confuse it (0x80 and up, 0x1f/0x20, neighbours of '"' and '\\').
func TestSkipPlainAgreesWithALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{'a', ' ', 0x1f, 0x20, 0x21, '"', '#', '[', '\\', ']', 0x7f, 0x80, 0xa2, 0xdc, 0xff, 0x00, 0x01}
	for range 100000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = 'x'
			if rng.IntN(6) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		j := 0
		if len(b) > 0 {
			j = rng.IntN(len(b))
		}
		want := j
		for want < len(b) && b[want] >= 0x20 && b[want] != '"' && b[want] != '\\' {
			want++
		}
		if got := skipPlain(b, j); got != want {
			t.Fatalf("skipPlain(%q, %d) = %d, want %d", b, j, got, want)
		}
	}
}
