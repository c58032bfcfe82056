package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	numIn    = 300 // input records
	inParts  = 3
	inTopic  = "in"
	outTopic = "out"
)

type env struct {
	t    *testing.T
	ctx  context.Context
	opts []kgo.Opt
}

// newEnv connects to a test cluster (testbroker: the embedded broker, or
// Apache Kafka with EOS_TEST_BROKER=kafka) with the input and output topics
// and fills the input with numIn datagen records.
func newEnv(t *testing.T, outParts int32) *env {
	t.Helper()
	conn := testbroker.Connect(t, testbroker.Start(t, broker.Config{}), 20*time.Second)
	e := &env{t: t, ctx: conn.Ctx, opts: conn.Opts}
	for topic, parts := range map[string]int32{inTopic: inParts, outTopic: outParts} {
		if _, _, err := admin.EnsureTopic(e.ctx, conn.Client, topic, parts, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := datagen.Produce(e.ctx, conn.Client, datagen.Config{Topic: inTopic, Count: numIn, Size: 64, Partitions: inParts}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	cl, err := kgo.NewClient(append(slices.Clip(e.opts), opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// input returns the input records per partition, in offset order.
func (e *env) input() map[int32][]*kgo.Record {
	e.t.Helper()
	cl := e.client(kgo.ConsumeTopics(inTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	byPart := make(map[int32][]*kgo.Record)
	for n := 0; n < numIn; {
		fs := cl.PollFetches(e.ctx)
		if err := fs.Err0(); err != nil {
			e.t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			byPart[r.Partition] = append(byPart[r.Partition], r)
			n++
		})
	}
	return byPart
}

// copyOut writes the input to the output topic, input partition p to output
// partition p % outParts, after mutate has had its way with each partition's
// records.
func (e *env) copyOut(cl *kgo.Client, outParts int32, mutate func(p int32, rs []*kgo.Record) []*kgo.Record) {
	e.t.Helper()
	out := make(map[int32][]*kgo.Record)
	in := e.input()
	for p := range int32(inParts) {
		rs := in[p]
		op := p % outParts
		for _, r := range rs {
			out[op] = append(out[op], &kgo.Record{Topic: outTopic, Partition: op, Key: r.Key, Value: r.Value})
		}
	}
	var all []*kgo.Record
	for p := range outParts {
		rs := out[p]
		if mutate != nil {
			rs = mutate(p, rs)
		}
		all = append(all, rs...)
	}
	if err := cl.ProduceSync(e.ctx, all...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) producer(opts ...kgo.Opt) *kgo.Client {
	return e.client(append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// waitStable waits until the output's last stable offset reaches target on
// every partition. Apache Kafka writes a transaction's markers after EndTxn
// has answered, so for a moment after a commit or an abort the last stable
// offset still stops at the ended transaction's first record; the embedded
// broker writes the markers before it answers. A test whose judgment
// depends on where that offset stands must wait for the markers first.
func (e *env) waitStable(cl *kgo.Client, target func(partition int32, end int64) int64) {
	e.t.Helper()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ends, err := adm.ListEndOffsets(e.ctx, outTopic)
		if err == nil {
			err = ends.Error()
		}
		var stable kadm.ListedOffsets
		if err == nil {
			stable, err = adm.ListCommittedOffsets(e.ctx, outTopic)
		}
		if err == nil {
			err = stable.Error()
		}
		settled := err == nil
		var behind string
		if err == nil {
			stable.Each(func(o kadm.ListedOffset) {
				end, _ := ends.Lookup(outTopic, o.Partition)
				if want := target(o.Partition, end.Offset); o.Offset < want {
					settled = false
					behind = fmt.Sprintf("partition %d stable at %d, want %d", o.Partition, o.Offset, want)
				}
			})
		}
		if settled {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the output's transaction markers did not land in 20s: %s (%v)", behind, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) run() *Report {
	e.t.Helper()
	rep, err := Run(e.ctx, e.opts, Config{Input: inTopic, Output: outTopic, Timeout: 10 * time.Second})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Log(rep)
	if rep.InputRecords != numIn {
		e.t.Fatalf("read %d input records, want %d", rep.InputRecords, numIn)
	}
	return rep
}

func TestCorrectCopy(t *testing.T) {
	// One output partition per input partition, and all input partitions
	// interleaved into one: both preserve per-input-partition order.
	for _, outParts := range []int32{inParts, 1} {
		t.Run("out_partitions="+strconv.Itoa(int(outParts)), func(t *testing.T) {
			e := newEnv(t, outParts)
			e.copyOut(e.producer(), outParts, nil)
			rep := e.run()
			if !rep.OK() || rep.OutputRecords != numIn || rep.InputDuplicates != 0 {
				t.Fatalf("want OK with %d output records: %v", numIn, rep)
			}
			if !strings.Contains(rep.Summary(), ": OK: ") {
				t.Errorf("summary does not say OK: %s", rep.Summary())
			}
			var j map[string]any
			b, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &j); err != nil || j["ok"] != true || j["input_records"] != float64(numIn) {
				t.Errorf("JSON %s lacks ok/input_records (%v)", b, err)
			}
		})
	}
}

func TestDuplicate(t *testing.T) {
	e := newEnv(t, inParts)
	var dupKey string
	e.copyOut(e.producer(), inParts, func(p int32, rs []*kgo.Record) []*kgo.Record {
		if p != 1 {
			return rs
		}
		d := *rs[5] // re-delivered later, as after a retry
		dupKey = string(d.Key)
		return append(rs, &d)
	})
	rep := e.run()
	if rep.OK() || rep.Duplicates != 1 || rep.Missing != 0 || rep.Unexpected != 0 || rep.OrderViolations != 0 {
		t.Fatalf("want exactly one duplicate: %v", rep)
	}
	if !slices.Equal(rep.DuplicateExamples, []string{dupKey}) {
		t.Errorf("duplicate examples %q, want [%s]", rep.DuplicateExamples, dupKey)
	}
	if !strings.Contains(rep.Summary(), "FAIL") || !strings.Contains(rep.Summary(), "1 duplicates (e.g. "+dupKey+")") {
		t.Errorf("summary: %s", rep.Summary())
	}
}

func TestMissing(t *testing.T) {
	e := newEnv(t, inParts)
	var gone string
	e.copyOut(e.producer(), inParts, func(p int32, rs []*kgo.Record) []*kgo.Record {
		if p != 2 {
			return rs
		}
		gone = string(rs[10].Key)
		return slices.Delete(rs, 10, 11)
	})
	rep := e.run()
	if rep.OK() || rep.Missing != 1 || rep.Duplicates != 0 || rep.Unexpected != 0 || rep.OrderViolations != 0 || rep.OutputRecords != numIn-1 {
		t.Fatalf("want exactly one missing: %v", rep)
	}
	if !slices.Equal(rep.MissingExamples, []string{gone}) {
		t.Errorf("missing examples %q, want [%s]", rep.MissingExamples, gone)
	}
}

func TestUnexpected(t *testing.T) {
	e := newEnv(t, inParts)
	e.copyOut(e.producer(), inParts, func(p int32, rs []*kgo.Record) []*kgo.Record {
		if p != 0 {
			return rs
		}
		// Not decimal, decimal but not an input key, non-canonical
		// decimal of an input key, and nil.
		for _, k := range []string{"hello", strconv.Itoa(numIn), "007"} {
			rs = append(rs, &kgo.Record{Topic: outTopic, Partition: p, Key: []byte(k)})
		}
		return append(rs, &kgo.Record{Topic: outTopic, Partition: p})
	})
	rep := e.run()
	if rep.OK() || rep.Unexpected != 4 || rep.Duplicates != 0 || rep.Missing != 0 || rep.OrderViolations != 0 {
		t.Fatalf("want exactly four unexpected: %v", rep)
	}
	if want := []string{"hello", strconv.Itoa(numIn), "007", "<nil>"}; !slices.Equal(rep.UnexpectedExamples, want) {
		t.Errorf("unexpected examples %q, want %q", rep.UnexpectedExamples, want)
	}
}

func TestOrderViolation(t *testing.T) {
	e := newEnv(t, inParts)
	var moved string
	e.copyOut(e.producer(), inParts, func(p int32, rs []*kgo.Record) []*kgo.Record {
		if p != 1 {
			return rs
		}
		moved = string(rs[3].Key)
		rs[3], rs[4] = rs[4], rs[3]
		return rs
	})
	rep := e.run()
	if rep.OK() || rep.OrderViolations != 1 || rep.Duplicates != 0 || rep.Missing != 0 || rep.Unexpected != 0 {
		t.Fatalf("want exactly one order violation: %v", rep)
	}
	v := rep.OrderExamples[0]
	if v.Key != moved || v.OutputPartition != 1 || v.OutputOffset != 4 || v.InputPartition != 1 || v.InputOffset >= v.PrevInputOffset {
		t.Errorf("order example %+v, want key %s at output 1@4 from input partition 1", v, moved)
	}
}

// Aborted records are invisible to the judgment, and the abort marker that
// ends the partition does not stall the read.
func TestTransactions(t *testing.T) {
	e := newEnv(t, inParts)
	tail, err := NewTail(e.ctx, e.opts, outTopic)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()

	cl := e.producer(kgo.TransactionalID("copier"))
	txn := func(commit kgo.TransactionEndTry, mutate func(p int32, rs []*kgo.Record) []*kgo.Record) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		e.copyOut(cl, inParts, mutate)
		if err := cl.EndTransaction(e.ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, nil)
	// An aborted second copy, with an extra unexpected key, last in every
	// partition.
	txn(kgo.TryAbort, func(p int32, rs []*kgo.Record) []*kgo.Record {
		return append(rs, &kgo.Record{Topic: outTopic, Partition: p, Key: []byte("aborted")})
	})

	e.waitStable(cl, func(_ int32, end int64) int64 { return end })
	rep := e.run()
	if !rep.OK() || rep.OutputRecords != numIn {
		t.Fatalf("want OK with %d output records, the aborted ones unseen: %v", numIn, rep)
	}
	hwm, err := kadm.NewClient(cl).ListEndOffsets(e.ctx, outTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.OutputRanges {
		if h, _ := hwm.Lookup(outTopic, r.Partition); r.End != h.Offset {
			t.Errorf("output partition %d read to %d, want the high watermark %d", r.Partition, r.End, h.Offset)
		}
	}

	if err := tail.WaitEnd(e.ctx); err != nil {
		t.Fatal(err)
	}
	if tr := tail.Stop(); !tr.OK() || tr.Records != numIn || tr.Keys != numIn {
		t.Fatalf("tail: %v, want %d records and no duplicates", tr, numIn)
	}
}

// A transaction still open when Run lists offsets caps the read at its first
// offset; if the records just below are an aborted transaction's, nothing at
// or past the target is visible and the read must end with a ShortReadError
// naming the partition, until the open transaction ends.
func TestOpenTransaction(t *testing.T) {
	e := newEnv(t, 1)
	a := e.producer(kgo.TransactionalID("a"))
	b := e.producer(kgo.TransactionalID("b"))

	produce := func(cl *kgo.Client, keys ...string) (last int64) {
		t.Helper()
		for _, k := range keys {
			r, err := cl.ProduceSync(e.ctx, &kgo.Record{Topic: outTopic, Key: []byte(k)}).First()
			if err != nil {
				t.Fatal(err)
			}
			last = r.Offset
		}
		return last
	}
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	e.copyOut(a, 1, nil)
	if err := a.EndTransaction(e.ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(a, "1", "2")
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	open := produce(b, "3")
	if err := a.EndTransaction(e.ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	// Until a's abort marker lands, the last stable offset stops at a's
	// first record and the read ends there without a short read.
	e.waitStable(a, func(int32, int64) int64 { return open })

	_, err := Run(e.ctx, e.opts, Config{Input: inTopic, Output: outTopic, Timeout: 500 * time.Millisecond})
	var short *ShortReadError
	if !errors.As(err, &short) || len(short.Partitions) != 1 || short.Partitions[0].Topic != outTopic || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a ShortReadError for %s", err, outTopic)
	}
	if p := short.Partitions[0]; p.Partition != 0 || p.Position >= p.Target {
		t.Errorf("short partition %+v", p)
	}
	if !strings.Contains(err.Error(), "out[0] at offset") {
		t.Errorf("error does not name the partition: %v", err)
	}
	t.Log(err)

	if err := b.EndTransaction(e.ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if rep := e.run(); !rep.OK() || rep.OutputRecords != numIn {
		t.Fatalf("after the open transaction ended: %v", rep)
	}
}

func TestMissingTopic(t *testing.T) {
	e := newEnv(t, 1)
	for _, cfg := range []Config{
		{Input: inTopic, Output: "nope"},
		{Input: "nope", Output: outTopic},
	} {
		_, err := Run(e.ctx, e.opts, cfg)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), `topic "nope" does not exist`) {
			t.Errorf("Run(%+v) = %v, want topic \"nope\" does not exist", cfg, err)
		}
	}
	for _, cfg := range []Config{{Input: inTopic}, {Input: inTopic, Output: inTopic}} {
		if _, err := Run(e.ctx, e.opts, cfg); err == nil {
			t.Errorf("Run(%+v) succeeded", cfg)
		}
	}
}

// An empty output is all missing, not an error or a hang.
func TestEmptyOutput(t *testing.T) {
	e := newEnv(t, inParts)
	rep := e.run()
	if rep.OK() || rep.Missing != numIn || len(rep.MissingExamples) != maxExamples || rep.MissingExamples[0] != "0" {
		t.Fatalf("want all %d missing, examples from 0: %v", numIn, rep)
	}
}

// The tail starts before its topic exists and sees the duplicate.
func TestTailDuplicate(t *testing.T) {
	e := newEnv(t, 1)
	const topic = "late"
	tail, err := NewTail(e.ctx, e.opts, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Stop()

	cl := e.producer()
	if _, err := kadm.NewClient(cl).CreateTopic(e.ctx, 2, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i))})
	}
	rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("4")})
	if err := cl.ProduceSync(e.ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tail.WaitFor(e.ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := tail.WaitEnd(e.ctx); err != nil {
		t.Fatal(err)
	}
	tr := tail.Stop()
	if tr.OK() || tr.Duplicates != 1 || tr.Records != 11 || tr.Keys != 10 || !slices.Equal(tr.DuplicateExamples, []string{"4"}) {
		t.Fatalf("tail: %v, want one duplicate of key 4", tr)
	}
	if again := tail.Stop(); again.Records != tr.Records {
		t.Errorf("second Stop: %v", again)
	}

	// Waiting on a stopped tail fails instead of hanging.
	if err := tail.WaitFor(e.ctx, 11); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("WaitFor after Stop: %v", err)
	}
}

func TestKeyTable(t *testing.T) {
	kt := newKeyTable[keyInfo](2_000_000)
	for i := range 1_000_000 {
		kt.slot([]byte(strconv.Itoa(999_999 - i))).inPart = 1
	}
	if len(kt.dense) != 1_000_000 || kt.sparse != nil {
		t.Fatalf("1M datagen keys: dense %d, sparse %d; want all dense", len(kt.dense), len(kt.sparse))
	}
	for _, k := range []string{"", "-1", "+1", "01", "1e3", "x", "2000000", "1234567890123456789"} {
		kt.slot([]byte(k)).inPart = 2
	}
	if len(kt.dense) != 1_000_000 || len(kt.sparse) != 8 {
		t.Fatalf("dense %d, sparse %d; want 1000000 and 8", len(kt.dense), len(kt.sparse))
	}
	for k, want := range map[string]int32{"0": 1, "999999": 1, "01": 2, "2000000": 2, "1000000": 0, "nope": 0} {
		got := int32(0)
		if v := kt.lookup([]byte(k)); v != nil {
			got = v.inPart
		}
		if got != want {
			t.Errorf("lookup(%q) = %d, want %d", k, got, want)
		}
	}
}
