package pipeline_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A backlog whose records are older than the producer's delivery timeout
// must be copied like any other. kgo measures its record delivery timeout
// from each record's Timestamp, and passthrough keeps the input's, so a
// timeout derived from the transaction timeout failed every batch of such
// a backlog at once: every transaction aborted and the worker never made
// progress (found by eosctl bench, whose backlog outlives its first runs).
func TestBacklogOlderThanTheDeliveryTimeoutIsCopied(t *testing.T) {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, -1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	const n = 3000
	old := time.Now().Add(-2 * time.Hour) // older than any delivery timeout
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: "in", Key: strconv.AppendInt(nil, int64(i), 10), Value: datagen.Value(int64(i), old, 100), Timestamp: old}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	committed := make(chan int, 1000)
	w, err := pipeline.New(pipeline.Config{
		App: "old", Instance: "0", Inputs: []string{"in"}, Output: "out",
		CommitInterval: 50 * time.Millisecond, TransactionTimeout: 10 * time.Second,
		ClientOpts: opts,
		OnEvent: func(e pipeline.Event) {
			if e.Kind == pipeline.EventCommitted {
				committed <- e.Consumed
			}
		},
	}, pipeline.TransformFunc(func(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
		out.Emit(pipeline.Output{Key: in.Key, Value: in.Value, Headers: in.Headers, Timestamp: in.Timestamp})
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for got := 0; got < n; {
		select {
		case c := <-committed:
			got += c
		case <-ctx.Done():
			stop()
			<-done
			t.Fatalf("the worker committed %d of %d old records (aborted %d transactions)", got, n, w.Stats().Aborted.Load())
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(ctx, opts, verify.Config{Input: "in", Output: "out"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.OutputRecords != n {
		t.Fatalf("verify: %s", rep.Summary())
	}
}
