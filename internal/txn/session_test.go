package txn

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A produce refused with INVALID_PRODUCER_EPOCH is what a worker meets when
// the coordinator aborted its transaction for outliving
// transaction.timeout.ms (under KIP-890 the abort bumps the epoch) as well
// as when another incarnation took the transactional.id over. End must hand
// it back as a *fencing.FencedError, as it does a fence met by the EndTxn
// itself: the worker tells the two causes apart only for a FencedError, and
// a bare wrapped error stopped a worker whose own transaction had merely
// timed out (exit 3 on Apache Kafka, in the txn-timeout drill).
func TestEndReturnsAFencedErrorForAProduceRefusedForItsEpoch(t *testing.T) {
	c := newCluster(t)
	var refused atomic.Int32
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || refused.Load() > 0 {
			return nil, nil, false
		}
		refused.Add(1)
		return testbroker.RefuseProduce(req, kerr.InvalidProducerEpoch.Code), nil, true
	})

	err := endOne(t, c, true)
	if refused.Load() == 0 {
		t.Fatal("the broker refused no produce: the test proved nothing")
	}
	var fe *fencing.FencedError
	if !errors.As(err, &fe) || fe.Reason != fencing.ReasonProducerEpoch || !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("End after a produce refused with INVALID_PRODUCER_EPOCH returned %v (%T), want a *fencing.FencedError for the producer epoch", err, err)
	}
}

// Under KIP-890 a coordinator that has aborted a transaction (for a
// replacement's InitProducerId, or for transaction.timeout.ms) has bumped
// the epoch, and takes a commit from the epoch before for a retry of that
// abort: it answers INVALID_TXN_STATE. End must hand that back as a
// producer-epoch *fencing.FencedError, for the worker's look at the group,
// not as an unknown outcome: re-initialising at once fenced the replacement
// (Apache Kafka 4.4). An abort answered so stays an unknown outcome.
func TestEndTakesACommitTheCoordinatorHadAbortedForAFence(t *testing.T) {
	c := newCluster(t)
	var refused atomic.Int32
	c.ControlKey(kmsg.EndTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		refused.Add(1)
		resp := kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	err := endOne(t, c, true)
	if refused.Load() == 0 {
		t.Fatal("the broker answered no EndTxn: the test proved nothing")
	}
	var fe *fencing.FencedError
	if !errors.As(err, &fe) || fe.Reason != fencing.ReasonProducerEpoch || !errors.Is(err, kerr.InvalidTxnState) || Classify(err) != Fenced {
		t.Fatalf("a commit answered INVALID_TXN_STATE returned %v (%T, class %v), want a producer-epoch *fencing.FencedError", err, err, Classify(err))
	}

	if err := endOne(t, c, false); !errors.Is(err, ErrOutcomeUnknown) || Classify(err) != Unknown {
		t.Fatalf("an abort answered INVALID_TXN_STATE returned %v (class %v), want an unknown outcome", err, Classify(err))
	}
}

// A commit's time is split between waiting for its records (the flush) and
// the offset commit and EndTxn: with the broker holding the produce for
// 300ms and answering the rest at once, FlushDuration is those 300ms and
// the remainder of CommitDuration is short; an abort flushes nothing.
func TestEndSplitsTheCommitIntoFlushAndEndTxn(t *testing.T) {
	const hold = 300 * time.Millisecond
	c := newCluster(t)
	var held atomic.Int32
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if kreq.(*kmsg.ProduceRequest).TransactionID != nil && held.Add(1) == 1 {
			c.SleepControl(func() { time.Sleep(hold) })
		}
		return nil, nil, false
	})

	ctx, s := openSession(t, c)
	// Consume a record first: a session whose group has not joined waits
	// for it in End, which is not what is measured here.
	pl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if err := pl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for n := 0; n == 0; {
		fs := s.PollRecords(ctx, 1)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		n = fs.NumRecords()
	}
	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	s.Produce(&kgo.Record{Topic: "out", Value: []byte("v")})
	res, err := s.End(ctx, true)
	if err != nil || !res.Committed {
		t.Fatalf("End: %+v, %v", res, err)
	}
	if held.Load() == 0 {
		t.Fatal("no transactional produce was held: the test proved nothing")
	}
	if rest := res.CommitDuration - res.FlushDuration; res.FlushDuration < hold*9/10 || rest < 0 || rest >= hold {
		t.Fatalf("flush %s of a commit of %s, with the produce held %s: want the flush at least the hold and the rest shorter", res.FlushDuration, res.CommitDuration, hold)
	}

	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	s.Produce(&kgo.Record{Topic: "out", Value: []byte("v")})
	if res, err = s.End(ctx, false); err != nil || res.Committed || res.FlushDuration != 0 {
		t.Fatalf("an abort: %+v, %v; want no flush", res, err)
	}
}

// endOne opens a session on c, produces one record in a transaction and
// ends it (commit or abort), returning End's error.
func endOne(t *testing.T, c *kfake.Cluster, commit bool) error {
	t.Helper()
	ctx, s := openSession(t, c)
	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	s.Produce(&kgo.Record{Topic: "out", Value: []byte("v")})
	_, err := s.End(ctx, commit)
	return err
}

// newCluster is a one-broker embedded cluster with topics in and out,
// closed when the test ends; a test installs its request controls on it.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// openSession opens the Session "t-0" of group t over in on c, closed when
// the test ends, and returns it with a context bounding the test.
func openSession(t *testing.T, c *kfake.Cluster) (context.Context, *Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := Open(ctx, "t-0", nil, kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("t"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return ctx, s
}
