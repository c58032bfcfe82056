package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrNotFound is wrapped when a transactional id, or an open transaction at
// a given offset, does not exist.
var ErrNotFound = errors.New("not found")

// ListedTransaction is one row of `eosctl txn list`.
type ListedTransaction struct {
	Coordinator     int32  `json:"coordinator"`
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
}

// ListTransactions lists every transactional id the coordinators know,
// optionally only those in the given states (Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort, Empty, Dead,
// PrepareEpochFence), sorted by transactional id. State filters need Kafka
// 3.0 or newer; older brokers return every transaction, so the filter is
// applied here again.
func ListTransactions(ctx context.Context, adm *kadm.Client, states ...string) ([]ListedTransaction, error) {
	ls, err := adm.ListTransactions(ctx, nil, states)
	if err != nil {
		return nil, fmt.Errorf("listing transactions: %w", err)
	}
	var out []ListedTransaction
	for _, l := range ls.Sorted() {
		if len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool { return strings.EqualFold(s, l.State) }) {
			continue
		}
		out = append(out, ListedTransaction{Coordinator: l.Coordinator, TransactionalID: l.TxnID, ProducerID: l.ProducerID, State: l.State})
	}
	return out, nil
}

// Transaction is what a coordinator knows about one transactional id: one
// row of `eosctl txn describe`.
type Transaction struct {
	Coordinator     int32  `json:"coordinator"`
	TransactionalID string `json:"transactional_id"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	State           string `json:"state"`
	// Started is when the open transaction began; zero if none is open.
	Started time.Time     `json:"start_time,omitzero"`
	Timeout time.Duration `json:"timeout_ns"`
	// Partitions are the partitions in the open transaction (when it is
	// completing: those whose markers are not written yet).
	Partitions map[string][]int32 `json:"partitions,omitempty"`
}

// Open reports whether the coordinator has a transaction open or completing.
func (t Transaction) Open() bool {
	switch t.State {
	case "Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence":
		return true
	}
	return false
}

// Has reports whether topic's partition p is in the transaction.
func (t Transaction) Has(topic string, p int32) bool {
	return slices.Contains(t.Partitions[topic], p)
}

// DescribeTransactions describes the given transactional ids, in the order
// given. An id the coordinators do not know is an error wrapping
// ErrNotFound naming every such id.
func DescribeTransactions(ctx context.Context, adm *kadm.Client, ids ...string) ([]Transaction, error) {
	ds, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		return nil, fmt.Errorf("describing transactional ids %s: %w", strings.Join(ids, ","), err)
	}
	var out []Transaction
	var missing []string
	for _, id := range ids {
		d, ok := ds[id]
		switch {
		case !ok || errors.Is(d.Err, kerr.TransactionalIDNotFound):
			missing = append(missing, strconv.Quote(id))
			continue
		case d.Err != nil:
			return nil, fmt.Errorf("describing transactional id %q: %w", id, d.Err)
		}
		out = append(out, fromDescribed(d))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("transactional id %s: %w", strings.Join(missing, ", "), ErrNotFound)
	}
	return out, nil
}

func fromDescribed(d kadm.DescribedTransaction) Transaction {
	t := Transaction{
		Coordinator: d.Coordinator, TransactionalID: d.TxnID, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
		State: d.State, Timeout: time.Duration(d.TimeoutMillis) * time.Millisecond,
	}
	if d.StartTimestamp > 0 {
		t.Started = time.UnixMilli(d.StartTimestamp)
	}
	if len(d.Topics) > 0 {
		t.Partitions = map[string][]int32{}
		for _, tp := range d.Topics.Sorted() {
			ps := slices.Clone(tp.Partitions)
			slices.Sort(ps)
			t.Partitions[tp.Topic] = ps
		}
	}
	return t
}

// Producer is the state a partition leader keeps for one producer: one row
// of `eosctl txn producers` (Kafka's DescribeProducers, KIP-664).
type Producer struct {
	Leader        int32  `json:"leader"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	LastSequence  int32  `json:"last_sequence"`
	// LastTimestamp is the time of the producer's last write to the
	// partition, as the broker recorded it.
	LastTimestamp    time.Time `json:"last_timestamp,omitzero"`
	CoordinatorEpoch int32     `json:"coordinator_epoch"`
	// TxnStartOffset is the first offset of the producer's open
	// transaction on this partition, or -1 if none is open.
	TxnStartOffset int64 `json:"txn_start_offset"`
}

// Producers describes the producers of topic's partitions (all of them if
// none are named), sorted by partition and producer id. A topic or
// partition that does not exist is an error wrapping eos.ErrNoTopic.
func Producers(ctx context.Context, adm *kadm.Client, topic string, partitions ...int32) ([]Producer, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describing topic %q: %w", topic, err)
	}
	td, ok := tds[topic]
	switch {
	case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return nil, fmt.Errorf("topic %q: %w", topic, eos.ErrNoTopic)
	case td.Err != nil:
		return nil, fmt.Errorf("describing topic %q: %w", topic, td.Err)
	}
	set := kadm.TopicsSet{}
	for _, p := range partitions {
		if _, ok := td.Partitions[p]; !ok {
			return nil, fmt.Errorf("topic %q has %d partitions, no partition %d: %w", topic, len(td.Partitions), p, eos.ErrNoTopic)
		}
		set.Add(topic, p)
	}
	if len(partitions) == 0 {
		set.Add(topic, td.Partitions.Numbers()...)
	}
	return describeProducers(ctx, adm, set)
}

func describeProducers(ctx context.Context, adm *kadm.Client, set kadm.TopicsSet) ([]Producer, error) {
	dts, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("describing producers of %s: %w", partitionsString(set), err)
	}
	var out []Producer
	for _, dp := range dts.SortedPartitions() {
		if dp.Err != nil {
			if errors.Is(dp.Err, kerr.UnknownTopicOrPartition) {
				return nil, fmt.Errorf("partition %s[%d]: %w", dp.Topic, dp.Partition, eos.ErrNoTopic)
			}
			return nil, fmt.Errorf("describing producers of %s[%d]: %w", dp.Topic, dp.Partition, dp.Err)
		}
		for _, p := range dp.ActiveProducers.Sorted() {
			pr := Producer{
				Leader: p.Leader, Topic: p.Topic, Partition: p.Partition,
				ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, LastSequence: p.LastSequence,
				CoordinatorEpoch: p.CoordinatorEpoch, TxnStartOffset: p.CurrentTxnStartOffset,
			}
			if p.LastTimestamp > 0 {
				pr.LastTimestamp = time.UnixMilli(p.LastTimestamp)
			}
			out = append(out, pr)
		}
	}
	return out, nil
}

// MaxTransactionTimeout returns the brokers' transaction.max.timeout.ms:
// no transaction may stay open longer, so an open transaction older than
// it has been forgotten by its coordinator. Kafka's find-hanging uses it as
// its threshold.
//
// It asks the brokers by id: asked with no id, Apache Kafka describes only
// the cluster-wide dynamic defaults, which hold transaction.max.timeout.ms
// only if an operator set it dynamically (the embedded broker answers
// either way).
func MaxTransactionTimeout(ctx context.Context, adm *kadm.Client) (time.Duration, error) {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return 0, fmt.Errorf("listing brokers to describe: %w", err)
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	if err != nil {
		return 0, fmt.Errorf("describing broker configs: %w", err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key != "transaction.max.timeout.ms" || c.Value == nil {
				continue
			}
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil || ms <= 0 {
				return 0, fmt.Errorf("broker config transaction.max.timeout.ms=%q is not a positive number of milliseconds", *c.Value)
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	return 0, errors.New("the brokers did not report transaction.max.timeout.ms")
}
