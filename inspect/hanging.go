package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// OpenTransaction is a transaction open on one partition, as the partition
// leader reports it (DescribeProducers), joined with what the transaction's
// coordinator knows about it (ListTransactions, DescribeTransactions).
type OpenTransaction struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	Leader           int32  `json:"leader"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	// StartOffset is the transaction's first offset on the partition: the
	// partition's LSO cannot pass it while the transaction is open.
	StartOffset int64 `json:"start_offset"`
	// LastTimestamp is the producer's last write to the partition.
	LastTimestamp time.Time `json:"last_timestamp,omitzero"`

	// TransactionalID is the id whose coordinator holds this producer id,
	// or "" if no coordinator does.
	TransactionalID string `json:"transactional_id,omitempty"`
	// State is the coordinator's state of that id, or "".
	State string `json:"coordinator_state,omitempty"`
	// Started is when the coordinator says the transaction began; zero if
	// the coordinator does not know this transaction.
	Started time.Time `json:"start_time,omitzero"`
	// Age runs from Started, or, when the coordinator does not know the
	// transaction, from LastTimestamp (so it is then a lower bound).
	Age time.Duration `json:"age_ns"`

	LSO int64 `json:"last_stable_offset"`
	HWM int64 `json:"high_watermark"`
	// Blocked is HWM - StartOffset: how many offsets of the partition
	// read_committed consumers cannot see because of this transaction.
	Blocked int64 `json:"blocked"`

	// Problem says how the coordinator's view disagrees with the
	// partition's ("" if it agrees): the coordinator does not know the
	// producer id, has moved on to another producer id or state, or does
	// not list the partition in the transaction. Such a transaction will
	// never be completed by its coordinator.
	Problem string `json:"problem,omitempty"`
	// Hanging is set when the transaction is open longer than the
	// threshold the scan was given, or has a Problem that persisted when
	// the partition was described again; Reason says which.
	Hanging bool   `json:"hanging"`
	Reason  string `json:"reason,omitempty"`
}

// FindHanging runs Kafka's find-hanging procedure (KIP-664) over topics
// (every non-internal topic if none are named): the open transactions on
// their partitions that are older than olderThan, or that their
// coordinator does not know. olderThan <= 0 means the brokers'
// transaction.max.timeout.ms, past which no healthy transaction is still
// open. It returns only the hanging transactions, oldest first.
func FindHanging(ctx context.Context, adm *kadm.Client, olderThan time.Duration, topics ...string) ([]OpenTransaction, time.Duration, error) {
	if olderThan <= 0 {
		d, err := MaxTransactionTimeout(ctx, adm)
		if err != nil {
			return nil, 0, fmt.Errorf("finding the default threshold (pass one explicitly): %w", err)
		}
		olderThan = d
	}
	if len(topics) == 0 {
		tds, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, olderThan, fmt.Errorf("listing topics: %w", err)
		}
		topics = tds.Names()
	}
	offs, err := ReadOffsets(ctx, adm, topics...)
	if err != nil {
		return nil, olderThan, err
	}
	open, err := Scan(ctx, adm, offs, olderThan)
	if err != nil {
		return nil, olderThan, err
	}
	var out []OpenTransaction
	for _, o := range open {
		if o.Hanging {
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b OpenTransaction) int { return int(b.Age - a.Age) })
	return out, olderThan, nil
}

// Scan returns the transactions open on the partitions in offs, sorted by
// topic, partition and start offset, each marked Hanging if it is older
// than olderThan or its coordinator's view disagrees with the partition's.
//
// It costs three admin requests, plus a fourth only if some transaction
// disagrees with its coordinator: such a candidate is confirmed by
// describing its partition again, because a transaction that completes
// between the requests looks the same for a moment (its coordinator has
// moved on while the partition has not yet received its marker). A
// candidate whose partition no longer has it open is dropped.
//
// A producer whose transaction start offset lies below the partition's
// LSO is not counted as open: the LSO cannot have passed an open
// transaction, so that state is stale (the embedded broker keeps it after
// an abort marker written by WriteTxnMarkers; Kafka clears it).
func Scan(ctx context.Context, adm *kadm.Client, offs Offsets, olderThan time.Duration) ([]OpenTransaction, error) {
	open, err := openOn(ctx, adm, offs, allPartitions(offs))
	if err != nil || len(open) == 0 {
		return nil, err
	}
	if err := joinCoordinators(ctx, adm, open); err != nil {
		return nil, err
	}
	now := time.Now()
	recheck := kadm.TopicsSet{}
	for i := range open {
		o := &open[i]
		switch {
		case !o.Started.IsZero() && o.Problem == "":
			o.Age = now.Sub(o.Started)
		case !o.LastTimestamp.IsZero():
			o.Age = now.Sub(o.LastTimestamp)
		}
		o.Age = max(o.Age, 0)
		switch {
		case o.Age > olderThan:
			o.Hanging, o.Reason = true, fmt.Sprintf("open for %s, longer than %s", o.Age.Round(time.Second), olderThan)
			if o.Problem != "" {
				o.Reason += "; " + o.Problem
			}
		case o.Problem != "":
			recheck.Add(o.Topic, o.Partition)
		}
	}
	if len(recheck) > 0 {
		if open, err = confirm(ctx, adm, offs, open, recheck); err != nil {
			return nil, err
		}
	}
	return open, nil
}

// openOn describes the producers of set and returns their open
// transactions.
func openOn(ctx context.Context, adm *kadm.Client, offs Offsets, set kadm.TopicsSet) ([]OpenTransaction, error) {
	prods, err := describeProducers(ctx, adm, set)
	if err != nil {
		return nil, err
	}
	var open []OpenTransaction
	for _, p := range prods {
		o, ok := offs.Lookup(p.Topic, p.Partition)
		if !ok || p.TxnStartOffset < 0 || p.TxnStartOffset < o.LSO {
			continue
		}
		open = append(open, OpenTransaction{
			Topic: p.Topic, Partition: p.Partition, Leader: p.Leader,
			ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, CoordinatorEpoch: p.CoordinatorEpoch,
			StartOffset: p.TxnStartOffset, LastTimestamp: p.LastTimestamp,
			LSO: o.LSO, HWM: o.HWM, Blocked: max(o.HWM-p.TxnStartOffset, 0),
		})
	}
	slices.SortFunc(open, func(a, b OpenTransaction) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.StartOffset - b.StartOffset)
	})
	return open, nil
}

// joinCoordinators finds each open transaction's transactional id and
// coordinator state, and sets Problem where they disagree.
func joinCoordinators(ctx context.Context, adm *kadm.Client, open []OpenTransaction) error {
	var pids []int64
	for _, o := range open {
		if !slices.Contains(pids, o.ProducerID) {
			pids = append(pids, o.ProducerID)
		}
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return fmt.Errorf("listing the transactions of producer ids %v: %w", pids, err)
	}
	idOf := map[int64]string{}
	var ids []string
	for _, l := range listed {
		if slices.Contains(pids, l.ProducerID) { // brokers before 3.0 ignore the filter
			idOf[l.ProducerID] = l.TxnID
			ids = append(ids, l.TxnID)
		}
	}
	described := kadm.DescribedTransactions{}
	if len(ids) > 0 {
		if described, err = adm.DescribeTransactions(ctx, ids...); err != nil {
			return fmt.Errorf("describing transactional ids %s: %w", strings.Join(ids, ","), err)
		}
	}
	for i := range open {
		o := &open[i]
		id, ok := idOf[o.ProducerID]
		if !ok {
			o.Problem = fmt.Sprintf("no coordinator knows producer id %d", o.ProducerID)
			continue
		}
		o.TransactionalID = id
		d, ok := described[id]
		if !ok {
			d.Err = errors.New("no answer")
		}
		if d.Err != nil {
			o.Problem = fmt.Sprintf("the coordinator cannot describe transactional id %q: %v", id, d.Err)
			continue
		}
		t := fromDescribed(d)
		o.State = t.State
		switch {
		case t.ProducerID != o.ProducerID:
			o.Problem = fmt.Sprintf("transactional id %q now has producer id %d", id, t.ProducerID)
		case !t.Open():
			o.Problem = fmt.Sprintf("the coordinator has no open transaction for %q (state %s)", id, t.State)
		case !t.Has(o.Topic, o.Partition):
			o.Problem = fmt.Sprintf("the coordinator's transaction for %q does not include %s[%d]", id, o.Topic, o.Partition)
		default:
			o.Started = t.Started
		}
	}
	return nil
}

// confirm describes the recheck partitions again and keeps a disagreeing
// candidate, now hanging, only if its partition still has the same
// transaction open; a candidate that is gone had just completed.
func confirm(ctx context.Context, adm *kadm.Client, offs Offsets, open []OpenTransaction, recheck kadm.TopicsSet) ([]OpenTransaction, error) {
	again, err := openOn(ctx, adm, offs, recheck)
	if err != nil {
		return nil, err
	}
	stillOpen := func(o OpenTransaction) bool {
		return slices.ContainsFunc(again, func(a OpenTransaction) bool {
			return a.Topic == o.Topic && a.Partition == o.Partition && a.ProducerID == o.ProducerID && a.StartOffset == o.StartOffset
		})
	}
	out := open[:0]
	for _, o := range open {
		if !o.Hanging && o.Problem != "" {
			if !stillOpen(o) {
				continue
			}
			o.Hanging, o.Reason = true, o.Problem
		}
		out = append(out, o)
	}
	return out, nil
}

func allPartitions(offs Offsets) kadm.TopicsSet {
	set := kadm.TopicsSet{}
	for t, ps := range offs {
		for p := range ps {
			set.Add(t, p)
		}
	}
	return set
}
