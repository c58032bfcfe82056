package sink

import (
	"log/slog"
	"regexp"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Errors a caller tells apart (with errors.Is) to handle each its own way.
var (
	// (Every error about the configuration itself, a malformed DSN or
	// mapping, a table or column the database does not have, is an
	// *eos.ConfigError, matched by eos.ErrConfig. Nothing has been written
	// when one is returned.)
	// ErrAuth is wrapped when the database refuses the credentials or
	// the privileges (wrong password, no grant on the table); it matches
	// eos.ErrAuth too.
	ErrAuth = eos.Sentinel("database refused authentication or authorization", eos.ErrAuth)
)

// EventWritten is the event of a batch whose rows and offsets are written
// in the open transaction, just before COMMIT. A crash after it and before
// the matching EventCommitted must leave nothing behind.
const EventWritten pipeline.EventKind = "written"

// Config configures a Sink. Zero values take the defaults documented on
// each field.
type Config struct {
	// DSN names the database: postgres://user:pass@host:port/db?...,
	// mysql://user:pass@host:port/db?... or sqlite:PATH (demos only).
	DSN string
	// Group is the Kafka consumer group, and the key of this sink's rows
	// in the offsets table. Required.
	Group string
	// Instance, if set, makes this process a static member of the group
	// (group.instance.id GROUP-INSTANCE): restarted with the same Instance
	// after a crash, it takes its partitions back at once, instead of the
	// group waiting for the dead member's session to time out, or for a
	// whole rebalance timeout, before anyone gets them. Give each process
	// its own, fixed one (0, 1, ... or the host name).
	Instance string
	// Topics are read with read_committed. Required.
	Topics []string
	// Mapping maps records to rows. Required (see LoadMapping).
	Mapping *Mapping
	// ClientOpts reach the Kafka cluster (seed brokers, TLS, SASL).
	ClientOpts []kgo.Opt

	// BatchSize is the most records one database transaction holds;
	// default 500.
	BatchSize int
	// OffsetsTable holds (consumer_group, topic, kafka_partition,
	// next_offset); created if missing. Default eos_sink_offsets.
	OffsetsTable string
	// DLQ is the dead-letter topic; default Group+"-dlq".
	DLQ string
	// NoKafkaCommit stops the sink from also committing its offsets to
	// the consumer group in Kafka after each database commit. Those
	// commits are for lag tools only (the sink always resumes from the
	// database); without them, a group's lag shows the whole topic.
	NoKafkaCommit bool
	// Replay deletes this group's stored offsets at start, so the sink
	// reads its topics again from the earliest offset, once per
	// ReplayID: the id is stored (table OffsetsTable+"_replays") in the
	// transaction that deletes the offsets, and a later start with the
	// same id does not replay again (it logs that it did not). So a
	// supervisor that keeps the replay in a restarted process's
	// arguments cannot replay on every restart. The rows are written
	// again through the idempotent path: with a unique key on the
	// idempotency key column nothing is duplicated; without one, a
	// replay inserts every row again.
	Replay bool
	// ReplayID names the replay request; default "default" (so a second
	// Replay needs a new id).
	ReplayID string
	// SessionTimeout is the consumer group session timeout; default 10s.
	SessionTimeout time.Duration
	// StartTimeout bounds New's first connection to Kafka: brokers that do
	// not answer within it fail New with an error naming the likely cause
	// (nothing listening, not a Kafka port, TLS or SASL on one side only);
	// default 10s.
	StartTimeout time.Duration
	// Retry bounds the retries of retriable database errors.
	Retry Retry
	// PostgresWritePath is how rows reach a PostgreSQL table: "copy"
	// (COPY into a staging table, then INSERT ... SELECT ... ON CONFLICT
	// (key), in the batch's transaction), "insert" (multi-row INSERTs),
	// or "auto", the default: COPY for batches of at least 5,000
	// records, where it measured faster (BENCHMARKS.md). The guarantees
	// are the same. Other databases always use multi-row INSERTs.
	PostgresWritePath string
	// LockTimeout bounds how long one statement waits for a row lock
	// (PostgreSQL lock_timeout, MySQL/MariaDB innodb_lock_wait_timeout,
	// whole seconds): a statement blocked by another transaction (a
	// paused zombie's) fails, is rolled back and retried under Retry,
	// instead of waiting for ever. Default 10s. A DSN parameter of the
	// same name wins.
	LockTimeout time.Duration
	// IdleInTransactionTimeout has the database end a session that sits
	// in an open transaction without a statement for this long
	// (PostgreSQL idle_in_transaction_session_timeout, MariaDB
	// idle_transaction_timeout, MySQL wait_timeout, whole seconds): a
	// sink process paused inside its transaction (SIGSTOP, a VM freeze,
	// a GC pause) loses its transaction, rolled back, and its locks, so
	// the process that took its partitions over can commit. Its own
	// commit then fails and it re-reads the database's offsets. Keep it
	// above the longest pause a live sink makes inside a transaction
	// (producing dead letters to Kafka). Default 30s.
	IdleInTransactionTimeout time.Duration
	// ShutdownTimeout bounds how long Run, once its context ends, lets
	// the batch in flight commit; past it the batch's transaction is
	// cancelled and rolled back (its records are read again on the next
	// start). Default 10s.
	ShutdownTimeout time.Duration
	// CommitDelay waits this long between writing a batch and committing
	// it (testing only: it widens the window a crash test aims at).
	CommitDelay time.Duration

	Logger  *slog.Logger
	Metrics *Metrics
	// OnEvent receives lifecycle events (started, assigned, revoked,
	// written, committed, stopped); nil ignores them.
	OnEvent func(pipeline.Event)
}

// Retry is the backoff policy for retriable database errors: attempt n
// waits a random duration in [d/2, d] with d = min(Max, Base * 2^n).
type Retry struct {
	// Attempts is how many times one batch is tried before the sink gives
	// up and Run returns the error; default 10.
	Attempts int
	// Base is the first backoff; default 100ms.
	Base time.Duration
	// Max caps the backoff; default 5s.
	Max time.Duration
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func (c *Config) setDefaults() error {
	if c.DSN == "" {
		return eos.BadConfig("sink.Config", "DSN is required")
	}
	if c.Group == "" {
		return eos.BadConfig("sink.Config", "Group is required")
	}
	if len(c.Topics) == 0 {
		return eos.BadConfig("sink.Config", "Topics is required")
	}
	if c.Mapping == nil {
		return eos.BadConfig("sink.Config", "Mapping is required")
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.BatchSize < 0 {
		return eos.BadConfig("sink.Config", "BatchSize must be positive, got %d", c.BatchSize)
	}
	if c.OffsetsTable == "" {
		c.OffsetsTable = "eos_sink_offsets"
	}
	if !identRE.MatchString(c.OffsetsTable) {
		return eos.BadConfig("sink.Config", "OffsetsTable %q is not a plain SQL identifier", c.OffsetsTable)
	}
	if c.Replay && c.ReplayID == "" {
		c.ReplayID = "default"
	}
	if len(c.ReplayID) > 255 {
		return eos.BadConfig("sink.Config", "ReplayID is %d bytes long, at most 255", len(c.ReplayID))
	}
	if c.Replay && len(c.OffsetsTable+replaysSuffix) > 64 {
		return eos.BadConfig("sink.Config", "OffsetsTable %q is too long for its replays table %s (at most %d characters)", c.OffsetsTable, c.OffsetsTable+replaysSuffix, 64-len(replaysSuffix))
	}
	if c.DLQ == "" {
		c.DLQ = c.Group + "-dlq"
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 10 * time.Second
	}
	if c.StartTimeout < 0 {
		return eos.BadConfig("sink.Config", "StartTimeout must not be negative, got %s", c.StartTimeout)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.Retry.Attempts <= 0 {
		c.Retry.Attempts = 10
	}
	if c.Retry.Base <= 0 {
		c.Retry.Base = 100 * time.Millisecond
	}
	if c.Retry.Max <= 0 {
		c.Retry.Max = 5 * time.Second
	}
	switch c.PostgresWritePath {
	case "":
		c.PostgresWritePath = "auto"
	case "auto", "copy", "insert":
	default:
		return eos.BadConfig("sink.Config", "PostgresWritePath %q: want auto, copy or insert", c.PostgresWritePath)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"LockTimeout", &c.LockTimeout, 10 * time.Second}, {"IdleInTransactionTimeout", &c.IdleInTransactionTimeout, 30 * time.Second}, {"ShutdownTimeout", &c.ShutdownTimeout, 10 * time.Second}} {
		if *d.v < 0 {
			return eos.BadConfig("sink.Config", "%s must not be negative, got %s", d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.OnEvent == nil {
		c.OnEvent = func(pipeline.Event) {}
	}
	return nil
}
