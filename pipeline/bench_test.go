package pipeline_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The benchmarks below measure the per-record cost of the worker engine
// against a bare kgo consume-transform-produce loop doing the same work
// under the same transactions, so that a regression in the engine shows up
// in benchstat as a widening gap:
//
//	go test ./pipeline -run '^$' -bench . -benchtime 1000000x -count 6 | tee new.txt
//	benchstat old.txt new.txt
//
// One op is one record copied and committed (ns/op is per record). Each
// benchmark drains a fresh backlog of b.N 100-byte records from 6
// partitions through an embedded broker in the same process, committing
// every 100ms, so the figures include the broker's share of the 2 cores; the
// difference between the worker and the bare loop is the engine's.

const benchInterval = 100 * time.Millisecond

var benchSeq atomic.Int64

type benchEnv struct {
	b       *broker.Broker
	opts    []kgo.Opt
	in, out string
}

func newBenchEnv(b testing.TB, n int) *benchEnv {
	b.Helper()
	br, err := broker.Start(broker.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(br.Close)
	e := &benchEnv{b: br, opts: []kgo.Opt{kgo.SeedBrokers(br.Addrs()...)}}
	id := benchSeq.Add(1)
	e.in, e.out = fmt.Sprintf("bench-in-%d", id), fmt.Sprintf("bench-out-%d", id)
	cl, err := kgo.NewClient(e.opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, -1, nil, e.out); err != nil {
		b.Fatal(err)
	}
	if _, err := datagen.Produce(ctx, cl, datagen.Config{Topic: e.in, Count: int64(n), Size: 100, Partitions: 6}); err != nil {
		b.Fatal(err)
	}
	return e
}

func passthrough() pipeline.Transform {
	return pipeline.TransformFunc(func(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
		out.Emit(pipeline.Output{Key: in.Key, Value: in.Value, Headers: in.Headers, Timestamp: in.Timestamp})
		return nil
	})
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkWorkerPassthrough is the pipeline worker copying b.N records.
func BenchmarkWorkerPassthrough(b *testing.B) {
	e := newBenchEnv(b, b.N)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var consumed atomic.Int64
	w, err := pipeline.New(pipeline.Config{
		App: "bench-" + e.in, Instance: "0", Inputs: []string{e.in}, Output: e.out,
		CommitInterval: benchInterval, ClientOpts: e.opts,
		OnEvent: func(ev pipeline.Event) {
			if ev.Kind == pipeline.EventCommitted && consumed.Add(int64(ev.Consumed)) >= int64(b.N) {
				cancel()
			}
		},
	}, passthrough())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := w.Run(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	reportRate(b, start)
	if got := consumed.Load(); got != int64(b.N) {
		b.Fatalf("committed %d records, want %d", got, b.N)
	}
}

// BenchmarkBareTransactLoop is the same copy written directly against
// kgo.GroupTransactSession: poll, produce each record, End every
// benchInterval. It is the floor the worker's engine is measured against.
func BenchmarkBareTransactLoop(b *testing.B) {
	e := newBenchEnv(b, b.N)
	ctx := context.Background()
	s, err := kgo.NewGroupTransactSession(append(append([]kgo.Opt(nil), e.opts...),
		kgo.TransactionalID("bare-"+e.in), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumerGroup("bare-"+e.in), kgo.ConsumeTopics(e.in), kgo.DisableAutoCommit())...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	start := time.Now()
	var consumed, committed int
	var began time.Time
	inTxn := false
	for committed < b.N {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if inTxn {
			pctx, cancel = context.WithDeadline(ctx, began.Add(benchInterval))
		}
		fs := s.PollRecords(pctx, 10000)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if !inTxn {
				if err := s.Begin(); err != nil {
					b.Fatal(err)
				}
				inTxn, began = true, time.Now()
			}
			key := strconv.AppendInt(nil, r.Offset, 10) // stands in for the idempotency key
			s.Produce(ctx, &kgo.Record{Topic: e.out, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp,
				Headers: append(append([]kgo.RecordHeader(nil), r.Headers...), kgo.RecordHeader{Key: pipeline.IdempotencyKeyHeader, Value: key})}, nil)
			consumed++
		})
		if inTxn && (time.Since(began) >= benchInterval || consumed == b.N) {
			ok, err := s.End(ctx, kgo.TryCommit)
			if err != nil || !ok {
				b.Fatalf("commit: %v (committed %v)", err, ok)
			}
			inTxn, committed = false, consumed
		}
	}
	b.StopTimer()
	reportRate(b, start)
}
