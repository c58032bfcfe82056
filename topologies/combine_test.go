package topologies

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

func testAggregate(t *testing.T, size, advance string) *Aggregate {
	t.Helper()
	tr, err := NewAggregate(writeConfig(t, "agg.yaml", fmt.Sprintf(aggConfig, size, advance, "0s", "final", true)))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func src(topic string, partition int32, offset int64) pipeline.Source {
	return pipeline.Source{Topic: topic, Partition: partition, Offset: offset}
}

// A partial's sources survive its encoding, sorted by topic, partition and
// offset; a truncated encoding is an error, not a shorter list.
func TestPartialSourcesRoundTrip(t *testing.T) {
	tr := testAggregate(t, "1s", "1s")
	srcs := []pipeline.Source{src("b", 1, 7), src("a", 0, 300), src("b", 1, 2), src("a", 0, 5), src("a", 2, 1<<40), src("b", 0, 0)}
	p := &partial{group: "g", ts: 42, acc: tr.newAcc(), srcs: slices.Clone(srcs)}
	b := tr.encodePartial(p)
	ts, acc, enc, ok := tr.decodePartial(b)
	if !ok || ts != 42 || !reflect.DeepEqual(acc, tr.newAcc()) {
		t.Fatalf("decodePartial: ok %v, ts %d, acc %v", ok, ts, acc)
	}
	got, err := decodeSources(enc)
	if err != nil {
		t.Fatal(err)
	}
	want := []pipeline.Source{src("a", 0, 5), src("a", 0, 300), src("a", 2, 1<<40), src("b", 0, 0), src("b", 1, 2), src("b", 1, 7)}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sources: got %v, want %v", got, want)
	}
	for n := range len(enc) {
		if got, err := decodeSources(enc[:n]); err == nil {
			t.Fatalf("sources truncated to %d of %d bytes decoded to %v without an error", n, len(enc), got)
		}
	}
}

// Hopping windows whose size is not a multiple of the advance (1.5s every
// 1s: panes of 500ms), through the repartition topic with stage one's
// combiner: the final results equal the per-record reference exactly, late
// records and poison pills are dead-lettered once each, through aborted
// transactions; and the repartition topic carried far fewer records than the
// input (the combiner combined).
func TestAggregateHoppingThroughCombinerMatchesReference(t *testing.T) {
	e := newTEnv(t)
	evs := genEvents(12_000, 8, 3)
	rs, _ := runAggregate(t, e, "hopc", evs, 1, false, "1500ms", "1s", "700ms", "final", true)
	checkAggregate(t, e, "hopc", evs, rs, oneStream(len(evs)), 1500, 1000, 700)
	if n := len(e.read("hopc-windows-repartition")); n > len(evs)/2 {
		t.Fatalf("the repartition topic has %d records for %d input records: nothing was combined", n, len(evs))
	}
}

// A partial that stage two finds late (its stream time is ahead of the
// worker that combined it: here an earlier incarnation's) is not
// dead-lettered as itself: each input record it stands for is, once, with
// its own value, key, headers and source coordinates; read back with
// read_committed, so over a transactional input the aborted records between
// them are skipped.
func TestAggregateLatePartialDeadLettersEachInputRecord(t *testing.T) {
	t.Run("plain-input", func(t *testing.T) { latePartial(t, "lp", false) })
	t.Run("transactional-input", func(t *testing.T) { latePartial(t, "lpt", true) })
}

func latePartial(t *testing.T, app string, transactional bool) {
	e := newTEnv(t)
	in, repartition := app+"-in", app+"-windows-repartition"
	cfg := writeConfig(t, "late.yaml", fmt.Sprintf(aggConfig, "1s", "1s", "0s", "final", true))
	base := int64(1_700_000_000_000)
	run := func(feed func()) {
		tr, err := NewAggregate(cfg) // a fresh combiner: it has seen nothing
		if err != nil {
			t.Fatal(err)
		}
		e.run(app, "aggregate", tr, in, app+"-out", []string{repartition}, nil, feed)
	}
	e.topic(in, 2)
	run(func() {
		e.produce(in, 2, []*kgo.Record{{Key: []byte("a"), Value: event{group: "u", ts: base + 3_600_000, amount: 1}.value()}})
	})
	before := len(e.read(repartition))
	var late []*kgo.Record
	for i := range 40 {
		late = append(late, &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: event{group: "u", ts: base + int64(i), amount: i}.value(),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte(strconv.Itoa(i))}}})
	}
	run(func() {
		if !transactional {
			e.produce(in, 2, late)
			return
		}
		kept := e.produceTransactions(in, 2, late, 5, func(b int) bool { return b%2 == 1 })
		var committed []*kgo.Record
		for _, i := range kept {
			committed = append(committed, late[i])
		}
		late = committed
	})
	if n := len(e.read(repartition)) - before; n >= len(late) {
		t.Fatalf("%d repartition records for %d late input records: they were not combined, so this test proves nothing", n, len(late))
	}
	dls := e.read(app + "-dlq")
	if len(dls) != len(late) {
		t.Fatalf("%d dead letters, want %d", len(dls), len(late))
	}
	byAt := map[string]*kgo.Record{}
	for _, r := range late {
		byAt[at(r)] = r
	}
	for _, d := range dls {
		h := headers(d)
		src := byAt[h[pipeline.DeadLetterPartitionHeader]+"/"+h[pipeline.DeadLetterOffsetHeader]]
		if src == nil || h[pipeline.DeadLetterTopicHeader] != in || h[pipeline.DeadLetterReasonHeader] != "late-record" {
			t.Fatalf("dead letter %s with headers %v names no late input record", d.Value, h)
		}
		delete(byAt, at(src))
		if string(d.Value) != string(src.Value) || string(d.Key) != string(src.Key) || h["trace"] != string(src.Headers[0].Value) {
			t.Fatalf("dead letter of %s: key %q value %s trace %q, want the input's %q %s %q", at(src), d.Key, d.Value, h["trace"], src.Key, src.Value, src.Headers[0].Value)
		}
	}
	if len(byAt) != 0 {
		t.Fatalf("late records without a dead letter: %v", byAt)
	}
	t.Logf("%d late records in %d repartition records, each dead-lettered once", len(late), len(e.read(repartition))-before)
}

// recorder is an Emitter that keeps every output.
type recorder struct{ outs []pipeline.Output }

func (r *recorder) Emit(o pipeline.Output) { r.outs = append(r.outs, o) }

// One record timed an hour ahead makes its own group's later records look
// late (written alone), not every group's: the others are still combined.
func TestFutureRecordOfOneGroupLeavesOtherGroupsCombined(t *testing.T) {
	tr := testAggregate(t, "1s", "1s")
	base := int64(1_700_000_000_000)
	var out recorder
	offset := int64(0)
	process := func(group string, ts int64) {
		t.Helper()
		in := &pipeline.Record{Topic: "in", Offset: offset, Value: event{group: group, ts: ts, amount: 1}.value()}
		offset++
		if err := tr.Process(t.Context(), in, &out); err != nil {
			t.Fatal(err)
		}
	}
	process("ahead", base+3_600_000)
	if err := tr.Flush(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	out.outs = nil
	for i := range 1000 {
		process("g"+strconv.Itoa(i%10), base+int64(i))
	}
	process("ahead", base+500) // its group has seen the future: written alone
	if err := tr.Flush(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	alone, partials := 0, 0
	for _, o := range out.outs {
		switch o.Value[0] {
		case stagedVersion:
			alone++
		case partialVersion:
			partials++
		}
	}
	if alone != 1 || partials != 10 {
		t.Fatalf("%d records written alone and %d partials, want 1 and 10 (one per group of the 1000 records)", alone, partials)
	}
}

// Over an input written in transactions, a third of them aborted (so the
// input has control records and aborted ranges between the offsets a
// partial names): the results equal the reference computed from the
// committed records alone, and late records and poison pills among them are
// dead-lettered once each; nothing of the aborted ones shows.
func TestAggregateOverTransactionalInputCountsOnlyCommittedRecords(t *testing.T) {
	e := newTEnv(t)
	evs := genEvents(9_000, 8, 5)
	rs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		rs[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: ev.value()}
	}
	tr, err := NewAggregate(writeConfig(t, "txa.yaml", fmt.Sprintf(aggConfig, "1s", "1s", "500ms", "final", true)))
	if err != nil {
		t.Fatal(err)
	}
	last := (len(rs) - 1) / 200
	var kept []int
	e.topic("txa-in", 1)
	e.run("txa", "aggregate", tr, "txa-in", "txa-out", []string{"txa-windows-repartition"}, aborting(e, 0.2), func() {
		// The last batch (the heartbeats) commits.
		kept = e.produceTransactions("txa-in", 1, rs, 200, func(b int) bool { return b%3 == 1 && b != last })
	})
	var cevs []event
	var crs []*kgo.Record
	for _, i := range kept {
		cevs, crs = append(cevs, evs[i]), append(crs, rs[i])
	}
	if len(cevs) >= len(evs)*3/4 {
		t.Fatalf("%d of %d records committed: the input aborted too little to prove anything", len(cevs), len(evs))
	}
	checkAggregate(t, e, "txa", cevs, crs, oneStream(len(cevs)), 1000, 1000, 500)
}

// preaggregate: false turns the combiner off without changing a result:
// the same input through the repartition topic, with and without it, gives
// every window's final result exactly once and equal to the per-record
// reference, and the same dead letters, read with read_committed through
// aborted transactions; only the repartition topic differs: one record per
// good input record without the combiner, far fewer with it.
func TestAggregatePreaggregateOffGivesTheSameExactlyOnceResults(t *testing.T) {
	e := newTEnv(t)
	evs := genEvents(8_000, 8, 5)
	good := 0
	for _, ev := range evs {
		if ev.bad == "" {
			good++
		}
	}
	finals := map[string]map[string]window{}
	for _, c := range []struct {
		app  string
		line string
	}{{"preon", "preaggregate: true\n"}, {"preoff", "preaggregate: false\n"}} {
		rs, _ := runAggregate(t, e, c.app, evs, 1, false, "1s", "1s", "500ms", "final", true, c.line)
		checkAggregate(t, e, c.app, evs, rs, oneStream(len(evs)), 1000, 1000, 500)
		finals[c.app], _ = results(t, e.read(c.app+"-out"))
		n := len(e.read(c.app + "-windows-repartition"))
		t.Logf("%s: %d repartition records for %d input records (%d good)", c.app, n, len(evs), good)
		switch {
		case c.app == "preon" && n > good/2:
			t.Fatalf("with the combiner the repartition topic has %d records for %d good input records: nothing was combined", n, good)
		case c.app == "preoff" && n < good:
			t.Fatalf("without the combiner the repartition topic has %d records for %d good input records: records were combined", n, good)
		}
	}
	if !reflect.DeepEqual(finals["preon"], finals["preoff"]) {
		t.Fatalf("the final results differ with and without pre-aggregation (%d against %d windows)", len(finals["preon"]), len(finals["preoff"]))
	}
}
