package topologies

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// The dedup topology on Avro, Protobuf and JSON Schema inputs (one through
// its repartition topic): the key is a field of the decoded record, and
// each record that passes goes to the output as it came, in the wire
// format, byte for byte (dedup passes records unchanged, whatever their
// format; before, the output was the JSON they were decoded to); every
// distinct key passes exactly once through aborted transactions, read
// read_committed; a record that is not in the wire format is dead-lettered
// as wire-format; nothing else.
func TestDedupOnWireFormatsPassesEachKeyOnceUnchanged(t *testing.T) {
	cl, reg := registryClient(t)
	for _, c := range []struct {
		format      string
		repartition bool
		writer      func(subject string) wireWriter
	}{
		{"avro", false, func(s string) wireWriter { return registerAvro(t, cl, s, "examples/order.avsc") }},
		{"protobuf", true, func(s string) wireWriter { return registerProto(t, cl, s, "examples/order.proto", "") }},
		{"json-schema", false, func(s string) wireWriter {
			return jsonSchemaWriter(registerJSONSchema(t, cl, s, "examples/order.schema.json"))
		}},
	} {
		t.Run(c.format, func(t *testing.T) { dedupOnWireFormat(t, cl, reg, c.format, c.repartition, c.writer) })
	}
}

func dedupOnWireFormat(t *testing.T, cl *sr.Client, reg SchemaRegistry, format string, repartition bool, writer func(string) wireWriter) {
	e := newTEnv(t)
	app := "dd-" + format + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	w := writer(wireformat.Subject(app + "-in"))
	rng := rand.New(rand.NewPCG(5, 6))
	var rs []*kgo.Record
	seqOf := map[string]int{} // each input value (unique: pad is its index) and its seq
	for seq := range 600 {
		for range 1 + rng.IntN(3) {
			v := map[string]any{"seq": int64(seq), "ts": int64(1_700_000_000_000 + len(rs)), "user": datagen.User(int64(seq)), "amount": 12.5, "pad": strconv.Itoa(len(rs))}
			key := strconv.Itoa(seq)
			if repartition {
				key = strconv.Itoa(len(rs)) // the repeats of a seq in any partition
			}
			rs = append(rs, &kgo.Record{Key: []byte(key), Value: w.encode(t, v)})
			seqOf[string(rs[len(rs)-1].Value)] = seq
		}
	}
	rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	rs = append(rs, &kgo.Record{Key: []byte("json"), Value: []byte(`{"seq":1}`)})
	cfg := writeConfig(t, app+".yaml", "topology: dedup\nkey: seq\nretention: 24h\ntime: ts\nrepartition: "+strconv.FormatBool(repartition)+"\nformat: {input: "+format+"}\n")
	tr, err := topologyFor("dedup").New(Options{Config: cfg, Output: app + "-out", SchemaRegistry: reg})
	if err != nil {
		t.Fatal(err)
	}
	var internal []string
	if repartition {
		internal = []string{app + "-seen-repartition"}
	}
	e.topic(app+"-in", 3)
	e.run(app, "dedup", tr, app+"-in", app+"-out", internal, func(c *pipeline.Config) {
		aborting(e, 0.2)
		c.MaxTxnRecords = 50
	}, func() { e.produce(app+"-in", 3, rs) })
	seen := map[int]bool{}
	for _, r := range e.read(app + "-out") {
		seq, ok := seqOf[string(r.Value)]
		if !ok {
			t.Fatalf("output value %q is none of the input records: dedup must pass them unchanged", r.Value)
		}
		if seen[seq] {
			t.Fatalf("seq %d passed twice", seq)
		}
		seen[seq] = true
	}
	if len(seen) != 600 {
		t.Fatalf("%d keys passed, want 600", len(seen))
	}
	dl := e.deadLetters(app+"-dlq", "dedup", app+"-in")
	if len(dl) != 1 {
		t.Fatalf("dead letters %v, want the one JSON record as wire-format", dl)
	}
	for _, reason := range dl {
		if reason != "wire-format" {
			t.Fatalf("dead letter reason %q, want wire-format", reason)
		}
	}
}
