package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/eosctl/eos/fencing"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session is one incarnation of a transactional consumer-producer: a
// kgo.GroupTransactSession plus the bookkeeping exactly-once needs on top of
// it. A Session is not safe for concurrent use, except that produce promises
// run on the client's goroutines.
//
// What the wrapper adds to GroupTransactSession:
//   - a failed produce makes the transaction abort: kgo would otherwise commit
//     whatever records succeeded;
//   - every End error is classified, and fenced errors become a
//     *fencing.FencedError naming the transactional.id and both epochs;
//   - timings for metrics: Begin to EndTxn acknowledged, and the commit itself.
type Session struct {
	id   string
	opts []kgo.Opt
	log  *slog.Logger

	s          *kgo.GroupTransactSession
	producerID int64
	epoch      int16

	inTxn   bool
	began   time.Time
	records int

	mu      sync.Mutex
	prodErr error // first failed produce of the open transaction

	// promiseFn is s.promise, bound once: a method value passed to every
	// Produce was a heap allocation per record.
	promiseFn func(*kgo.Record, error)
}

// Open creates the client for transactional.id id and initialises its
// producer (InitProducerId), which fences any earlier incarnation with the
// same id and makes the coordinator abort the transaction it left open.
// opts must configure seed brokers, the group and the topics to consume; Open
// adds the transactional id, read_committed and stable-offset requirements.
func Open(ctx context.Context, id string, log *slog.Logger, opts ...kgo.Opt) (*Session, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	all := append([]kgo.Opt{
		kgo.TransactionalID(id),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
	}, opts...)
	s, err := kgo.NewGroupTransactSession(all...)
	if err != nil {
		return nil, fmt.Errorf("txn: creating client for transactional.id %q: %w", id, err)
	}
	sess := &Session{id: id, opts: opts, log: log, s: s}
	sess.promiseFn = sess.promise
	pid, epoch, err := s.Client().ProducerID(ctx)
	if err != nil {
		s.Close()
		if Classify(err) == Fenced {
			return nil, sess.fenced(ctx, err, "")
		}
		return nil, fmt.Errorf("txn: initialising producer for transactional.id %q: %w", id, Denied(err, "WRITE", "TransactionalId", id))
	}
	sess.producerID, sess.epoch = pid, epoch
	log.Info("producer initialised", "transactional_id", id, "producer_id", pid, "epoch", epoch)
	return sess, nil
}

// group returns the consumer group the session commits offsets for.
func (s *Session) group() string {
	g, _ := s.s.Client().OptValue(kgo.ConsumerGroup).(string)
	return g
}

// MemberID returns the group member id this incarnation holds, "" if it has
// not joined.
func (s *Session) MemberID() string {
	m, _ := s.s.Client().GroupMetadata()
	return m
}

// ID returns the transactional.id.
func (s *Session) ID() string { return s.id }

// Producer returns the producer id and epoch this incarnation holds.
func (s *Session) Producer() (id int64, epoch int16) { return s.producerID, s.epoch }

// Client returns the underlying client, for polling and admin requests. Do
// not use it to begin or end transactions.
func (s *Session) Client() *kgo.Client { return s.s.Client() }

// InTxn reports whether a transaction is open.
func (s *Session) InTxn() bool { return s.inTxn }

// Began returns when the open transaction began.
func (s *Session) Began() time.Time { return s.began }

// Records returns how many records the open transaction has produced.
func (s *Session) Records() int { return s.records }

// PollRecords polls the next batch of fetched records.
func (s *Session) PollRecords(ctx context.Context, max int) kgo.Fetches {
	return s.s.PollRecords(ctx, max)
}

// Begin opens a transaction.
func (s *Session) Begin() error {
	if err := s.s.Begin(); err != nil {
		return fmt.Errorf("txn: beginning a transaction for %q: %w", s.id, err)
	}
	s.inTxn, s.began, s.records = true, time.Now(), 0
	s.mu.Lock()
	s.prodErr = nil
	s.mu.Unlock()
	return nil
}

// Produce sends r inside the open transaction. A failure is remembered and
// turns the next End into an abort. The record is not tied to a context: a
// canceled record would fail the transaction, and shutdown wants to commit
// it instead.
func (s *Session) Produce(r *kgo.Record) {
	s.records++
	s.s.Produce(context.Background(), r, s.promiseFn)
}

func (s *Session) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	if s.prodErr == nil {
		s.prodErr = fmt.Errorf("producing to %s[%d]: %w", r.Topic, r.Partition, Denied(err, "WRITE", "Topic", r.Topic))
	}
	s.mu.Unlock()
}

// Result describes how a transaction ended.
type Result struct {
	Committed bool
	// AbortReason is set when the transaction aborted: "requested",
	// "rebalance" (the group rebalanced before the commit), "produce-failed".
	AbortReason string
	Records     int
	// Duration runs from Begin to the EndTxn acknowledgement.
	Duration time.Duration
	// CommitDuration is the flush, offset commit and EndTxn.
	CommitDuration time.Duration
	// FlushDuration is the part of CommitDuration spent waiting for the
	// records still in flight (their acks=all replication); the rest is
	// the offset commit and EndTxn, round trips to the group and
	// transaction coordinators. Telling the two apart says whether a slow
	// commit waits on the data path or on the coordinators.
	FlushDuration time.Duration
}

// End ends the open transaction, committing the produced records and the
// consumed offsets together if commit is true and nothing has gone wrong. A
// nil error means the outcome is known and in Result. A non-nil error has
// been classified (see Classify): a fenced one is a *fencing.FencedError, and
// after any error the Session must be closed and, unless fenced or denied,
// reopened with Reopen. An error of ctx (its deadline passed while the flush
// or the EndTxn was under way) wraps ErrOutcomeUnknown, so it classifies as
// Unknown, not Canceled.
func (s *Session) End(ctx context.Context, commit bool) (Result, error) {
	start := time.Now()
	res := Result{Records: s.records}
	if commit {
		// Wait for every record's outcome before deciding: kgo commits
		// whatever succeeded, so a record that fails during End's own
		// flush would be lost while its offset commits.
		if err := s.s.Client().Flush(ctx); err != nil {
			// Only ctx ends a flush: records may still be in flight.
			return res, fmt.Errorf("txn: flushing the transaction of %q: %w (%w)", s.id, err, ErrOutcomeUnknown)
		}
		res.FlushDuration = time.Since(start)
	}
	s.mu.Lock()
	prodErr := s.prodErr
	s.mu.Unlock()
	if commit && prodErr != nil {
		commit = false
		res.AbortReason = "produce-failed"
	}
	committed, err := s.s.End(ctx, kgo.TransactionEndTry(commit))
	s.inTxn = false
	now := time.Now()
	res.Duration, res.CommitDuration = now.Sub(s.began), now.Sub(start)
	if err != nil {
		switch Classify(err) {
		case Fenced:
			return res, s.fenced(ctx, err, "")
		case Auth:
			err = Denied(Denied(err, "WRITE", "TransactionalId", s.id), "READ", "Group", s.group())
			return res, fmt.Errorf("txn: ending transaction of %q: %w", s.id, err)
		}
		if commit && errors.Is(err, kerr.InvalidTxnState) {
			// Under KIP-890 the coordinator that aborts a transaction
			// bumps the epoch, and then takes an EndTxn from the epoch
			// before for a retry of the abort: a commit meets
			// INVALID_TXN_STATE, not PRODUCER_FENCED. So the outcome is
			// known, aborted, and the abort came from a replacement's
			// InitProducerId or from transaction.timeout.ms: the two
			// causes of a producer-epoch fence, which the worker tells
			// apart by asking the group. Re-initialising at once, as for
			// an unknown outcome, fenced the replacement instead (seen on
			// Apache Kafka 4.4: the new instance exited 3, the zombie
			// ran on).
			return res, s.fenced(ctx, err, fencing.ReasonProducerEpoch)
		}
		// ctx running out is no exception: a process paused past
		// it (a GC pause, SIGSTOP) wakes up to a deadline that says
		// nothing about the EndTxn it sent.
		return res, fmt.Errorf("txn: ending transaction of %q (commit=%v): %w (%w)", s.id, commit, err, ErrOutcomeUnknown)
	}
	switch {
	case prodErr != nil && Classify(prodErr) == Fenced:
		// Aborted after a produce refused for its epoch
		// (INVALID_PRODUCER_EPOCH): another incarnation took over, or
		// the coordinator aborted this transaction for outliving
		// transaction.timeout.ms, which under KIP-890 bumps the epoch.
		// As a FencedError it gets the same look as a fence met by the
		// EndTxn, which tells the two apart; a bare error stopped
		// workers whose transaction had merely timed out.
		return res, s.fenced(ctx, prodErr, "")
	case prodErr != nil && Classify(prodErr) != Unknown:
		// Aborted; a refused or invalid write will be refused again.
		return res, fmt.Errorf("txn: transaction of %q aborted: %w", s.id, prodErr)
	}
	res.Committed = committed
	s.refreshProducer(ctx)
	if !committed && res.AbortReason == "" {
		res.AbortReason = "requested"
		if commit {
			res.AbortReason = "rebalance"
		}
	}
	if prodErr != nil {
		s.log.Warn("transaction aborted after a failed produce", "transactional_id", s.id, "err", prodErr)
	}
	return res, nil
}

// refreshProducer records the epoch the producer holds now: under KIP-890
// (transaction.version 2) every EndTxn bumps it.
func (s *Session) refreshProducer(ctx context.Context) {
	if pid, epoch, err := s.s.Client().ProducerID(ctx); err == nil {
		s.producerID, s.epoch = pid, epoch
	}
}

// fenced builds the FencedError, asking the coordinator for the epoch that
// replaced ours. The lookup is best effort and bounded. reason is the
// fence's, or "" for the one cause names.
func (s *Session) fenced(ctx context.Context, cause error, reason fencing.Reason) error {
	if reason == "" {
		reason, _ = fencing.IsFenced(cause)
	}
	fe := &fencing.FencedError{
		TransactionalID: s.id, Reason: reason,
		ProducerID: s.producerID, Epoch: s.epoch, CurrentEpoch: -1, Err: cause,
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	adm := kadm.NewClient(s.s.Client())
	if d, err := adm.DescribeTransactions(ctx, s.id); err == nil {
		if t, ok := d[s.id]; ok && t.Err == nil {
			fe.CurrentEpoch = t.ProducerEpoch
		}
	}
	return fe
}

// Close closes the client. With static membership the group keeps this
// instance's partitions for it until the session timeout, so a quick Reopen
// or process restart resumes them without a rebalance.
func (s *Session) Close() { s.s.Close() }

// Reopen closes the client and opens a fresh one with the same id and
// options. The new InitProducerId bumps the epoch, so whatever the old
// incarnation left open is aborted by the coordinator, and the new consumer
// starts from the offsets the broker has committed (fetched with
// RequireStable, so it waits for any transaction still completing).
func (s *Session) Reopen(ctx context.Context) (*Session, error) {
	s.Close()
	n, err := Open(ctx, s.id, s.log, s.opts...)
	if err != nil {
		return nil, err
	}
	s.log.Info("producer re-initialised", "transactional_id", s.id, "producer_id", n.producerID, "epoch", n.epoch, "previous_epoch", s.epoch)
	return n, nil
}

// ErrClosed is returned by a worker whose client was closed under it.
var ErrClosed = errors.New("txn: client closed")
