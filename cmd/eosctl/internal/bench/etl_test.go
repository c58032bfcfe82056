package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// `eosctl bench --topology etl` on the embedded broker with the in-process
// registry: eos drains the JSON backlog and eos-avro its Avro twin, both
// outputs are judged exactly once and value by value, and the table gives
// the ratio and each mode's configuration. Other modes, and eos-avro on
// another topology, are refused before anything runs.
func TestETLBenchJudgesAvroAgainstJSON(t *testing.T) {
	for _, c := range []Config{{Topology: topologyETL, Modes: []Mode{ModeEOS, ModeBaseline}}, {Topology: "passthrough", Modes: []Mode{ModeEOS, ModeEOSAvro}}} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "bench.Config.Modes") {
			t.Fatalf("%s with %v: got %v, want a refusal naming bench.Config.Modes", c.Topology, c.Modes, err)
		}
	}
	cfg := Config{Topology: topologyETL, Intervals: []Interval{{Fixed: 100 * time.Millisecond}}, SchemaRegistry: "fake",
		Sizes: []int{100}, Records: 20_000, Partitions: 3, Repeat: 1, RunTimeout: time.Minute, InProcess: true}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 1 || len(rep.Cells[0].Runs) != 2 {
		t.Fatalf("got %+v, want one cell with an eos and an eos-avro run", rep.Cells)
	}
	for _, r := range rep.Cells[0].Runs {
		if !r.Verified || r.Duplicates != 0 || r.Missing != 0 || r.RPS <= 0 || r.E2ESamples != 0 {
			t.Fatalf("the %s run was not judged exactly once, or has a latency phase: %+v", r.Mode, r)
		}
	}
	var table bytes.Buffer
	if err := WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"eos-avro / eos", "etl, eos-avro: topology: etl; format:", "srfake"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
}

// The value judge refuses what a broken etl would write: a wrong cents, a
// pad not dropped, JSON where Avro was due.
func TestETLJudgeFindsWrongValues(t *testing.T) {
	schema := avro.MustParse(etlOutSchema)
	user, amount := datagen.User(7), datagen.Amount(7) // 43.3: normal
	enc := func(cents int64) []byte {
		b, err := avro.Marshal(schema, map[string]any{"seq": int64(7), "ts": int64(1), "user": user, "amount": amount, "cents": cents, "size": "normal"})
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{0, 0, 0, 0, 1}, b...)
	}
	js := fmt.Sprintf(`{"seq":7,"ts":1,"user":%q,"amount":%v,"cents":4330,"size":"normal"}`, user, amount)
	for _, c := range []struct {
		value []byte
		avro  bool
		ok    bool
	}{
		{enc(4330), true, true},
		{enc(4331), true, false},
		{[]byte(js), false, true},
		{[]byte(strings.Replace(js, "}", `,"pad":"x"}`, 1)), false, false},
		{[]byte(js), true, false},
	} {
		why := etlWrong(&kgo.Record{Key: []byte("7"), Value: c.value}, schema, c.avro)
		if (why == "") != c.ok {
			t.Errorf("%q (avro %v): got %q, want ok %v", c.value, c.avro, why, c.ok)
		}
	}
}
