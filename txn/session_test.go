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
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var refused atomic.Int32
	c.ControlKey(kmsg.Produce.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.ProduceRequest)
		if req.TransactionID == nil || refused.Load() > 0 {
			return nil, nil, false
		}
		refused.Add(1)
		return testbroker.RefuseProduce(req, kerr.InvalidProducerEpoch.Code), nil, true
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, "t-0", nil, kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("t"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Begin(); err != nil {
		t.Fatal(err)
	}
	s.Produce(&kgo.Record{Topic: "out", Value: []byte("v")})
	_, err = s.End(ctx, true)
	if refused.Load() == 0 {
		t.Fatal("the broker refused no produce: the test proved nothing")
	}
	var fe *fencing.FencedError
	if !errors.As(err, &fe) || fe.Reason != fencing.ReasonProducerEpoch || !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("End after a produce refused with INVALID_PRODUCER_EPOCH returned %v (%T), want a *fencing.FencedError for the producer epoch", err, err)
	}
}
