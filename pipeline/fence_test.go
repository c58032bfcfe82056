package pipeline_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A worker whose transaction the coordinator aborted for outliving
// transaction.timeout.ms meets INVALID_PRODUCER_EPOCH on its next produce
// (under KIP-890 the abort bumped the epoch), although nobody replaced it.
// The group still lists it as itself, so it must re-initialise in place and
// go on exactly once, not stop as a zombie would: on Apache Kafka it exited 3
// (the txn-timeout chaos drill). The broker here refuses one transactional
// produce to the output with that error, which is what the worker sees.
func TestWorkerRefusedForItsEpochByItsOwnTimeoutReinitialisesInPlace(t *testing.T) {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, "in"); err != nil {
		t.Fatal(err)
	}

	// Refuse one transactional produce, once the worker has committed.
	var armed, refused atomic.Int32
	c := b.Cluster()
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || armed.Load() == 0 || !refused.CompareAndSwap(0, 1) {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidProducerEpoch.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c.KeepControl()

	const n = 2000
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: "in", Key: strconv.AppendInt(nil, int64(i), 10), Value: strconv.AppendInt(nil, int64(i), 10)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, n/2)

	var committed, reinits atomic.Int64
	w, err := pipeline.New(pipeline.Config{
		App: "self", Instance: "0", Inputs: []string{"in"}, Output: "out",
		CommitInterval: 20 * time.Millisecond, MaxTxnRecords: 100,
		TransactionTimeout: 10 * time.Second, SessionTimeout: 10 * time.Second,
		ClientOpts: opts,
		OnEvent: func(e pipeline.Event) {
			switch e.Kind {
			case pipeline.EventCommitted:
				committed.Add(int64(e.Consumed))
				armed.Store(1)
			case pipeline.EventReinit:
				reinits.Add(1)
			}
		},
	}, pipeline.TransformFunc(func(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
		out.Emit(pipeline.Output{Key: in.Key, Value: in.Value})
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for refused.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("the worker stopped (%d produce(s) refused so far): %v", refused.Load(), err)
		case <-ctx.Done():
			t.Fatal("no produce was refused: the test proved nothing")
		case <-time.After(10 * time.Millisecond):
		}
	}
	produce(n/2, n)
	// Read_committed, the output must hold every input record once.
	for {
		rep, err := verify.Run(ctx, opts, verify.Config{Input: "in", Output: "out"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() && rep.OutputRecords == n {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the worker stopped instead of re-initialising in place after its own transaction was refused for its epoch: %v (output so far: %s)", err, rep.Summary())
		case <-ctx.Done():
			t.Fatalf("the output never caught up: %s", rep.Summary())
		case <-time.After(200 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if reinits.Load() == 0 {
		t.Fatal("the worker never re-initialised: the refused produce did not reach it")
	}
}

// The check that tells a self-inflicted fence from a replacement asks the
// group, and the fences that need it come with broker restarts, when the
// group's coordinator may not answer for a while. A lookup that fails is
// taken again, not taken for a replacement: a failed DescribeGroups made
// both workers of a chaos drill exit 3 while the embedded broker restarted,
// although nobody had replaced them. Here the broker answers one EndTxn
// with PRODUCER_FENCED and closes the connection of every DescribeGroups
// for 2s after it.
func TestFenceCheckLooksAgainWhenTheGroupDoesNotAnswer(t *testing.T) {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	var armed, fenced, refusedDescribes atomic.Int32
	var silentUntil atomic.Int64
	c := b.Cluster()
	c.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if armed.Load() == 0 || !fenced.CompareAndSwap(0, 1) {
			return nil, nil, false
		}
		silentUntil.Store(time.Now().Add(2 * time.Second).UnixNano())
		resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp, nil, true
	})
	c.ControlKey(kmsg.DescribeGroups.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if time.Now().UnixNano() > silentUntil.Load() {
			return nil, nil, false
		}
		refusedDescribes.Add(1)
		return nil, errors.New("coordinator restarting"), true // the connection closes, as a dying broker's does
	})

	const n = 2000
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: "in", Key: strconv.AppendInt(nil, int64(i), 10), Value: strconv.AppendInt(nil, int64(i), 10)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, n/2)
	var reinits atomic.Int64
	w, err := pipeline.New(pipeline.Config{
		App: "look", Instance: "0", Inputs: []string{"in"}, Output: "out",
		CommitInterval: 20 * time.Millisecond, MaxTxnRecords: 100,
		TransactionTimeout: 10 * time.Second, SessionTimeout: 10 * time.Second,
		ClientOpts: opts,
		OnEvent: func(e pipeline.Event) {
			switch e.Kind {
			case pipeline.EventCommitted:
				armed.Store(1)
			case pipeline.EventReinit:
				reinits.Add(1)
			}
		},
	}, pipeline.TransformFunc(func(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
		out.Emit(pipeline.Output{Key: in.Key, Value: in.Value})
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for fenced.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("the worker stopped before the fence: %v", err)
		case <-ctx.Done():
			t.Fatal("no EndTxn was fenced: the test proved nothing")
		case <-time.After(10 * time.Millisecond):
		}
	}
	produce(n/2, n)
	for {
		rep, err := verify.Run(ctx, opts, verify.Config{Input: "in", Output: "out"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() && rep.OutputRecords == n {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the worker stopped while the group did not answer the fence check (%d DescribeGroups refused): %v", refusedDescribes.Load(), err)
		case <-ctx.Done():
			t.Fatalf("the output never caught up: %s", rep.Summary())
		case <-time.After(200 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if refusedDescribes.Load() == 0 || reinits.Load() == 0 {
		t.Fatalf("%d DescribeGroups refused and %d re-initialisations, want at least 1 of each: the check never met a silent group", refusedDescribes.Load(), reinits.Load())
	}
}
