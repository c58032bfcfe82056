package topologies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/buger/jsonparser"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/valyala/fastjson"
)

// This file holds the evidence behind keeping the hand-written scanner in
// jsonobj.go instead of github.com/valyala/fastjson or
// github.com/buger/jsonparser (issue 16 step 7; the figures and the decision
// are in BENCHMARKS.md): a benchmark of the aggregate's per-record JSON work
// done by each, and a comparison of what each accepts against encoding/json,
// whose verdicts the topologies' dead letters follow.

// hotFields are the fields the aggregate of BenchmarkAggregateStageOne reads
// from every record: its group_by, its time and its summed value.
var hotFields = []string{"user", "ts", "amount"}

// fieldReader does what env.load does per record for an aggregate: check
// that b is one JSON object, find each of hotFields and decode it into the
// value an expression sees (a string, an int for an integer, else a float64).
// A non-nil error is what the topology would dead-letter.
type fieldReader interface {
	read(b []byte, dst []any) error
}

// scannerReader is the code the topologies run: jsonObject and decodeJSON.
type scannerReader struct{ o jsonObject }

func (r *scannerReader) read(b []byte, dst []any) error {
	if err := r.o.parse(b); err != nil {
		return err
	}
	for i, f := range hotFields {
		raw, ok := r.o.get(f)
		if !ok {
			return fmt.Errorf("field %q is missing", f)
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return fmt.Errorf("field %q: %w", f, err)
		}
		dst[i] = v
	}
	return nil
}

// fastjsonReader parses with a reused fastjson.Parser, as its documentation
// recommends for speed. With validate it first runs fastjson.ValidateBytes,
// which checks the grammar Parser.ParseBytes leaves alone (numbers, escapes,
// control characters); that is a second pass over the record.
type fastjsonReader struct {
	p        fastjson.Parser
	validate bool
	num      []byte // a number's raw JSON, reused
}

func (r *fastjsonReader) read(b []byte, dst []any) error {
	if r.validate {
		if err := fastjson.ValidateBytes(b); err != nil {
			return err
		}
	}
	v, err := r.p.ParseBytes(b)
	if err != nil {
		return err
	}
	o, err := v.Object()
	if err != nil {
		return err
	}
	for i, f := range hotFields {
		fv := o.Get(f)
		if fv == nil {
			return fmt.Errorf("field %q is missing", f)
		}
		switch fv.Type() {
		case fastjson.TypeString:
			dst[i] = string(fv.GetStringBytes())
		case fastjson.TypeNumber:
			// Int on a fraction fails with an allocated error: look first.
			r.num = fv.MarshalTo(r.num[:0])
			var err error
			if isJSONInt(r.num) {
				dst[i], err = fv.Int()
			} else {
				dst[i], err = fv.Float64()
			}
			if err != nil {
				return fmt.Errorf("field %q: %w", f, err)
			}
		default:
			return fmt.Errorf("field %q: %s, not handled in this benchmark", f, fv.Type())
		}
	}
	return nil
}

// jsonparserReader finds the fields in one pass with jsonparser.EachKey.
// jsonparser validates only what it walks through to reach them: it has no
// way to check the rest of a record.
type jsonparserReader struct {
	paths [][]string
	dst   []any
	err   error
	found int
	cb    func(int, []byte, jsonparser.ValueType, error)
}

func newJSONParserReader() *jsonparserReader {
	r := &jsonparserReader{}
	for _, f := range hotFields {
		r.paths = append(r.paths, []string{f})
	}
	r.cb = func(i int, raw []byte, t jsonparser.ValueType, err error) {
		if err != nil || r.err != nil {
			r.err = cmpErr(r.err, err)
			return
		}
		r.found++
		switch t {
		case jsonparser.String:
			s, err := jsonparser.ParseString(raw)
			r.dst[i], r.err = s, err
		case jsonparser.Number:
			if isJSONInt(raw) {
				n, err := jsonparser.ParseInt(raw)
				r.dst[i], r.err = int(n), err
			} else {
				r.dst[i], r.err = jsonparser.ParseFloat(raw)
			}
		default:
			r.err = fmt.Errorf("field %q: %s, not handled in this benchmark", hotFields[i], t)
		}
	}
	return r
}

// isJSONInt reports whether a JSON number has neither a fraction nor an
// exponent, as decodeJSON decides between int and float64.
func isJSONInt(raw []byte) bool { return !bytes.ContainsAny(raw, ".eE") }

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (r *jsonparserReader) read(b []byte, dst []any) error {
	r.dst, r.err, r.found = dst, nil, 0
	jsonparser.EachKey(b, r.cb, r.paths...)
	if r.err != nil {
		return r.err
	}
	if r.found != len(hotFields) {
		return errors.New("a field is missing")
	}
	return nil
}

var jsonReaders = []struct {
	name string
	new  func() fieldReader
}{
	{"scanner", func() fieldReader { return &scannerReader{} }},
	{"fastjson", func() fieldReader { return &fastjsonReader{} }},
	{"fastjson+validate", func() fieldReader { return &fastjsonReader{validate: true} }},
	{"jsonparser", func() fieldReader { return newJSONParserReader() }},
}

// BenchmarkJSONHotPath is the aggregate's per-record JSON work (see
// fieldReader) over 1024 datagen records of each size, for the scanner and
// each library. Run it interleaved and compare medians:
//
//	go test ./topologies -run '^$' -bench JSONHotPath -benchmem -count 6 | tee /tmp/json.txt
//	benchstat -col /lib /tmp/json.txt
func BenchmarkJSONHotPath(b *testing.B) {
	for _, size := range []int{100, 1024} {
		recs := make([][]byte, 1024)
		for i := range recs {
			recs[i] = datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), size)
		}
		for _, lib := range jsonReaders {
			b.Run(fmt.Sprintf("size=%d/lib=%s", size, lib.name), func(b *testing.B) {
				r := lib.new()
				dst := make([]any, len(hotFields))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if err := r.read(recs[i%len(recs)], dst); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkJSONHotPathCPU is BenchmarkJSONHotPath measured for a loaded
// machine: each op is one round in which every reader, in turn (the order
// rotating from round to round), reads the same 4096 records, and each
// reader's cost is the CPU time its thread used, not wall time, reported as
// cpu-ns/rec-<reader>. Interleaving puts every reader under the same load;
// thread CPU time leaves out the time the thread waited for a core.
//
//	go test ./topologies -run '^$' -bench JSONHotPathCPU -benchtime 20x -count 6 | tee /tmp/jsoncpu.txt
//	benchstat /tmp/jsoncpu.txt
func BenchmarkJSONHotPathCPU(b *testing.B) {
	if _, ok := threadCPU(); !ok {
		b.Skip("no per-thread CPU clock here")
	}
	const n = 4096
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			recs := make([][]byte, n)
			for i := range recs {
				recs[i] = datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), size)
			}
			readers := make([]fieldReader, len(jsonReaders))
			for i, lib := range jsonReaders {
				readers[i] = lib.new()
			}
			dst := make([]any, len(hotFields))
			spent := make([]time.Duration, len(readers))
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rounds := 0
			for b.Loop() {
				for k := range readers {
					j := (k + rounds) % len(readers)
					start, _ := threadCPU()
					for _, rec := range recs {
						if err := readers[j].read(rec, dst); err != nil {
							b.Fatal(err)
						}
					}
					end, _ := threadCPU()
					spent[j] += end - start
				}
				rounds++
			}
			for i, lib := range jsonReaders {
				b.ReportMetric(float64(spent[i].Nanoseconds())/float64(rounds*n), "cpu-ns/rec-"+lib.name)
			}
			b.ReportMetric(0, "ns/op") // a round's wall time says nothing here
		})
	}
}

// expectedRead is what the topologies must do with b: dead-letter it
// (error) when encoding/json finds it invalid, not an object, lacking a hot
// field or holding one it cannot decode (1e999); otherwise see the last
// occurrence of each field, as encoding/json does.
func expectedRead(b []byte) ([]any, error) {
	if !json.Valid(b) {
		return nil, errors.New("invalid")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := make([]any, len(hotFields))
	for i, f := range hotFields {
		raw, ok := m[f]
		if !ok {
			return nil, errors.New("missing")
		}
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sameValues compares a reader's values with encoding/json's, which decodes
// every number as a float64.
func sameValues(got, want []any) bool {
	for i := range want {
		g := got[i]
		if n, ok := g.(int); ok {
			g = float64(n)
		}
		if !reflect.DeepEqual(g, want[i]) {
			return false
		}
	}
	return true
}

// jsonEdgeCases are the inputs on which the libraries' and encoding/json's
// verdicts can part, each with the hot fields so that only the named
// property is in question.
var jsonEdgeCases = []struct{ name, json string }{
	{"valid", `{"user":"u1","ts":1700000000000,"amount":12.5}`},
	{"duplicate key", `{"user":"u1","ts":1,"amount":1,"amount":2}`},
	{"1e999", `{"user":"u1","ts":1,"amount":1e999}`},
	{"NaN", `{"user":"u1","ts":1,"amount":NaN}`},
	{"Infinity", `{"user":"u1","ts":1,"amount":-Inf}`},
	{"leading zero", `{"user":"u1","ts":01,"amount":1}`},
	{"1.", `{"user":"u1","ts":1,"amount":1.}`},
	{"bad escape", `{"user":"u\x","ts":1,"amount":1}`},
	{"control char", "{\"user\":\"u\x01\",\"ts\":1,\"amount\":1}"},
	{"invalid UTF-8", "{\"user\":\"u\xff\",\"ts\":1,\"amount\":1}"},
	{"trailing data", `{"user":"u1","ts":1,"amount":1}x`},
	{"broken after fields", `{"user":"u1","ts":1,"amount":1,"pad":tru}`},
	{"unterminated", `{"user":"u1","ts":1,"amount":1,"pad":"xx`},
	{"missing comma", `{"user":"u1" "ts":1,"amount":1}`},
	{"depth 301", `{"user":"u1","ts":1,"amount":1,"d":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`},
	{"depth 1001", `{"user":"u1","ts":1,"amount":1,"d":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`},
}

// TestJSONLibrariesAgainstEncodingJSON compares each reader's verdict and
// values with encoding/json's on jsonEdgeCases, the fuzz seeds and 20,000
// corrupted datagen records (those of
// TestJSONObjectScannerAgreesWithEncodingJSON). It fails only if the
// scanner, the code the topologies run, disagrees; it logs the libraries'
// disagreements, the correctness half of the decision in BENCHMARKS.md:
//
//	go test ./topologies -run JSONLibrariesAgainstEncodingJSON -v
func TestJSONLibrariesAgainstEncodingJSON(t *testing.T) {
	var corpus [][]byte
	for _, s := range jsonSeeds {
		corpus = append(corpus, []byte(s))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte(`{}[]":,.-+eE0123456789 tfnulr\x"`)
	for i := range 20000 {
		b := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000), 60+i%50)
		for range 1 + rng.IntN(2) {
			b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		}
		corpus = append(corpus, b)
	}

	// verdict is one reader's outcome on one input against encoding/json's.
	verdict := func(r fieldReader, b []byte) string {
		got := make([]any, len(hotFields))
		err := r.read(b, got)
		want, wantErr := expectedRead(b)
		switch {
		case err != nil && wantErr != nil:
			return "rejects, ok"
		case err == nil && wantErr != nil:
			return "ACCEPTS " + fmt.Sprint(got)
		case err != nil:
			return "REJECTS valid"
		case !sameValues(got, want):
			return fmt.Sprintf("WRONG %v, want %v", got, want)
		}
		return "ok"
	}
	for _, lib := range jsonReaders {
		r := lib.new()
		accepts, rejects, wrong := 0, 0, 0
		var examples []string
		for _, b := range corpus {
			v := verdict(r, b)
			switch {
			case strings.HasPrefix(v, "ACCEPTS"):
				accepts++
			case strings.HasPrefix(v, "REJECTS"):
				rejects++
			case strings.HasPrefix(v, "WRONG"):
				wrong++
			default:
				continue
			}
			if len(examples) < 3 {
				examples = append(examples, fmt.Sprintf("%q: %s", b, v))
			}
		}
		t.Logf("%-18s on %d inputs: accepts %d invalid, rejects %d valid, wrong values on %d; e.g. %v", lib.name, len(corpus), accepts, rejects, wrong, examples)
		if lib.name == "scanner" && accepts+rejects+wrong > 0 {
			t.Errorf("the scanner disagrees with encoding/json: %v", examples)
		}
	}
	for _, c := range jsonEdgeCases {
		line := fmt.Sprintf("%-20s", c.name)
		for _, lib := range jsonReaders {
			v := verdict(lib.new(), []byte(c.json))
			line += fmt.Sprintf(" | %s: %s", lib.name, v)
			// The scanner stops at depth 1000 (maxJSONDepth), encoding/json at 10,000.
			if lib.name == "scanner" && v != "ok" && v != "rejects, ok" && c.name != "depth 1001" {
				t.Errorf("%s: the scanner: %s", c.name, v)
			}
		}
		t.Log(line)
	}
}
