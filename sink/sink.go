package sink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Sink writes records from Kafka into one table. Create it with New, run it
// with Run, and Close it.
type Sink struct {
	cfg  Config
	db   *DB
	cl   *kgo.Client
	cols []string // the key column, then the mapped columns
	// keyUnique: the table has a unique index on exactly the key column,
	// which the INSERT names as its conflict target (conflictTarget).
	keyUnique bool
	warn      deadWarn // the dead letters not warned about yet
	// staged holds the PostgreSQL connections (*pgconn.PgConn) that
	// have this sink's staging table (ensureStage).
	staged sync.Map

	mu sync.Mutex
	// from holds, for every partition this process owns, the next offset
	// stored in the database when it last read or wrote it (noRow: none).
	from map[tp]int64
	// fatal is set when an assignment could not read the database;
	// stopPoll then wakes Run's poll.
	fatal    error
	stopPoll context.CancelFunc
}

// New checks the configuration and the database (the credentials, the
// table and its columns; it creates the offsets table if missing) and
// connects to Kafka. Nothing is read or written to the table yet. With
// Config.Replay it deletes the group's stored offsets, once per
// Config.ReplayID.
func New(ctx context.Context, cfg Config) (*Sink, error) {
	s, err := openDB(ctx, cfg)
	if err != nil {
		return nil, err
	}
	db := s.db
	cfg = s.cfg
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(heartbeat(cfg.SessionTimeout)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AdjustFetchOffsetsFn(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.revoked),
	}, cfg.ClientOpts...)
	if cfg.Instance != "" {
		opts = append(opts, kgo.InstanceID(cfg.Group+"-"+cfg.Instance))
	}
	if s.cl, err = kgo.NewClient(opts...); err != nil {
		db.Close()
		return nil, eos.BadConfig("sink.Config", "kafka client: %w", err)
	}
	// Without this, brokers that never answer surfaced 30s later as the
	// dead-letter topic's "context deadline exceeded".
	if err := admin.Ping(ctx, s.cl, cfg.StartTimeout); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.ensureDLQ(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// openDB is New's database half: the configuration checked, the database
// opened and prepared; no Kafka client yet.
func openDB(ctx context.Context, cfg Config) (*Sink, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.Mapping.Validate(); err != nil {
		return nil, eos.BadConfig("sink.Config", "Mapping: %w", err)
	}
	db, err := open(cfg.DSN, &timeouts{lock: cfg.LockTimeout, idle: cfg.IdleInTransactionTimeout})
	if err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, db: db, from: map[tp]int64{}}
	s.cols = append([]string{cfg.Mapping.KeyColumn}, columnNames(cfg.Mapping)...)
	if err := s.prepare(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func columnNames(m *Mapping) []string {
	var out []string
	for _, c := range m.Columns {
		out = append(out, c.Name)
	}
	if m.Mode == ModeTransition {
		out = append(out, m.StatusColumn)
	}
	return out
}

// prepare pings the database, checks that the table has the mapped
// columns and creates the offsets table, in that order, so that a
// misconfigured sink stops before it writes or consumes anything.
func (s *Sink) prepare(ctx context.Context) error {
	r := s.cfg.Retry
	onErr := func(err error, class string) {
		s.cfg.Metrics.dbError(class)
		if c, _ := classify(err); c == retriable {
			s.cfg.Logger.Warn("database not ready; retrying", "error", err, "class", class)
		}
	}
	if err := s.db.Ping(ctx, r); err != nil {
		return fmt.Errorf("database %s: %w", s.db.d.Name, err)
	}
	d := s.db.d
	quoted := make([]string, len(s.cols))
	for i, c := range s.cols {
		quoted[i] = d.Quote(c)
	}
	probe := fmt.Sprintf("SELECT %s FROM %s WHERE 1 = 0", strings.Join(quoted, ", "), d.Quote(s.cfg.Mapping.Table))
	err := retry(ctx, r, onErr, func(ctx context.Context) error {
		rows, err := s.db.QueryContext(ctx, probe)
		if err != nil {
			return err
		}
		return rows.Close()
	})
	if err != nil {
		return fmt.Errorf("table %s with columns %s: %w", s.cfg.Mapping.Table, strings.Join(s.cols, ", "), err)
	}
	if err := s.conflictTarget(ctx); err != nil {
		return err
	}
	err = retry(ctx, r, onErr, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, d.offsetsDDL(s.cfg.OffsetsTable))
		return err
	})
	if err != nil {
		return fmt.Errorf("creating OffsetsTable %s: %w", s.cfg.OffsetsTable, err)
	}
	if s.cfg.Replay {
		return s.replay(ctx)
	}
	return nil
}

// ensureDLQ creates the dead-letter topic if it is missing, so a dead
// letter never waits for a topic.
func (s *Sink) ensureDLQ(ctx context.Context) error {
	adm := kadm.NewClient(s.cl)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := adm.CreateTopic(tctx, 1, -1, nil, s.cfg.DLQ)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
			return fmt.Errorf("%w: creating DLQ topic %s: %w", ErrAuth, s.cfg.DLQ, err)
		}
		return fmt.Errorf("creating DLQ topic %s: %w", s.cfg.DLQ, err)
	}
	return nil
}

// assigned runs when the group assigns partitions, after Kafka's committed
// offsets are fetched and before fetching starts: it replaces them with the
// database's. A partition without a stored offset starts at the earliest.
func (s *Sink) assigned(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var stored map[string]map[int32]int64
	err := retry(ctx, s.cfg.Retry, func(err error, class string) { s.cfg.Metrics.dbError(class) }, func(ctx context.Context) error {
		var err error
		stored, err = StoredOffsets(ctx, s.db, s.cfg.OffsetsTable, s.cfg.Group)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.mu.Lock()
			s.fatal = fmt.Errorf("reading the stored offsets on assignment: %w", err)
			if s.stopPoll != nil {
				s.stopPoll()
			}
			s.mu.Unlock()
		}
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	parts := map[string][]int32{}
	for topic, ps := range offsets {
		for p := range ps {
			next, ok := stored[topic][p]
			if ok {
				ps[p] = kgo.NewOffset().At(next).WithEpoch(-1)
				s.from[tp{topic, p}] = next
			} else {
				ps[p] = kgo.NewOffset().AtStart()
				s.from[tp{topic, p}] = noRow
			}
			parts[topic] = append(parts[topic], p)
		}
	}
	s.event(pipeline.Event{Kind: pipeline.EventAssigned, Partitions: parts})
	s.cfg.Logger.Info("partitions assigned; resuming from the database's offsets", "partitions", parts)
	return offsets, nil
}

// revoked forgets partitions this process no longer owns. With
// BlockRebalanceOnPoll it runs between batches, never during one.
func (s *Sink) revoked(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, ps := range lost {
		for _, p := range ps {
			delete(s.from, tp{topic, p})
			s.cfg.Metrics.dropLag(topic, p)
		}
	}
	s.event(pipeline.Event{Kind: pipeline.EventRevoked, Partitions: lost})
}

func (s *Sink) event(e pipeline.Event) {
	e.Time = time.Now()
	e.App = s.cfg.Group
	s.cfg.OnEvent(e)
}

// Run consumes and writes until ctx ends (it returns nil: every batch read
// was committed or rolled back, nothing is left half-done) or a
// non-retriable error, or a retriable one that outlasted Config.Retry.
func (s *Sink) Run(ctx context.Context) error {
	s.event(pipeline.Event{Kind: pipeline.EventStarted})
	err := s.run(ctx)
	s.flushWarn()
	ev := pipeline.Event{Kind: pipeline.EventStopped}
	if err != nil {
		ev.Err = err.Error()
	}
	s.event(ev)
	return err
}

func (s *Sink) run(ctx context.Context) error {
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	s.mu.Lock()
	s.stopPoll = stop
	s.mu.Unlock()
	for {
		fetches := s.cl.PollRecords(pollCtx, s.cfg.BatchSize)
		s.mu.Lock()
		fatal := s.fatal
		s.mu.Unlock()
		if fatal != nil {
			s.cl.AllowRebalance()
			return fatal
		}
		if ctx.Err() != nil || fetches.IsClientClosed() {
			s.cl.AllowRebalance()
			return nil
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			if errors.Is(err, kerr.InvalidSessionTimeout) {
				ferr = eos.BadConfig("sink.Config", "SessionTimeout %s: %w", s.cfg.SessionTimeout, err)
				return
			}
			var ke *kerr.Error
			if errors.As(err, &ke) && (ke == kerr.TopicAuthorizationFailed || ke == kerr.GroupAuthorizationFailed || ke == kerr.SaslAuthenticationFailed) {
				ferr = fmt.Errorf("%w: kafka: %w", ErrAuth, err)
				return
			}
			s.cfg.Logger.Warn("fetch error; the client retries", "topic", topic, "partition", p, "error", err)
		})
		if ferr != nil {
			return ferr
		}
		if recs := fetches.Records(); len(recs) > 0 {
			wctx, cancel := shutdownBound(ctx, s.cfg.ShutdownTimeout)
			err := s.write(wctx, recs)
			cancel()
			if err != nil && ctx.Err() != nil {
				s.cl.AllowRebalance()
				s.cfg.Logger.Warn("stopping: the batch in flight did not commit within the shutdown timeout; rolled back, its records are read again on the next start", "shutdown_timeout", s.cfg.ShutdownTimeout, "error", err)
				return nil
			}
			if err != nil {
				return err
			}
			fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
				if n := len(fp.Records); n > 0 {
					s.cfg.Metrics.setLag(fp.Topic, fp.Partition, fp.LastStableOffset-(fp.Records[n-1].Offset+1))
				}
			})
		}
		s.cl.AllowRebalance()
	}
}

// shutdownBound returns the context a batch is written under: it outlives
// ctx (a SIGTERM lets the batch in flight commit) by at most bound, then
// ends, which cancels the statement in progress and rolls the
// transaction back.
func shutdownBound(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(bound, cancel)
		context.AfterFunc(wctx, func() { t.Stop() })
	})
	return wctx, func() { stop(); cancel() }
}

// Close leaves the group and closes the connections.
func (s *Sink) Close() {
	if s.cl != nil {
		s.cl.Close()
	}
	s.db.Close()
}

// heartbeat is a third of the session timeout, at most kgo's default 3s:
// a session timeout under 3s would otherwise be refused by the client.
func heartbeat(session time.Duration) time.Duration {
	return min(3*time.Second, session/3)
}
