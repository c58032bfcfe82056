package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// forking is a Forker whose Process writes a scratch buffer of its own
// instance (a data race under -race if two goroutines shared one) and
// notes which instance processed how many records. Every 97th record is
// dead-lettered; record failAt, if set, fails the worker.
type forking struct {
	scratch []byte
	mu      *sync.Mutex
	byFork  map[*forking]int
	failAt  int
}

func newForking(failAt int) *forking {
	return &forking{mu: new(sync.Mutex), byFork: map[*forking]int{}, failAt: failAt}
}

func (f *forking) Fork() pipeline.Transform {
	return &forking{mu: f.mu, byFork: f.byFork, failAt: f.failAt}
}

func (f *forking) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	f.mu.Lock()
	f.byFork[f]++
	f.mu.Unlock()
	i, err := strconv.Atoi(string(in.Value))
	if err != nil {
		return pipeline.DeadLetter("not-a-number", err)
	}
	if f.failAt > 0 && i == f.failAt {
		return errors.New("a bug in the transform")
	}
	if i%97 == 0 {
		return pipeline.DeadLetter("multiple-of-97", fmt.Errorf("%d", i))
	}
	// Keyed by the input partition: all of a partition's outputs go to
	// one output partition, where their order can be checked.
	key := strconv.AppendInt(nil, int64(in.Partition), 10)
	for _, suffix := range []string{"a", "b"} {
		f.scratch = append(append(f.scratch[:0], in.Value...), suffix...)
		out.Emit(pipeline.Output{Key: key, Value: append([]byte(nil), f.scratch...)})
	}
	return nil
}

// embedded starts an embedded broker for the test and returns a context
// ending a minute later and the options to reach the broker.
func embedded(t *testing.T) (context.Context, []kgo.Opt) {
	t.Helper()
	b, err := broker.Start(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx, []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
}

// produceBacklog writes n records, values 0..n-1, round robin over the
// partitions of topic, before any worker runs, so that polls are large.
func produceBacklog(t *testing.T, ctx context.Context, opts []kgo.Opt, topic string, parts int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: strconv.AppendInt(nil, int64(i), 10)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// readCommittedRecords reads topics with read_committed until want records came
// or ctx ends.
func readCommittedRecords(t *testing.T, ctx context.Context, opts []kgo.Opt, want int, topics ...string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topics...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < want && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		got = append(got, fs.Records()...)
	}
	return got
}

// runUntilConsumed runs w under ctx until consumed reaches n (or ctx
// ends), then stops it, failing the test if it stopped with an error.
func runUntilConsumed(t *testing.T, ctx context.Context, w *pipeline.Worker, consumed *atomic.Int64, n int64) {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for consumed.Load() < n && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A Forker's records are processed on several goroutines, and what the
// worker commits is what processing them one by one gives: every record's
// outputs exactly once and in offset order within its partition, the
// records it rejects dead-lettered exactly once, and nothing else.
func TestForkedProcessingCommitsEveryRecordsOutputsOnceInOffsetOrder(t *testing.T) {
	ctx, opts := embedded(t)
	const n, parts = 30000, 4
	produceBacklog(t, ctx, opts, "in", parts, n)

	tr := newForking(0)
	var consumed atomic.Int64
	w, err := pipeline.New(pipeline.Config{
		App: "forked", Instance: "0", Inputs: []string{"in"}, Output: "out", DLQ: "dlq",
		CommitInterval: 50 * time.Millisecond, Parallelism: 3, ClientOpts: opts,
		OnEvent: func(e pipeline.Event) {
			if e.Kind == pipeline.EventCommitted {
				consumed.Add(int64(e.Consumed))
			}
		},
	}, tr)
	if err != nil {
		t.Fatal(err)
	}
	runUntilConsumed(t, ctx, w, &consumed, n)
	if c := consumed.Load(); c != n {
		t.Fatalf("committed %d consumed records, want %d", c, n)
	}
	tr.mu.Lock()
	if len(tr.byFork) < 2 {
		t.Errorf("records were processed by %d Transform(s), want the receiver and forks: %v", len(tr.byFork), tr.byFork)
	}
	tr.mu.Unlock()

	dead := n/97 + 1 // 0, 97, 194...
	recs := readCommittedRecords(t, ctx, opts, 2*(n-dead)+dead, "out", "dlq")
	last := map[string]int64{} // input partition -> offset of its last output
	seen := map[string]bool{}
	var outs, dls int
	for _, r := range recs {
		var key string
		for _, h := range r.Headers {
			if h.Key == pipeline.IdempotencyKeyHeader {
				key = string(h.Value)
			}
		}
		if r.Topic == "dlq" {
			dls++
			i, _ := strconv.Atoi(string(r.Value))
			if i%97 != 0 {
				t.Fatalf("dead letter of record %q, which is not a multiple of 97", r.Value)
			}
			continue
		}
		outs++
		if seen[key] {
			t.Fatalf("output %s committed twice", key)
		}
		seen[key] = true
		// "in/<partition>/<offset>/<index>"
		f := strings.Split(key, "/")
		if len(f) != 4 || f[1] != string(r.Key) {
			t.Fatalf("output %s (value %s) in the output partition of input partition %s", key, r.Value, r.Key)
		}
		off, _ := strconv.ParseInt(f[2], 10, 64)
		idx := map[string]int64{"0": 0, "1": 1}[f[3]]
		pos := off*2 + idx
		if prev, ok := last[f[1]]; ok && pos <= prev {
			t.Fatalf("input partition %s: output %s after the output of offset %d, index %d", f[1], key, prev/2, prev%2)
		}
		last[f[1]] = pos
		if want := string(r.Value[len(r.Value)-1]); want != map[string]string{"0": "a", "1": "b"}[f[3]] {
			t.Fatalf("output %s has value %s", key, r.Value)
		}
	}
	if outs != 2*(n-dead) || dls != dead {
		t.Fatalf("read %d outputs and %d dead letters, want %d and %d", outs, dls, 2*(n-dead), dead)
	}
}

// A record whose Process fails (not a dead letter) on a fork stops the
// worker with an error naming the record, as on the worker's goroutine,
// and nothing of its transaction is committed.
func TestAForkFailingARecordStopsTheWorkerNamingIt(t *testing.T) {
	ctx, opts := embedded(t)
	const n, failAt = 20000, 15001
	produceBacklog(t, ctx, opts, "in", 2, n)

	tr := newForking(failAt)
	w, err := pipeline.New(pipeline.Config{
		App: "failing", Instance: "0", Inputs: []string{"in"}, Output: "out", DLQ: "dlq",
		CommitInterval: 30 * time.Second, MaxTxnRecords: n, Parallelism: 2, ClientOpts: opts,
	}, tr)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "transform failed on in[") || !strings.Contains(err.Error(), "a bug in the transform") {
		t.Fatalf("Run returned %v, want the failure naming the record", err)
	}
	if c := w.Stats().Committed.Load(); c != 0 {
		t.Fatalf("%d transactions committed, want none: the one record failing was in the only one", c)
	}
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	if recs := readCommittedRecords(t, rctx, opts, 1, "out", "dlq"); len(recs) != 0 {
		t.Fatalf("read %d committed records, want none", len(recs))
	}
}
