package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/pipeline"
)

// counting is a PartitionForker with a Store: it counts each key's records
// in the record's partition, writing the count before it decides to
// dead-letter every 97th record (so a dead letter must undo the write),
// and emits "key:count". It notes which fork processed records, and how
// many Process calls of one partition, and of any, run at once.
type counting struct {
	t        *testing.T
	scratch  []byte
	shared   *countingShared
	forks    []*counting
	inFlight atomic.Int32
}

type countingShared struct {
	mu      sync.Mutex
	byFork  map[*counting]int
	busy    map[int32]*atomic.Int32 // Process calls in flight, by partition
	flushes int
}

func newCounting(t *testing.T) *counting {
	return &counting{t: t, shared: &countingShared{byFork: map[*counting]int{}, busy: map[int32]*atomic.Int32{}}}
}

func (c *counting) ForkPartitions() pipeline.Transform {
	f := &counting{t: c.t, shared: c.shared}
	c.forks = append(c.forks, f)
	return f
}

func (c *counting) Declare() pipeline.Declaration {
	return pipeline.Declaration{Stores: []string{"counts"}, DeadLetters: true}
}

func (c *counting) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	c.shared.mu.Lock()
	c.shared.byFork[c]++
	busy := c.shared.busy[in.Partition]
	if busy == nil {
		busy = new(atomic.Int32)
		c.shared.busy[in.Partition] = busy
	}
	c.shared.mu.Unlock()
	if busy.Add(1) > 1 {
		c.t.Errorf("partition %d is processed on two goroutines at once", in.Partition)
	}
	defer busy.Add(-1)

	i, err := strconv.Atoi(string(in.Value))
	if err != nil {
		return pipeline.DeadLetter("not-a-number", err)
	}
	k := strconv.Itoa(i % 50)
	st := in.Store("counts")
	n := 0
	if v, ok := st.Get(k); ok {
		n, _ = strconv.Atoi(string(v))
	}
	n++
	st.Put(k, []byte(strconv.Itoa(n)))
	if i%97 == 0 {
		return pipeline.DeadLetter("multiple-of-97", fmt.Errorf("%d", i))
	}
	c.scratch = fmt.Appendf(c.scratch[:0], "%s:%d", k, n)
	out.Emit(pipeline.Output{Key: strconv.AppendInt(nil, int64(in.Partition), 10), Value: append([]byte(nil), c.scratch...)})
	return nil
}

// Flush and Discard are called on the receiver only, never while a fork
// processes.
func (c *counting) Flush(context.Context, pipeline.Emitter) error {
	c.idle("Flush")
	c.shared.mu.Lock()
	c.shared.flushes++
	c.shared.mu.Unlock()
	return nil
}

func (c *counting) Discard() { c.idle("Discard") }

func (c *counting) idle(what string) {
	for _, f := range append([]*counting{c}, c.forks...) {
		if f.inFlight.Load() != 0 {
			c.t.Errorf("%s called while a fork processes", what)
		}
	}
}

// A PartitionForker's forks each get whole partitions of a poll, with their
// Stores, at the same time, and what the worker commits is what processing
// the records one by one gives: per partition and key, the counts
// 1, 2, 3... in offset order with none missing or repeated (a dead
// letter's write to the store undone before the partition's next record),
// every other record dead-lettered once, and Flush called on the receiver
// only, with no fork running.
func TestPartitionForksOwnWholePartitionsAndTheirStoresExactlyOnce(t *testing.T) {
	ctx, opts := embedded(t)
	const n, parts = 30000, 6
	produceBacklog(t, ctx, opts, "in", parts, n)

	tr := newCounting(t)
	var consumed atomic.Int64
	w, err := pipeline.New(pipeline.Config{
		App: "partforked", Instance: "0", Inputs: []string{"in"}, Output: "out", DLQ: "dlq",
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
	if c := consumed.Load(); c != n {
		t.Fatalf("committed %d consumed records, want %d", c, n)
	}
	tr.shared.mu.Lock()
	if len(tr.shared.byFork) < 2 || len(tr.forks) < 1 || tr.shared.flushes == 0 {
		t.Errorf("records were processed by %d Transform(s) (%d forks), Flush called %d times; want the receiver and forks, and flushes", len(tr.shared.byFork), len(tr.forks), tr.shared.flushes)
	}
	tr.shared.mu.Unlock()

	dead := n/97 + 1 // 0, 97, 194...
	recs := readCommittedRecords(t, ctx, opts, n, "out", "dlq")
	next := map[string]int{} // "<input partition>/<key>" -> the count it must show next
	var outs, dls int
	for _, r := range recs {
		if r.Topic == "dlq" {
			dls++
			continue
		}
		outs++
		k, count, _ := strings.Cut(string(r.Value), ":")
		c, _ := strconv.Atoi(count)
		pk := string(r.Key) + "/" + k
		if want := next[pk] + 1; c != want {
			t.Fatalf("input partition %s, key %s: count %d after %d, want %d", r.Key, k, c, next[pk], want)
		}
		next[pk] = c
	}
	if outs != n-dead || dls != dead {
		t.Fatalf("read %d outputs and %d dead letters, want %d and %d", outs, dls, n-dead, dead)
	}
}
