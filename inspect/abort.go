package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TransactionAt returns the producer whose transaction is open on topic's
// partition starting at startOffset, as `eosctl txn hanging` and `eosctl txn
// producers` print it. It wraps ErrNotFound if no open transaction starts
// there, and an error wrapping eos.ErrNoTopic if the partition does not exist.
func TransactionAt(ctx context.Context, adm *kadm.Client, topic string, partition int32, startOffset int64) (Producer, error) {
	prods, err := Producers(ctx, adm, topic, partition)
	if err != nil {
		return Producer{}, err
	}
	for _, p := range prods {
		if p.TxnStartOffset == startOffset {
			return p, nil
		}
	}
	return Producer{}, fmt.Errorf("no open transaction starts at offset %d of %s[%d]: %w", startOffset, topic, partition, ErrNotFound)
}

// WriteAbortMarker writes an abort marker for p's open transaction on p's
// partition, as `kafka-transactions.sh abort` does (KIP-664): the
// partition's leader appends the marker with p's producer id, epoch and
// coordinator epoch, the transaction's records on that partition become
// aborted, and the LSO moves past them. Only the one partition is touched;
// the transaction's coordinator is not told, so use this for transactions
// the coordinator has lost (hanging ones), and FenceTransactionalID for
// transactions it still knows.
//
// Kafka requires CLUSTER_ACTION on the cluster for this request.
func WriteAbortMarker(ctx context.Context, adm *kadm.Client, p Producer) error {
	set := kadm.TopicsSet{}
	set.Add(p.Topic, p.Partition)
	resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: false,
		CoordinatorEpoch: p.CoordinatorEpoch, Topics: set,
	})
	if err != nil {
		return fmt.Errorf("writing an abort marker for producer %d epoch %d to %s[%d]: %w", p.ProducerID, p.ProducerEpoch, p.Topic, p.Partition, err)
	}
	var perr error = errors.New("the broker did not answer for the partition")
	resp.EachPartition(func(r kadm.TxnMarkersPartitionResponse) {
		if r.Topic == p.Topic && r.Partition == p.Partition {
			perr = r.Err
		}
	})
	if perr != nil {
		return fmt.Errorf("writing an abort marker for producer %d epoch %d to %s[%d]: %w", p.ProducerID, p.ProducerEpoch, p.Topic, p.Partition, perr)
	}
	return nil
}

// Fenced is what FenceTransactionalID did.
type Fenced struct {
	// Before is the coordinator's view before the fence.
	Before Transaction `json:"before"`
	// ProducerID and Epoch are what the fencing InitProducerId returned.
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// FenceTransactionalID initialises a producer with transactional id id
// (InitProducerId), which bumps the id's epoch: the coordinator aborts the
// transaction the id has open, writing abort markers to all of its
// partitions, and any live producer still using the id is fenced (an eos
// worker then stops with a *fencing.FencedError). The id's transaction timeout is kept as
// the coordinator had it. opts must reach the cluster (seed brokers, TLS,
// SASL) and must not set a transactional id. An id the coordinator does not
// know wraps ErrNotFound.
func FenceTransactionalID(ctx context.Context, adm *kadm.Client, opts []kgo.Opt, id string) (Fenced, error) {
	ts, err := DescribeTransactions(ctx, adm, id)
	if err != nil {
		return Fenced{}, err
	}
	f := Fenced{Before: ts[0]}
	timeout := f.Before.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), opts...), kgo.TransactionalID(id), kgo.TransactionTimeout(timeout))...)
	if err != nil {
		return f, fmt.Errorf("creating a client for transactional id %q: %w", id, err)
	}
	defer cl.Close()
	f.ProducerID, f.Epoch, err = cl.ProducerID(ctx)
	if err != nil {
		return f, fmt.Errorf("fencing transactional id %q (InitProducerId): %w", id, err)
	}
	return f, nil
}

// WaitPast polls until the LSO of each partition in starts has moved past
// the given offset (a transaction's start offset: once its abort marker is
// written, the LSO moves beyond it), or ctx ends, and returns the offsets
// it read last. A fence's markers are written asynchronously, so the LSO
// moves a moment after FenceTransactionalID returns. When ctx ends first,
// the last offsets read are returned with ctx's error.
func WaitPast(ctx context.Context, adm *kadm.Client, starts map[string]map[int32]int64) (Offsets, error) {
	var topics []string
	for t := range starts {
		topics = append(topics, t)
	}
	var last Offsets
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, 500*time.Millisecond) {
		offs, err := ReadOffsets(ctx, adm, topics...)
		if err == nil {
			last = offs
			if movedPast(offs, starts) {
				return offs, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("waiting for the LSO to move: %w", ctx.Err())
		case <-time.After(backoff):
		}
	}
}

func movedPast(offs Offsets, starts map[string]map[int32]int64) bool {
	for t, ps := range starts {
		for p, start := range ps {
			if o, ok := offs.Lookup(t, p); !ok || o.LSO <= start {
				return false
			}
		}
	}
	return true
}
