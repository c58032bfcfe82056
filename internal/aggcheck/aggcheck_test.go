package aggcheck

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// stored returns the input's records as a one-partition topic stores them,
// with offsets, and its heartbeats after them.
func stored(in *Input) []*kgo.Record {
	var out []*kgo.Record
	for i, r := range append(slices.Clone(in.Records), in.Heartbeats(3)...) {
		c := *r
		c.Offset = int64(i)
		out = append(out, &c)
	}
	return out
}

// correctOutput is what a correct run writes for ref: every window's
// result once and every dead letter once, with the headers the pipeline
// writes.
func correctOutput(t *testing.T, ref *Reference, input []*kgo.Record) (results, deadLetters []*kgo.Record) {
	t.Helper()
	for _, w := range ref.windows {
		v, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, &kgo.Record{Key: []byte(w.Key), Value: v})
	}
	for _, r := range input {
		if dl, ok := ref.deadLetters[r.Topic+"/0/"+strconv.FormatInt(r.Offset, 10)]; ok {
			deadLetters = append(deadLetters, deadLetter(r, dl.reason))
		}
	}
	return results, deadLetters
}

func deadLetter(in *kgo.Record, reason string) *kgo.Record {
	return &kgo.Record{Key: in.Key, Value: in.Value, Headers: []kgo.RecordHeader{
		{Key: pipeline.DeadLetterReasonHeader, Value: []byte(reason)},
		{Key: pipeline.DeadLetterTopicHeader, Value: []byte(in.Topic)},
		{Key: pipeline.DeadLetterPartitionHeader, Value: []byte(strconv.Itoa(int(in.Partition)))},
		{Key: pipeline.DeadLetterOffsetHeader, Value: []byte(strconv.FormatInt(in.Offset, 10))},
		{Key: pipeline.DeadLetterTopologyHeader, Value: []byte("aggregate")},
	}}
}

// The input has regular, late and poison records, and the reference
// expects a window per group and 5s, a dead letter per late and poison
// record, and nothing for the heartbeats.
func TestAggregateInputAndReference(t *testing.T) {
	in := NewInput("agg-in", 5_000, 7)
	ref := NewReference("agg-in", stored(in))
	var late, poison int64
	for _, r := range in.Records {
		switch {
		case strings.Contains(string(r.Value), `"late":true`):
			late++
		case !json.Valid(r.Value):
			poison++
		}
	}
	if late != 5 || poison != 5 || ref.Records != int64(len(in.Records)) || ref.Heartbeats != 3 {
		t.Fatalf("%d late, %d poison, reference of %d records and %d heartbeats; want 5, 5, %d, 3", late, poison, ref.Records, ref.Heartbeats, len(in.Records))
	}
	if int64(len(ref.deadLetters)) != late+poison {
		t.Fatalf("%d dead letters in the reference, want %d", int64(len(ref.deadLetters)), late+poison)
	}
	// 5,000 records 1ms apart span one 5s window per group.
	if int64(len(ref.windows)) != aggregateGroups {
		t.Fatalf("%d windows, want %d", int64(len(ref.windows)), aggregateGroups)
	}
	var orders int64
	for _, w := range ref.windows {
		orders += w.Orders
	}
	if orders != 5_000 {
		t.Fatalf("the reference's windows count %d records, want 5000", orders)
	}
	if again := NewInput("agg-in", 5_000, 7); !slices.EqualFunc(in.Records, again.Records, func(a, b *kgo.Record) bool { return string(a.Value) == string(b.Value) }) {
		t.Fatal("the same seed gave a different input")
	}
}

// Each way an aggregate output can be wrong is reported, and only that
// way: the check can fail.
func TestAggregateJudgeReportsEachFault(t *testing.T) {
	in := stored(NewInput("agg-in", 3_000, 7))
	ref := NewReference("agg-in", in)
	results, dls := correctOutput(t, ref, in)

	rep := ref.Judge(results, dls)
	if !rep.OK() || rep.Windows.Exact != int64(len(ref.windows)) || rep.DeadLetters.Exact != int64(len(ref.deadLetters)) {
		t.Fatalf("a correct output: %s", rep)
	}

	withValue := func(r *kgo.Record, edit func(*Window)) *kgo.Record {
		var w Window
		if err := json.Unmarshal(r.Value, &w); err != nil {
			t.Fatal(err)
		}
		edit(&w)
		v, _ := json.Marshal(w)
		return &kgo.Record{Key: r.Key, Value: v}
	}
	withHeader := func(r *kgo.Record, key, value string) *kgo.Record {
		c := *r
		c.Headers = slices.Clone(r.Headers)
		for i := range c.Headers {
			if c.Headers[i].Key == key {
				c.Headers[i].Value = []byte(value)
			}
		}
		return &c
	}
	for _, tc := range []struct {
		name    string
		results []*kgo.Record
		dls     []*kgo.Record
		want    func(*Report) int64
	}{
		{"a record counted twice", append(slices.Clone(results[1:]), withValue(results[0], func(w *Window) {
			w.Orders++
			w.Total += w.Smallest
			w.Mean = w.Total / float64(w.Orders)
		})), dls, func(r *Report) int64 { return r.Windows.Wrong }},
		{"a wrong max", append(slices.Clone(results[1:]), withValue(results[0], func(w *Window) { w.Biggest++ })), dls, func(r *Report) int64 { return r.Windows.Wrong }},
		{"a result not final", append(slices.Clone(results[1:]), withValue(results[0], func(w *Window) { w.Final = false })), dls, func(r *Report) int64 { return r.Windows.Wrong }},
		{"a window emitted twice", append(slices.Clone(results), results[3]), dls, func(r *Report) int64 { return r.Windows.Twice }},
		{"a missing window", results[1:], dls, func(r *Report) int64 { return r.Windows.Missing }},
		{"a window not in the input", append(slices.Clone(results), withValue(results[0], func(w *Window) { w.Key = "user-999" })), dls, func(r *Report) int64 { return r.Windows.Unexpected }},
		{"a result that is not a window", append(slices.Clone(results), &kgo.Record{Value: []byte("{")}), dls, func(r *Report) int64 { return r.Windows.Unexpected }},
		{"a dead letter written twice", results, append(slices.Clone(dls), dls[2]), func(r *Report) int64 { return r.DeadLetters.Twice }},
		{"a missing dead letter", results, dls[1:], func(r *Report) int64 { return r.DeadLetters.Missing }},
		{"a dead letter for the wrong reason", results, append(slices.Clone(dls[1:]), withHeader(dls[0], pipeline.DeadLetterReasonHeader, "expression-error")), func(r *Report) int64 { return r.DeadLetters.Wrong }},
		{"a dead letter of a regular record", results, append(slices.Clone(dls), deadLetter(in[0], "late-record")), func(r *Report) int64 { return r.DeadLetters.Unexpected }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := ref.Judge(tc.results, tc.dls)
			if rep.OK() || tc.want(rep) != 1 || len(rep.Examples) == 0 {
				t.Fatalf("%s: want not OK with exactly one such fault: %s", tc.name, rep)
			}
			t.Log(rep.Examples[0])
		})
	}

	// Nothing at all is not OK, even against an empty reference.
	if rep := ref.Judge(nil, nil); rep.OK() || rep.Windows.Missing != int64(len(ref.windows)) || rep.DeadLetters.Missing != int64(len(ref.deadLetters)) {
		t.Fatalf("an empty output: %s", rep)
	}
	if rep := NewReference("agg-in", nil).Judge(nil, nil); rep.OK() {
		t.Fatalf("an empty reference: %s", rep)
	}
}

// Judge reads input, results and dead letters with read_committed
// from a broker; a dead-letter topic that was never created reads as empty,
// which fails a reference that expects dead letters.
func TestJudgeAggregateReadsTheTopics(t *testing.T) {
	e := testbroker.Connect(t, testbroker.Start(t, broker.Config{}), 20*time.Second)
	cl := e.Client
	for _, topic := range []string{"agg-in", "agg-out"} {
		if _, err := kadm.NewClient(cl).CreateTopic(e.Ctx, 1, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	in := NewInput("agg-in", 2_000, 7)
	if err := in.Produce(e.Ctx, cl, 0); err != nil {
		t.Fatal(err)
	}
	if err := in.ProduceHeartbeats(e.Ctx, cl, 3); err != nil {
		t.Fatal(err)
	}
	ref, err := ReadReference(e.Ctx, e.Opts, "agg-in")
	if err != nil {
		t.Fatal(err)
	}
	results, dls := correctOutput(t, ref, in.Records)
	for _, r := range results {
		r.Topic = "agg-out"
	}
	if err := cl.ProduceSync(e.Ctx, results...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	topics := Topics{Input: "agg-in", Output: "agg-out", DeadLetters: "agg-dlq", Timeout: 10 * time.Second}
	rep, err := Judge(e.Ctx, e.Opts, topics)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || rep.Windows.Exact != int64(len(ref.windows)) || rep.DeadLetters.Missing != int64(len(ref.deadLetters)) || int64(len(ref.deadLetters)) == 0 {
		t.Fatalf("without the dead-letter topic: %s", rep)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(e.Ctx, 1, -1, nil, "agg-dlq"); err != nil {
		t.Fatal(err)
	}
	for _, r := range dls {
		r.Topic = "agg-dlq"
	}
	if err := cl.ProduceSync(e.Ctx, dls...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if rep, err = Judge(e.Ctx, e.Opts, topics); err != nil || !rep.OK() || rep.InputRecords != int64(len(in.Records)) {
		t.Fatalf("a correct output: %v, %v", rep, err)
	}
	t.Log(rep)
}

// A tail identifying records by window sees a window emitted twice,
// although every result's key is a group that other windows share too.
func TestTailByWindow(t *testing.T) {
	e := testbroker.Connect(t, testbroker.Start(t, broker.Config{}), 20*time.Second)
	cl := e.Client
	if _, err := kadm.NewClient(cl).CreateTopic(e.Ctx, 1, -1, nil, "agg-out"); err != nil {
		t.Fatal(err)
	}
	tail, err := verify.NewTailBy(e.Ctx, e.Opts, "agg-out", WindowID)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()
	var rs []*kgo.Record
	for _, start := range []int64{0, 5000, 10000, 5000} {
		v, _ := json.Marshal(Window{Key: "user-1", Start: start, End: start + 5000, Orders: 1, Final: true})
		rs = append(rs, &kgo.Record{Topic: "agg-out", Key: []byte("user-1"), Value: v})
	}
	if err := cl.ProduceSync(e.Ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tail.WaitEnd(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if tr := tail.Stop(); tr.OK() || tr.Records != 4 || tr.Keys != 3 || !slices.Equal(tr.DuplicateExamples, []string{"user-1/5000"}) {
		t.Fatalf("tail: %v, want one duplicate of window user-1/5000", tr)
	}
}

// TestMain stops the shared Apache Kafka cluster after the tests
// (EOS_TEST_BROKER=kafka); on the embedded broker it only runs them.
func TestMain(m *testing.M) { testbroker.Main(m) }
