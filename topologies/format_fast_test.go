package topologies

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

type recording struct{ outs []pipeline.Output }

func (r *recording) Emit(o pipeline.Output) { r.outs = append(r.outs, o) }

// TestAvroETLFastPathMatchesTheJSONPath: an etl reading and writing Avro
// gives, record for record, the same outputs (topic, key, bytes) and the
// same dead letters (reason and message) on its fast path as on the path
// through JSON text, for configurations that map, project, drop, filter,
// route, fail expressions and write values the output schema refuses, on
// datagen orders and on orders with edge values.
func TestAvroETLFastPathMatchesTheJSONPath(t *testing.T) {
	fake := srfake.New()
	t.Cleanup(fake.Close)
	reg := SchemaRegistry{URL: fake.URL()}
	ex, err := filepath.Abs("examples")
	if err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("topology: etl\nformat:\n  input: avro\n  output: avro\n  output_schema: %s/order-clean.avsc\n", ex)
	configs := map[string]string{
		"example": "examples/etl-avro.yaml",
		"project": head + `project:
  seq: seq
  ts: ts
  user: user
  amount: amount
  cents: 'seq % 11 == 0 ? "x" : int(amount * 100)'
  size: 'amount > 95 ? "huge" : amount >= 50 ? "big" : "normal"'
route: 'amount > 90 ? "big" : ""'
outputs:
  big: fast-big
`,
		"missing": head + "project:\n  user: user\n  size: '\"big\"'\nkey: seq\n",
		"errors": head + `filter: seq % 13 != 4 || int(user) > 0
map:
  cents: 'seq % 9 == 0 ? amount / 0.0 * 0.0 : seq % 7 == 0 ? amount : seq'
  size: 'seq % 2 == 0 ? "big" : "normal"'
drop: [pad]
key: 'seq % 3 == 0 ? nil : seq % 3 == 1 ? user : amount'
`,
		"copy":    "topology: etl\nformat:\n  input: avro\n  output: avro\n  output_schema: " + ex + "/order.avsc\nfilter: amount >= 10\n",
		"default": "topology: etl\nformat:\n  input: avro\n  output: avro\n  output_schema: " + ex + "/order.avsc\ndrop: [pad]\nmap:\n  seq: ts\n",
	}
	cl, err := wireformat.NewClient(wireformat.Registry{URL: reg.URL})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := wireformat.NewAvroEncoder(must(wireformat.ParseSchema(datagen.AvroSchema)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := enc.Register(ctx, cl, "fast-in"); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(26, 9))
	var inputs [][]byte
	for i := range 600 {
		js := datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), 100)
		if i%4 == 0 { // edge values: integral, huge, tiny, negative amounts; odd users
			js = fmt.Appendf(nil, `{"seq":%d,"ts":%d,"user":%q,"amount":%v,"pad":""}`, i, -i,
				[]string{"u1", "", "é\"\\\n", "u" + fmt.Sprint(rng.Int64())}[rng.IntN(4)],
				[]float64{42, 1e20, 1e-9, -3.5, 9.5, 90.000001, 1 << 60}[rng.IntN(7)])
		}
		v, err := enc.Append(nil, "fast-in", js)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, v)
	}
	for name, file := range configs {
		if strings.HasPrefix(file, "topology:") {
			path := filepath.Join(t.TempDir(), "etl.yaml")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			file = path
		}
		o := Options{Config: file, Output: "fast-out-" + name, SchemaRegistry: reg}
		fast, slow := must(topologyFor("etl").New(o)).(*formatted), must(topologyFor("etl").New(o)).(*formatted)
		if fast.fast == nil {
			t.Fatalf("%s: no fast path", name)
		}
		slow.fast = nil
		taken := 0
		for i, v := range inputs {
			in := pipeline.Record{Topic: "fast-in", Partition: 1, Offset: int64(i), Key: []byte("k"), Value: v, Timestamp: time.UnixMilli(int64(i))}
			var a, b recording
			if i > 0 { // the first record of an id takes the JSON path: it fetches the schema
				if done, _ := fast.fast.process(&in, &recording{}); done {
					taken++
				}
			}
			errA, errB := fast.Process(ctx, &in, &a), slow.Process(ctx, &in, &b)
			if fmt.Sprint(errA) != fmt.Sprint(errB) || reason(errA) != reason(errB) {
				t.Fatalf("%s: record %d: fast path %v (%s), JSON path %v (%s)", name, i, errA, reason(errA), errB, reason(errB))
			}
			if fmt.Sprintf("%q", a.outs) != fmt.Sprintf("%q", b.outs) {
				t.Fatalf("%s: record %d: fast path emits %q, JSON path %q", name, i, a.outs, b.outs)
			}
		}
		if taken < len(inputs)/2 {
			t.Fatalf("%s: the fast path took %d of %d records", name, taken, len(inputs))
		}
	}
}

func reason(err error) string {
	var dl *pipeline.DeadLetterError
	if errors.As(err, &dl) {
		return dl.Reason
	}
	return ""
}
