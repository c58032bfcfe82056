package topologies

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// poison are records no topology can handle, with the dead-letter reason
// each must get from the etl example config (filter: amount >= 10, ...).
var poison = []struct{ value, reason string }{
	{`not json at all`, "malformed-json"},
	{`[1, 2, 3]`, "malformed-json"},
	{`{"seq": 1, "user": "u", "amount": 5`, "malformed-json"},
	{``, "malformed-json"},
	{`{"seq": 2, "ts": 1, "user": "u"}`, "missing-field"},
	{`{"seq": 3, "ts": 1, "user": "u", "amount": "lots"}`, "expression-error"},
	{`{"seq": 4, "ts": 1, "user": "u", "amount": 1e999}`, "malformed-json"},
}

// orders builds n datagen records with a poison pill every 97th.
func orders(n int) (rs []*kgo.Record, bad map[int]string) {
	bad = map[int]string{}
	ts := time.UnixMilli(1_700_000_000_000)
	for i := range n {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: datagen.Value(int64(i), ts.Add(time.Duration(i)*time.Millisecond), 100)}
		if i%97 == 13 {
			p := poison[(i/97)%len(poison)]
			r.Value, bad[i] = []byte(p.value), p.reason
		}
		rs = append(rs, r)
	}
	return rs, bad
}

// The etl example (filter, map, drop, key, route) produces exactly what a
// reference computed here from the same input says, through aborted
// transactions: every kept record once, in the right topic, with the right
// key and fields in the right order; every poison pill in the dead-letter
// topic once, with its reason and source; nothing else.
func TestETLMatchesReferenceAndDeadLettersPoison(t *testing.T) {
	const n = 20_000
	e := newTEnv(t)
	in, bad := orders(n)
	tr, err := NewETL("examples/etl-big-orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.topic("etl-in", 3)
	// At most 500 records a transaction makes at least 40 of them, so
	// P(no abort) = 0.8^40 < 1e-3: on Apache Kafka a worker otherwise
	// consumed the 20,000 records in a handful of transactions, and a run
	// aborted none.
	w := e.run("etl", "etl", tr, "etl-in", "etl-out", nil, func(c *pipeline.Config) { e.abortFraction = 0.2; c.MaxTxnRecords = 500 },
		func() { e.produce("etl-in", 3, in) })
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted; the test needs some")
	}

	type outRec struct {
		topic, key string
		fields     []string
		value      map[string]any
	}
	want := map[string]outRec{} // by source partition/offset
	for i, r := range in {
		if _, ok := bad[i]; ok {
			continue
		}
		v := decode(t, r.Value)
		amount := v["amount"].(float64)
		if amount < 10 {
			continue
		}
		size, topic := "normal", "etl-out"
		if amount >= 90 {
			size, topic = "big", "orders-big"
		}
		want[at(r)] = outRec{topic: topic, key: v["user"].(string), fields: []string{"seq", "ts", "user", "amount", "cents", "size"},
			value: map[string]any{"seq": v["seq"], "ts": v["ts"], "user": v["user"], "amount": v["amount"], "cents": float64(int(math.Round(amount * 100))), "size": size}}
	}
	got := map[string]outRec{}
	for _, topic := range []string{"etl-out", "orders-big"} {
		for _, r := range e.read(topic) {
			src := strings.Split(headers(r)[pipeline.IdempotencyKeyHeader], "/") // etl-in/P/O/0
			k := src[1] + "/" + src[2]
			if _, dup := got[k]; dup {
				t.Fatalf("output of %s written twice", k)
			}
			got[k] = outRec{topic: topic, key: string(r.Key), fields: fieldOrder(t, r.Value), value: decode(t, r.Value)}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d output records, the reference has %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; !reflect.DeepEqual(g, w) {
			t.Fatalf("output of %s:\n got  %+v\n want %+v", k, g, w)
		}
	}
	dl := e.deadLetters("etl-dlq", "etl", "etl-in")
	wantDL := map[string]string{}
	for i, reason := range bad {
		wantDL[at(in[i])] = reason
	}
	if !reflect.DeepEqual(dl, wantDL) {
		t.Fatalf("dead letters %v,\nwant %v", dl, wantDL)
	}
	t.Logf("%d records: %d kept (%d big), %d dead letters; %d commits, %d aborts",
		n, len(want), count(want, func(r outRec) bool { return r.topic == "orders-big" }), len(dl), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}

func count[K comparable, V any](m map[K]V, f func(V) bool) int {
	n := 0
	for _, v := range m {
		if f(v) {
			n++
		}
	}
	return n
}

// fieldOrder returns the top-level field names of a JSON object in order.
func fieldOrder(t *testing.T, b []byte) []string {
	t.Helper()
	var o jsonObject
	if err := o.parse(b); err != nil {
		t.Fatal(err)
	}
	return append([]string(nil), o.keys...)
}

// project outputs exactly its fields in its order; a bare field is copied
// byte for byte; $env reads an optional field; metadata variables work.
func TestETLProjectAndMetadata(t *testing.T) {
	tr, err := NewETL("examples/etl-project.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := &pipeline.Record{Topic: "orders", Partition: 2, Offset: 41, Key: []byte("7"),
		Value: []byte(`{"seq":7,"ts":1,"user":"user-03","amount":12.50,"pad":"xx"}`)}
	var got []pipeline.Output
	if err := tr.Process(t.Context(), in, emitFunc(func(o pipeline.Output) { got = append(got, o) })); err != nil {
		t.Fatal(err)
	}
	want := `{"user":"user-03","amount":12.50,"even":false,"source":"orders/2/41","coupon":"none"}`
	if len(got) != 1 || string(got[0].Value) != want {
		t.Fatalf("got %q, want %s", fmt.Sprint(got), want)
	}
}

type emitFunc func(pipeline.Output)

func (f emitFunc) Emit(o pipeline.Output) { f(o) }
