package pipeline_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fenceDrill copies 2,000 records with one worker through a fence that a
// test injects with the embedded broker's request control, and checks that
// the worker re-initialised in place and the output is exactly once.
type fenceDrill struct {
	t      *testing.T
	b      *broker.Broker
	conn   *testbroker.Conn
	armed  atomic.Int32 // set once the worker has committed: inject now
	struck atomic.Int32 // set by the test once it has injected the fence
}

func newFenceDrill(t *testing.T) *fenceDrill {
	b := testbroker.Embedded(t, broker.Config{})
	d := &fenceDrill{t: t, b: b, conn: testbroker.Connect(t, b, 60*time.Second)}
	if _, err := kadm.NewClient(d.conn.Client).CreateTopic(d.conn.Ctx, 2, -1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *fenceDrill) produce(from, to int) {
	d.t.Helper()
	for i := from; i < to; i++ {
		d.conn.Client.Produce(d.conn.Ctx, &kgo.Record{Topic: "in", Key: strconv.AppendInt(nil, int64(i), 10), Value: strconv.AppendInt(nil, int64(i), 10)}, nil)
	}
	if err := d.conn.Client.Flush(d.conn.Ctx); err != nil {
		d.t.Fatal(err)
	}
}

// worker is the drill's copying worker of app: it arms the drill at its
// first commit and counts its re-initialisations in reinits.
func (d *fenceDrill) worker(app string, reinits *atomic.Int64) *pipeline.Worker {
	w, err := pipeline.New(pipeline.Config{
		App: app, Instance: "0", Inputs: []string{"in"}, Output: "out",
		CommitInterval: 20 * time.Millisecond, MaxTxnRecords: 100,
		TransactionTimeout: 10 * time.Second, SessionTimeout: 10 * time.Second,
		ClientOpts: d.conn.Opts,
		OnEvent: func(e pipeline.Event) {
			switch e.Kind {
			case pipeline.EventCommitted:
				d.armed.Store(1)
			case pipeline.EventReinit:
				reinits.Add(1)
			}
		},
	}, pipeline.TransformFunc(func(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
		out.Emit(pipeline.Output{Key: in.Key, Value: in.Value})
		return nil
	}))
	if err != nil {
		d.t.Fatal(err)
	}
	return w
}

// run copies half the input, waits for the fence, copies the rest and
// returns how often the worker re-initialised; what names the fault in
// failures.
func (d *fenceDrill) run(app, what string) int64 {
	t, ctx := d.t, d.conn.Ctx
	const n = 2000
	d.produce(0, n/2)
	var reinits atomic.Int64
	w := d.worker(app, &reinits)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for d.struck.Load() == 0 {
		select {
		case err := <-done:
			t.Fatalf("the worker stopped before or at %s: %v", what, err)
		case <-ctx.Done():
			t.Fatalf("no %s happened: the test proved nothing", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
	d.produce(n/2, n)
	// Read_committed, the output must hold every input record once.
	for {
		rep, err := verify.Run(ctx, d.conn.Opts, verify.Config{Input: "in", Output: "out"})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() && rep.OutputRecords == n {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the worker stopped instead of re-initialising in place after %s: %v (output so far: %s)", what, err, rep.Summary())
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
		t.Fatalf("the worker never re-initialised: %s did not reach it", what)
	}
	return reinits.Load()
}

// A worker whose transaction the coordinator aborted for outliving
// transaction.timeout.ms meets INVALID_PRODUCER_EPOCH on its next produce
// (under KIP-890 the abort bumped the epoch), although nobody replaced it.
// The group still lists it as itself, so it must re-initialise in place and
// go on exactly once, not stop as a zombie would: on Apache Kafka it exited 3
// (the txn-timeout chaos drill). The broker here refuses one transactional
// produce to the output with that error, which is what the worker sees.
func TestWorkerRefusedForItsEpochByItsOwnTimeoutReinitialisesInPlace(t *testing.T) {
	d := newFenceDrill(t)
	d.b.Cluster().ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		d.b.Cluster().KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || d.armed.Load() == 0 || !d.struck.CompareAndSwap(0, 1) {
			return nil, nil, false
		}
		return testbroker.RefuseProduce(req, kerr.InvalidProducerEpoch.Code), nil, true
	})
	d.run("self", "a produce refused with INVALID_PRODUCER_EPOCH")
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
	d := newFenceDrill(t)
	c := d.b.Cluster()
	var silentUntil atomic.Int64
	var refusedDescribes atomic.Int32
	c.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if d.armed.Load() == 0 || d.struck.Load() != 0 {
			return nil, nil, false
		}
		silentUntil.Store(time.Now().Add(2 * time.Second).UnixNano())
		d.struck.Store(1)
		resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.ProducerFenced.Code
		return resp, nil, true
	})
	c.ControlKey(kmsg.DescribeGroups.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if time.Now().UnixNano() > silentUntil.Load() {
			return nil, nil, false
		}
		refusedDescribes.Add(1)
		return nil, errors.New("coordinator restarting"), true // the connection closes, as a dying broker's does
	})
	d.run("look", "a fenced EndTxn while the group did not answer")
	if refusedDescribes.Load() == 0 {
		t.Fatal("no DescribeGroups was refused: the check never met a silent group")
	}
}

// answerACommitInvalidTxnState has the broker answer the first commit after
// the drill is armed with INVALID_TXN_STATE, as Apache Kafka answers a
// commit from the epoch before the one its abort bumped to, and strikes.
func (d *fenceDrill) answerACommitInvalidTxnState() {
	c := d.b.Cluster()
	c.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req := kreq.(*kmsg.EndTxnRequest); !req.Commit || d.armed.Load() == 0 || !d.struck.CompareAndSwap(0, 1) {
			return nil, nil, false
		}
		resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
}

// Under KIP-890 a commit that reaches the coordinator just after it aborted
// the transaction (for a replacement's InitProducerId) is answered
// INVALID_TXN_STATE. A zombie that took that for an unknown outcome
// re-initialised its producer, which fenced its own replacement: on Apache
// Kafka 4.4 the new instance exited 3 and the zombie ran on. Here the
// broker answers one commit so while the group lists another member for
// this instance: the worker must stop fenced, without re-initialising.
func TestAZombieWhoseCommitWasAbortedForItsReplacementStopsFenced(t *testing.T) {
	d := newFenceDrill(t)
	d.answerACommitInvalidTxnState()
	c := d.b.Cluster()
	c.ControlKey(kmsg.DescribeGroups.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if d.struck.Load() == 0 {
			return nil, nil, false
		}
		req := kreq.(*kmsg.DescribeGroupsRequest)
		resp := kreq.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.State, rg.ProtocolType, rg.Protocol = g, "Stable", "consumer", "cooperative-sticky"
			m := kmsg.NewDescribeGroupsResponseGroupMember()
			m.MemberID, m.InstanceID = "replacement-member", kmsg.StringPtr("zombie-0")
			rg.Members = append(rg.Members, m)
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	d.produce(0, 1000)
	var reinits atomic.Int64
	w := d.worker("zombie", &reinits)
	if w.TransactionalID() != "zombie-0" {
		t.Fatalf("transactional.id %q: the forged group lists the wrong instance", w.TransactionalID())
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(d.conn.Ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the worker did not stop (struck %d, re-initialised %d times)", d.struck.Load(), reinits.Load())
	}
	if d.struck.Load() == 0 {
		t.Fatalf("the worker stopped before any commit was answered INVALID_TXN_STATE: %v", err)
	}
	var fe *fencing.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, eos.ErrFenced) || !errors.Is(err, kerr.InvalidTxnState) || reinits.Load() != 0 {
		t.Fatalf("the zombie returned %v after re-initialising %d times; want a FencedError and no re-initialisation", err, reinits.Load())
	}
}

// The same answer with the group still listing this instance as itself is
// the coordinator's abort of a transaction that outlived
// transaction.timeout.ms: the worker re-initialises in place and goes on
// exactly once.
func TestWorkerWhoseCommitWasAbortedByItsOwnTimeoutReinitialisesInPlace(t *testing.T) {
	d := newFenceDrill(t)
	d.answerACommitInvalidTxnState()
	d.run("timedout", "a commit answered INVALID_TXN_STATE")
}
