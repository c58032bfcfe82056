package inspect

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Repair is one of the two repairs of an open transaction KIP-664 gives an
// operator, prepared and not yet done: Plan... reads the cluster, a caller
// shows the plan (and may ask for confirmation), Do carries it out and
// waits for the LSO to move past the transaction.
//
// What can go wrong: a marker repair (PlanMarker) bypasses the coordinator,
// so it is only for a transaction the coordinator has lost (a hanging one);
// on a transaction it still tracks, the coordinator would later write its
// own markers. A fence (PlanFence) aborts through the coordinator, and also
// fences a live producer still using the id.
type Repair struct {
	// Method is "marker" (an abort marker written to one partition) or
	// "fence" (the transactional.id fenced, its transaction aborted by the
	// coordinator on every partition).
	Method string
	// Producer is the transaction's producer on the partition (marker).
	Producer *Producer
	// Transaction is the coordinator's view of the id (fence).
	Transaction *Transaction
	// Starts is the first offset of the transaction on each partition it
	// touches: the LSO moves past it once the abort marker is written.
	Starts map[string]map[int32]int64
	// Before are the offsets of those partitions now.
	Before []PartitionOffsets
}

// Needed reports whether there is anything to abort: a fence of an id with
// no open transaction leaves it alone.
func (r *Repair) Needed() bool {
	return r.Method == "marker" || r.Transaction != nil && r.Transaction.Open()
}

// RepairResult is what a repair did; its JSON form is the one tools print
// (eosctl txn abort does).
type RepairResult struct {
	Method   string             `json:"method"` // "marker" or "fence"
	Aborted  bool               `json:"aborted"`
	Producer *Producer          `json:"producer,omitempty"`
	Fenced   *Fenced            `json:"fenced,omitempty"`
	Before   []PartitionOffsets `json:"before"`
	After    []PartitionOffsets `json:"after,omitempty"`
}

// PlanMarker prepares writing an abort marker for the transaction that
// starts at startOffset of topic's partition. It wraps ErrNotFound if no
// open transaction starts there.
func PlanMarker(ctx context.Context, adm *kadm.Client, topic string, partition int32, startOffset int64) (*Repair, error) {
	p, err := TransactionAt(ctx, adm, topic, partition, startOffset)
	if err != nil {
		return nil, err
	}
	before, err := ReadOffsets(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	o, _ := before.Lookup(topic, partition)
	return &Repair{Method: "marker", Producer: &p, Starts: map[string]map[int32]int64{topic: {partition: startOffset}},
		Before: []PartitionOffsets{o}}, nil
}

// PlanFence prepares fencing transactional id id. It wraps ErrNotFound if
// the coordinator does not know the id. The plan of an id with no open
// transaction is not Needed.
func PlanFence(ctx context.Context, adm *kadm.Client, id string) (*Repair, error) {
	ts, err := DescribeTransactions(ctx, adm, id)
	if err != nil {
		return nil, err
	}
	tx := ts[0]
	r := &Repair{Method: "fence", Transaction: &tx, Starts: map[string]map[int32]int64{}}
	if !tx.Open() {
		return r, nil
	}
	var topics []string
	for t := range tx.Partitions {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	before, err := ReadOffsets(ctx, adm, topics...)
	if err != nil {
		return nil, err
	}
	// The transaction's first offset on each partition, to know when the
	// abort markers have landed.
	open, err := Scan(ctx, adm, before, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	for _, o := range open {
		if o.ProducerID == tx.ProducerID {
			if r.Starts[o.Topic] == nil {
				r.Starts[o.Topic] = map[int32]int64{}
			}
			r.Starts[o.Topic][o.Partition] = o.StartOffset
		}
	}
	r.Before = pick(before, tx.Partitions)
	return r, nil
}

// Do carries the repair out and waits up to wait for the LSO of every
// partition of the transaction to move past it. opts connect the fencing
// producer (fence only). The result says what was done even when the wait
// fails: an error after Aborted is set means the abort happened but the
// LSO was not seen moving.
func (r *Repair) Do(ctx context.Context, adm *kadm.Client, opts []kgo.Opt, wait time.Duration) (RepairResult, error) {
	res := RepairResult{Method: r.Method, Producer: r.Producer, Before: r.Before}
	if !r.Needed() {
		return res, nil
	}
	switch r.Method {
	case "marker":
		if err := WriteAbortMarker(ctx, adm, *r.Producer); err != nil {
			return res, err
		}
	case "fence":
		f, err := FenceTransactionalID(ctx, adm, opts, r.Transaction.TransactionalID)
		if err != nil {
			return res, err
		}
		res.Fenced = &f
	default:
		return res, fmt.Errorf("inspect: unknown repair method %q", r.Method)
	}
	res.Aborted = true
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	after, werr := WaitPast(wctx, adm, r.Starts)
	if after == nil && r.Transaction != nil {
		var topics []string
		for t := range r.Transaction.Partitions {
			topics = append(topics, t)
		}
		after, _ = ReadOffsets(ctx, adm, topics...)
	}
	parts := map[string][]int32{}
	for t, ps := range r.Starts {
		for p := range ps {
			parts[t] = append(parts[t], p)
		}
	}
	if r.Transaction != nil {
		parts = r.Transaction.Partitions
	}
	res.After = pick(after, parts)
	if werr != nil {
		return res, fmt.Errorf("aborted, but the LSO did not move past the transaction: %w", werr)
	}
	return res, nil
}

// pick returns the offsets of the given partitions, sorted.
func pick(offs Offsets, parts map[string][]int32) []PartitionOffsets {
	var out []PartitionOffsets
	for _, o := range offs.Sorted() {
		if slices.Contains(parts[o.Topic], o.Partition) {
			out = append(out, o)
		}
	}
	return out
}
