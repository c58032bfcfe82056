package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Recovering transactions cut off by a crash
//
// Kafka completes a transaction that a broker crash interrupted: the
// coordinator reloads its transaction log and writes the ABORT markers (or
// finishes the COMMIT) in every partition the transaction touched. kfake,
// restarted on a data directory after a SIGKILL, rebuilds each partition from
// its segments and treats data that no control batch follows as an aborted
// transaction in memory, but writes no ABORT marker and forgets the
// transaction, so nothing writes one later. The missing marker costs
// committed data: a read_committed consumer, told that producer P aborted a
// transaction from offset F, skips P's batches from F until it meets P's
// ABORT marker, so it also skips every transaction P commits on that
// partition after the restart. (And at kfake's next crash, its replay
// matches the unterminated range with P's next control batch, so a COMMIT
// there makes the aborted records visible.)
//
// Before the broker opens its port, recoverInterrupted starts kfake
// privately on the same data directory, finds every aborted range that the
// Fetch API reports and no ABORT marker of the same producer ends, and
// writes that marker the way a client aborts: AddPartitionsToTxn for those
// partitions, with no data, then EndTxn(abort), as the producer's
// transactional id at its current epoch. Aborting a transaction without
// data writes the marker and no new aborted range, so each range gets
// exactly its one marker. Then it shuts kfake down cleanly, which writes its
// state to disk. If kfake fixes the defect, this finds nothing to do.
//
// What it cannot do: kfake writes a transaction's markers partition by
// partition and logs the outcome after the last one, so a crash in between
// leaves a transaction committed on some partitions and (after this
// recovery) aborted on the others, with its offset commit lost. Kafka logs
// the outcome first (PrepareCommit) and completes it after a crash. The
// window is the few milliseconds of one EndTxn.

// recoverInterrupted writes the ABORT markers kfake omitted for transactions
// open when it last stopped without a clean shutdown (see above). It does
// nothing for a directory without persisted state. A producer it cannot
// abort for (its transactional id expired, say) is logged, not fatal; an
// error means the directory could not be read at all.
func recoverInterrupted(cfg Config, nodes int, log *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "meta.json")); err != nil {
		return nil // nothing persisted yet
	}
	start := time.Now()
	opts := []kfake.Opt{kfake.Ports(make([]int, nodes)...), kfake.DataDir(cfg.DataDir), kfake.SyncWrites()}
	if len(cfg.BrokerConfigs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(cfg.BrokerConfigs))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	defer c.Close() // a clean shutdown: the markers and the state are on disk
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3) // v4+ is the brokers' own batched form
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.MaxVersions(versions))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	open, err := unterminated(ctx, cl, log)
	if err != nil {
		return err
	}
	aborted := 0
	for _, pid := range slices.Sorted(maps.Keys(open)) {
		if err := abortAs(ctx, cl, pid, open[pid]); err != nil {
			// The broker still starts: unavailable is worse than this.
			log.Error("could not write the ABORT markers of a transaction the last crash interrupted; read_committed readers may miss the producer's later commits on these partitions",
				"producer_id", pid, "partitions", fmt.Sprint(open[pid].Sorted()), "err", err)
			continue
		}
		aborted++
		log.Info("wrote the ABORT markers of a transaction the last crash interrupted", "producer_id", pid, "partitions", fmt.Sprint(open[pid].Sorted()))
	}
	if aborted > 0 {
		log.Warn(RecoveredMessage, "transactions", aborted, "duration", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// RecoveredMessage is what the broker logs, at warn level with the count in
// "transactions", after aborting the transactions a crash interrupted.
const RecoveredMessage = "aborted the transactions the last crash interrupted"

// unterminated returns, by producer id, the partitions where an aborted
// range of that producer has no ABORT marker after it.
func unterminated(ctx context.Context, cl *kgo.Client, log *slog.Logger) (map[int64]kadm.TopicsSet, error) {
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return nil, err
	}
	open := map[int64]kadm.TopicsSet{}
	for _, t := range md.Topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			pl := scanLog{topic: t.Topic, id: t.ID, partition: p.Partition}
			if err := pl.read(ctx, cl.Broker(int(p.Leader))); err != nil {
				return nil, fmt.Errorf("reading %s[%d]: %w", t.Topic, p.Partition, err)
			}
			for _, pid := range pl.unterminated(log.Warn) {
				set := open[pid]
				set.Add(t.Topic, p.Partition)
				open[pid] = set
			}
		}
	}
	return open, nil
}

// scanLog is what recovery needs to know of one partition's log.
type scanLog struct {
	topic     string
	id        [16]byte
	partition int32

	aborted map[int64][]int64    // producer id -> first offsets of its aborted ranges
	markers map[int64][]int64    // producer id -> offsets of its ABORT markers
	epochs  map[int64][]txnBatch // producer id -> its transactional data batches
}

// txnBatch is a transactional data batch: its first offset and producer epoch.
type txnBatch struct {
	offset int64
	epoch  int16
}

// read reads the whole partition with read_committed Fetch requests, which
// report the aborted ranges, and notes the ABORT markers and the epochs of
// transactional data.
func (l *scanLog) read(ctx context.Context, leader *kgo.Broker) error {
	l.aborted, l.markers, l.epochs = map[int64][]int64{}, map[int64][]int64{}, map[int64][]txnBatch{}
	var at int64
	for {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.IsolationLevel, req.SessionEpoch = 8<<20, 1, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = l.topic, l.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = l.partition, at, 4<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, leader)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("malformed fetch response")
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			if errors.Is(err, kerr.OffsetOutOfRange) && at < p.LogStartOffset {
				at = p.LogStartOffset
				continue
			}
			return err
		}
		for _, a := range p.AbortedTransactions {
			if !slices.Contains(l.aborted[a.ProducerID], a.FirstOffset) {
				l.aborted[a.ProducerID] = append(l.aborted[a.ProducerID], a.FirstOffset)
			}
		}
		next, n := l.batches(p.RecordBatches)
		if n == 0 || next >= p.HighWatermark {
			return nil
		}
		at = next
	}
}

// batches notes the ABORT markers and transactional data of raw and returns
// the offset after the last batch, and how many batches there were.
func (l *scanLog) batches(raw []byte) (next int64, n int) {
	for len(raw) >= 12 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			break
		}
		raw = raw[12+b.Length:]
		n++
		next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		const transactional, control = 0x10, 0x20
		switch {
		case b.Attributes&control != 0:
			var r kmsg.Record
			// A control record's key is version (2 bytes), type (2 bytes): 0 abort, 1 commit.
			if r.ReadFrom(b.Records) == nil && len(r.Key) >= 4 && r.Key[2] == 0 && r.Key[3] == 0 {
				l.markers[b.ProducerID] = append(l.markers[b.ProducerID], b.FirstOffset)
			}
		case b.Attributes&transactional != 0:
			l.epochs[b.ProducerID] = append(l.epochs[b.ProducerID], txnBatch{b.FirstOffset, b.ProducerEpoch})
		}
	}
	return next, n
}

// unterminated returns the producers with an aborted range that no later
// ABORT marker of theirs ends: each range, in offset order, takes the
// producer's first unused marker after it. A producer whose data after such
// a range has more than one epoch is left alone and reported: it wrote
// again after the crash, and a marker now would abort that too.
func (l *scanLog) unterminated(warn func(string, ...any)) []int64 {
	var out []int64
	for _, pid := range slices.Sorted(maps.Keys(l.aborted)) {
		firsts := slices.Sorted(slices.Values(l.aborted[pid]))
		markers, m := l.markers[pid], 0
		for _, first := range firsts {
			for m < len(markers) && markers[m] <= first {
				m++
			}
			if m < len(markers) {
				m++
				continue
			}
			if l.epochsFrom(pid, first) > 1 {
				warn("not writing an ABORT marker: the producer wrote again after its interrupted transaction", "topic", l.topic, "partition", l.partition, "producer_id", pid, "from", first)
				break
			}
			out = append(out, pid)
			break
		}
	}
	return out
}

// epochsFrom counts the epochs of pid's transactional data from offset on.
func (l *scanLog) epochsFrom(pid, offset int64) int {
	seen := map[int16]bool{}
	for _, e := range l.epochs[pid] {
		if e.offset >= offset {
			seen[e.epoch] = true
		}
	}
	return len(seen)
}

// abortAs aborts, as the transactional id that holds producer id pid, an
// empty transaction on parts: the coordinator writes an ABORT marker to
// each of them.
func abortAs(ctx context.Context, cl *kgo.Client, pid int64, parts kadm.TopicsSet) error {
	txn, err := holderOf(ctx, kadm.NewClient(cl), pid)
	if err != nil {
		return err
	}
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = txn.TxnID, pid, txn.ProducerEpoch
	for _, t := range parts.Sorted() {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = t.Topic, t.Partitions
		add.Topics = append(add.Topics, rt)
	}
	added, err := add.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, t := range added.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("adding %s[%d] to the transaction of %q: %w", t.Topic, p.Partition, txn.TxnID, err)
			}
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txn.TxnID, pid, txn.ProducerEpoch, false
	ended, err := end.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(ended.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("aborting the transaction of %q: %w", txn.TxnID, err)
	}
	return nil
}

// holderOf returns the transactional id that holds producer id pid, with
// no transaction open (a restarted kfake knows none).
func holderOf(ctx context.Context, adm *kadm.Client, pid int64) (kadm.DescribedTransaction, error) {
	listed, err := adm.ListTransactions(ctx, []int64{pid}, nil)
	if err != nil {
		return kadm.DescribedTransaction{}, err
	}
	if len(listed) != 1 {
		return kadm.DescribedTransaction{}, fmt.Errorf("no transactional id holds the producer id (%d found)", len(listed))
	}
	described, err := adm.DescribeTransactions(ctx, listed.TransactionalIDs()...)
	if err != nil {
		return kadm.DescribedTransaction{}, err
	}
	for _, txn := range described {
		switch {
		case txn.Err != nil:
			return txn, fmt.Errorf("describing transactional id %q: %w", txn.TxnID, txn.Err)
		case txn.ProducerID != pid || txn.State != "Empty":
			return txn, fmt.Errorf("transactional id %q holds producer id %d in state %s, want %d Empty", txn.TxnID, txn.ProducerID, txn.State, pid)
		}
		return txn, nil
	}
	return kadm.DescribedTransaction{}, fmt.Errorf("transactional id %v not described", listed.TransactionalIDs())
}

// KillBetweenRequests SIGKILLs this process just before the cluster handles
// its next request (or after a second if none comes): a crash at a point
// where every request handled so far has been applied in full, and, with
// SyncWrites, written to disk. kfake cannot survive a crash at an arbitrary
// instant the way Kafka does: it writes a transaction's markers partition by
// partition and logs the outcome after the last one, with no transaction
// log to finish from, so a crash inside an EndTxn leaves the transaction
// committed on some partitions and aborted on the others. Kafka logs
// PrepareCommit first and completes the transaction after a crash. The
// chaos suite's hard bounce kills the broker this way (`eosctl broker` does
// it on SIGUSR1) so that what it judges is eos, not kfake's missing log.
func (b *Broker) KillBetweenRequests() {
	kill := func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; handle nothing more
	}
	b.c.ControlKey(-1, func(kmsg.Request) (kmsg.Response, error, bool) {
		kill()
		return nil, nil, false
	})
	time.AfterFunc(time.Second, kill)
}
