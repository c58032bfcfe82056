package sink

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// item is one record of a batch: its row, or why it cannot have one.
type item struct {
	rec  *kgo.Record
	row  row
	dead *pipeline.DeadLetterError
}

// outcome counts what a committed batch did.
type outcome struct {
	rows, dups int
	dead       []item
}

// errRowFailed: a statement failed for a row's data; the batch is tried
// again row by row to find the rows to dead-letter.
var errRowFailed = errors.New("a row of the batch cannot be written")

// write commits recs in one database transaction, retrying retriable
// errors. On a conflict (the stored offsets moved) it rolls back, re-seeks
// the batch's partitions to the database's offsets and returns nil: the
// records are read again from there.
func (s *Sink) write(ctx context.Context, recs []*kgo.Record) error {
	start := time.Now()
	items := make([]item, 0, len(recs))
	next := map[tp]int64{}
	var order []tp
	s.mu.Lock()
	from := map[tp]int64{}
	for _, r := range recs {
		p := tp{r.Topic, r.Partition}
		f, owned := s.from[p]
		if !owned {
			continue // lost in a rebalance: its new owner writes it
		}
		if _, seen := next[p]; !seen {
			order = append(order, p)
			from[p] = f
		}
		next[p] = r.Offset + 1
		it := item{rec: r}
		var err error
		if it.row, err = s.cfg.Mapping.mapRecord(r); err != nil {
			if !errors.As(err, &it.dead) {
				it.dead = &pipeline.DeadLetterError{Reason: "mapping", Err: err}
			}
		}
		items = append(items, it)
	}
	s.mu.Unlock()
	if len(order) == 0 {
		return nil
	}
	// One order for every process: two transactions that lock the same
	// offsets rows lock them in the same order, so they queue instead of
	// deadlocking.
	slices.SortFunc(order, func(a, b tp) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	oneByOne := false
	var out outcome
	onErr := func(err error, class string) {
		s.cfg.Metrics.dbError(class)
		s.cfg.Logger.Warn("batch failed; rolled back, retrying", "error", err, "class", class)
	}
	err := retry(ctx, s.cfg.Retry, onErr, func(ctx context.Context) error {
		var err error
		out, err = s.attempt(ctx, items, order, from, next, oneByOne)
		if errors.Is(err, errRowFailed) {
			oneByOne = true
			out, err = s.attempt(ctx, items, order, from, next, true)
		}
		return err
	})
	if errors.Is(err, errConflict) {
		s.cfg.Metrics.conflict()
		s.cfg.Logger.Info("stored offsets moved under this batch; rolled back, re-seeking to the database's offsets", "partitions", len(order))
		return s.resync(ctx, order)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	commit := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range order {
		if _, owned := s.from[p]; owned {
			s.from[p] = next[p]
		}
		if commit[p.topic] == nil {
			commit[p.topic] = map[int32]kgo.EpochOffset{}
		}
		commit[p.topic][p.partition] = kgo.EpochOffset{Epoch: -1, Offset: next[p]}
	}
	s.mu.Unlock()
	for _, d := range out.dead {
		s.cfg.Metrics.deadLetter(d.dead.Reason)
	}
	s.warnDead(out.dead)
	took := time.Since(start)
	s.cfg.Metrics.committed(len(items), out.rows, out.dups, took)
	s.event(pipeline.Event{Kind: pipeline.EventCommitted, Consumed: len(items), Records: out.rows, DeadLetters: len(out.dead), Duration: took})
	if s.cfg.NoKafkaCommit {
		return nil
	}
	// For lag tools only: the sink resumes from the database, never from
	// these.
	s.cl.CommitOffsets(context.WithoutCancel(ctx), commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			s.cfg.Logger.Debug("committing offsets to Kafka for lag tools failed", "error", err)
		}
	})
	return nil
}

// attempt runs one try of the batch's transaction.
func (s *Sink) attempt(ctx context.Context, items []item, order []tp, from, next map[tp]int64, oneByOne bool) (outcome, error) {
	var out outcome
	// The COPY path needs the transaction's own connection.
	var conn *sql.Conn
	if s.useCopy(len(items), oneByOne) {
		var err error
		if conn, err = s.db.Conn(ctx); err != nil {
			return out, err
		}
		defer conn.Close()
		if err := s.ensureStage(ctx, conn); err != nil {
			return out, err
		}
	}
	var tx *sql.Tx
	var err error
	if conn != nil {
		tx, err = conn.BeginTx(ctx, nil)
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return out, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	d, m := s.db.d, s.cfg.Mapping
	for _, p := range order {
		if err := advance(ctx, tx, d, s.cfg.OffsetsTable, s.cfg.Group, p, from[p], next[p]); err != nil {
			return out, err
		}
	}
	var good []*item
	for i := range items {
		if items[i].dead != nil {
			out.dead = append(out.dead, items[i])
		} else {
			good = append(good, &items[i])
		}
	}
	switch {
	case m.Mode == ModeTransition:
		err = s.transitions(ctx, tx, good, &out)
	case oneByOne:
		err = s.insertEach(ctx, tx, good, &out)
	case conn != nil:
		err = s.copyAll(ctx, conn, tx, good, &out)
	default:
		err = s.insertAll(ctx, tx, good, &out)
	}
	if err != nil {
		return out, err
	}
	if len(out.dead) > 0 {
		// Before the commit: a crash in between produces them again
		// (at-least-once), never loses them.
		dls := make([]*kgo.Record, len(out.dead))
		for i, it := range out.dead {
			dls[i] = s.deadLetter(it)
		}
		if err := s.cl.ProduceSync(ctx, dls...).FirstErr(); err != nil {
			return out, fmt.Errorf("producing %d dead letters to %s: %w", len(dls), s.cfg.DLQ, err)
		}
	}
	s.event(pipeline.Event{Kind: EventWritten, Consumed: len(items)})
	if s.cfg.CommitDelay > 0 {
		time.Sleep(s.cfg.CommitDelay)
	}
	return out, tx.Commit()
}

// insertAll writes the rows with as few multi-row INSERTs as the
// dialect's placeholder limit allows.
func (s *Sink) insertAll(ctx context.Context, tx *sql.Tx, good []*item, out *outcome) error {
	m := s.cfg.Mapping
	if m.Mode == ModeUpsert {
		good = lastPerKey(good)
	}
	per := max(1, s.db.d.MaxParams/len(s.cols))
	for len(good) > 0 {
		n := min(per, len(good))
		chunk := good[:n]
		good = good[n:]
		args := make([]any, 0, n*len(s.cols))
		for _, it := range chunk {
			args = append(args, it.row.key)
			args = append(args, it.row.vals...)
		}
		res, err := tx.ExecContext(ctx, s.db.d.insertSQL(m.Table, s.cols, m.KeyColumn, n, m.Mode == ModeUpsert, s.keyUnique), args...)
		if err != nil {
			if c, _ := classify(err); c == permanent {
				return fmt.Errorf("%w: %w", errRowFailed, err)
			}
			return err
		}
		s.count(res, n, out)
	}
	return nil
}

// count adds a statement's outcome: in insert mode a row not inserted was
// a duplicate absorbed by the key.
func (s *Sink) count(res sql.Result, n int, out *outcome) {
	affected, err := res.RowsAffected()
	if err != nil {
		affected = int64(n)
	}
	if s.cfg.Mapping.Mode == ModeUpsert {
		out.rows += n
		return
	}
	out.rows += int(affected)
	out.dups += n - int(affected)
}

// insertEach writes the rows one by one, each under a savepoint, and
// dead-letters the ones the database rejects for their data.
func (s *Sink) insertEach(ctx context.Context, tx *sql.Tx, good []*item, out *outcome) error {
	m := s.cfg.Mapping
	q := s.db.d.insertSQL(m.Table, s.cols, m.KeyColumn, 1, m.Mode == ModeUpsert, s.keyUnique)
	for _, it := range good {
		args := append([]any{it.row.key}, it.row.vals...)
		var res sql.Result
		err := savepoint(ctx, tx, func() error {
			var err error
			res, err = tx.ExecContext(ctx, q, args...)
			return err
		})
		if err != nil {
			if rejected(it, err, out) {
				continue
			}
			return err
		}
		s.count(res, 1, out)
	}
	return nil
}

// savepoint runs fn so that its failure rolls back only fn's statement:
// PostgreSQL aborts the whole transaction on an error otherwise.
func savepoint(ctx context.Context, tx *sql.Tx, fn func() error) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT eos_row"); err != nil {
		return err
	}
	if err := fn(); err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT eos_row"); rerr != nil {
			return errors.Join(rerr, err)
		}
		return err
	}
	_, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT eos_row")
	return err
}

// lastPerKey keeps the last row of each key: one statement cannot upsert
// the same key twice in PostgreSQL.
func lastPerKey(items []*item) []*item {
	last := map[string]int{}
	for i, it := range items {
		last[fmt.Sprint(it.row.key)] = i
	}
	out := items[:0:0]
	for i, it := range items {
		if last[fmt.Sprint(it.row.key)] == i {
			out = append(out, it)
		}
	}
	return out
}

// resync re-reads the stored offsets of ps and seeks there.
func (s *Sink) resync(ctx context.Context, ps []tp) error {
	var stored map[string]map[int32]int64
	err := retry(ctx, s.cfg.Retry, nil, func(ctx context.Context) error {
		var err error
		stored, err = StoredOffsets(ctx, s.db, s.cfg.OffsetsTable, s.cfg.Group)
		return err
	})
	if err != nil {
		return fmt.Errorf("re-reading the stored offsets: %w", err)
	}
	seek := map[string]map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	for _, p := range ps {
		if _, owned := s.from[p]; !owned {
			continue
		}
		next, ok := stored[p.topic][p.partition]
		if !ok {
			next = 0 // reset to the earliest by ConsumeResetOffset if 0 is gone
			s.from[p] = noRow
		} else {
			s.from[p] = next
		}
		if seek[p.topic] == nil {
			seek[p.topic] = map[int32]kgo.EpochOffset{}
		}
		seek[p.topic][p.partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
	}
	s.mu.Unlock()
	s.cl.SetOffsets(seek)
	return nil
}

// deadLetter builds the dead letter of it: the input record unchanged, with
// the headers eos's workers use (reason, error, source coordinates).
func (s *Sink) deadLetter(it item) *kgo.Record {
	in := it.rec
	hs := make([]kgo.RecordHeader, 0, len(in.Headers)+7)
	for _, h := range in.Headers {
		if h.Key != pipeline.IdempotencyKeyHeader {
			hs = append(hs, h)
		}
	}
	src := in.Topic + "/" + strconv.Itoa(int(in.Partition)) + "/" + strconv.FormatInt(in.Offset, 10)
	hs = append(hs,
		kgo.RecordHeader{Key: pipeline.DeadLetterReasonHeader, Value: []byte(it.dead.Reason)},
		kgo.RecordHeader{Key: pipeline.DeadLetterErrorHeader, Value: []byte(it.dead.Err.Error())},
		kgo.RecordHeader{Key: pipeline.DeadLetterTopicHeader, Value: []byte(in.Topic)},
		kgo.RecordHeader{Key: pipeline.DeadLetterPartitionHeader, Value: []byte(strconv.Itoa(int(in.Partition)))},
		kgo.RecordHeader{Key: pipeline.DeadLetterOffsetHeader, Value: []byte(strconv.FormatInt(in.Offset, 10))},
		kgo.RecordHeader{Key: pipeline.DeadLetterTopologyHeader, Value: []byte("sink:" + s.cfg.Mapping.Table)},
		kgo.RecordHeader{Key: pipeline.IdempotencyKeyHeader, Value: []byte(src + "/sink")},
	)
	return &kgo.Record{Topic: s.cfg.DLQ, Key: in.Key, Value: in.Value, Timestamp: in.Timestamp, Headers: hs}
}

// rejected dead-letters it if err is the database rejecting its data, and
// reports whether it did.
func rejected(it *item, err error, out *outcome) bool {
	if c, _ := classify(err); c != permanent {
		return false
	}
	out.dead = append(out.dead, item{rec: it.rec, dead: &pipeline.DeadLetterError{Reason: "rejected-by-database", Err: errors.New(dbReason(err))}})
	return true
}
