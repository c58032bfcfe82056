package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos/metrics"
	"github.com/eosctl/eos/sink"
	"github.com/spf13/cobra"
)

func newSinkCmd(g *globals) *cobra.Command {
	var (
		cfg         sink.Config
		topics      string
		mappingFile string
		events      string
		metricsAddr string
		naive       bool
		replay      string
	)
	cmd := &cobra.Command{
		Use:   "sink --to DSN --mapping FILE --group GROUP --input TOPIC[,TOPIC...]",
		Short: "Write topics into a PostgreSQL or MySQL/MariaDB table, each record's effect exactly once",
		Long: `Consumes the input topics with read_committed in consumer group GROUP and
writes each record as a row of the table the mapping file names, one database
transaction per batch (--batch-size records).

Exactly-once into one database: each transaction writes the rows AND the next
offset of every partition it read, into the offsets table (--offsets-table).
On start and on every rebalance the sink seeks to the offsets stored in the
database, never to Kafka's (it commits to Kafka too, for lag tools only). A
crash before the commit leaves neither rows nor offsets; after it, both.

Effectively-once beyond that: rows are written with INSERT ... ON CONFLICT
(key_column) DO NOTHING (PostgreSQL) or ON DUPLICATE KEY UPDATE k=k (MySQL),
so records delivered again (--replay, a re-produced record with the same key)
are absorbed by the table's unique key on key_column; a collision on any
OTHER unique index is a row the database rejects (a dead letter). MySQL
cannot name the index it collided on: a MySQL table with another unique
index besides key_column's is refused at start (exit 2). Without a unique key
on key_column rows are plain INSERTs and a replay duplicates rows. --replay
replays once per ID (--replay=ID; --replay alone is ID "default"): the ID is
stored beside the offsets, and a restart with the same ID does not replay
again. Mode upsert overwrites instead; mode transition runs
UPDATE ... SET status=TO WHERE key=? AND status=FROM and dead-letters illegal
transitions. What neither catches (rows deleted or edited in the database,
records that never reached the topic) only reconciliation finds.

Fails closed: while the database is down nothing is acknowledged and no offset
moves; retriable errors are retried with exponential backoff and jitter
(--retry-attempts, --retry-base, --retry-max), then the sink exits 1 and
resumes from the database when restarted. Records the database rejects for
their data (NOT NULL, CHECK, types) and records that do not map (not JSON, a
missing field) go to the dead-letter topic (--dlq, default GROUP-dlq), at
least once, and the sink goes on.

Mapping file (YAML):
  table: payments
  key_column: out_trade_no     # a PRIMARY or UNIQUE key
  key: out_trade_no            # expression; default: the eos-idempotency-key header
  columns:                     # column: expression over the record's JSON fields
    user_id: user
    amount_cents: int(amount * 100)
  mode: insert                 # insert (default), upsert, transition
  transition:                  # mode transition only
    status_column: status
    from: "'pending'"
    to: "'paid'"

A transaction that holds locks and stops (a sink process paused inside it)
cannot stall the others: statements wait for a lock at most --lock-timeout and
are retried, the database ends a session idle inside a transaction after
--idle-in-transaction-timeout, and a batch locks its partitions' offsets rows
in one fixed order (no deadlocks).

Exit codes: 0 stopped by SIGINT/SIGTERM (the batch in flight is committed, or
rolled back if it cannot commit within --shutdown-timeout); 1 failure (database or Kafka unavailable past the
retries); 2 bad input (DSN, mapping, missing table or column); 4 the database
or Kafka refused the credentials or privileges.`,
		Example: `  eosctl sink --to 'postgres://app:secret@127.0.0.1:5432/shop?sslmode=disable' \
    --mapping payments.yaml --group payments-sink --input payments --instance 0
  EOSCTL_SINK_DSN='mysql://app:secret@127.0.0.1:3306/shop' eosctl sink \
    --mapping payments.yaml --group payments-sink --input payments --batch-size 1000
  eosctl sink --to "$DSN" --mapping payments.yaml --group payments-sink --input payments --replay=2026-12-04`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				// --replay takes its optional id with "=": "--replay 2"
				// leaves "2" as an argument.
				return usage(fmt.Errorf("unexpected argument %q (a replay id goes with =: --replay=ID)", args[0]))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Mapping, err = sink.LoadMapping(mappingFile); err != nil {
				return sinkErr(err)
			}
			cfg.Topics = append(cfg.Topics, splitList(topics)...)
			if cfg.Logger, err = g.logger(); err != nil {
				return err
			}
			if cfg.ClientOpts, err = g.clientOpts(); err != nil {
				return err
			}
			cfg.StartTimeout = g.timeout
			onEvent, closeEvents, err := eventsFlag(events)
			if err != nil {
				return err
			}
			defer closeEvents()
			cfg.OnEvent = onEvent
			if metricsAddr != "" {
				cfg.Metrics = sink.NewMetrics(cfg.Group)
			}
			ctx, stop := signalContext()
			defer stop()
			if naive {
				return sinkErr(sink.RunNaive(ctx, cfg))
			}
			s, err := sink.New(ctx, cfg)
			if err != nil {
				return sinkErr(err)
			}
			defer s.Close()
			if metricsAddr != "" {
				srv, err := metrics.Listen(metricsAddr, cfg.Metrics.Handler())
				if err != nil {
					return usage(fmt.Errorf("--metrics-addr: %w", err))
				}
				defer srv.Close()
			}
			cfg.Logger.Info("sink starting", "group", cfg.Group, "topics", cfg.Topics, "table", cfg.Mapping.Table, "mode", cfg.Mapping.Mode)
			return sinkErr(s.Run(ctx))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DSN, "to", "", "database: postgres://user:pass@host:port/db?sslmode=... or mysql://user:pass@host:port/db (env EOSCTL_SINK_DSN, which ps does not show)")
	f.StringVar(&mappingFile, "mapping", "", "YAML file mapping records to rows (required)")
	f.StringVar(&cfg.Group, "group", "", "consumer group, and the sink's key in the offsets table (required)")
	f.StringVar(&topics, "input", "", "comma-separated topics to read with read_committed (required)")
	f.StringVar(&cfg.Instance, "instance", "", "this process's fixed instance id, e.g. 0 or $(hostname): a static group member, whose restart takes its partitions back at once")
	f.IntVar(&cfg.BatchSize, "batch-size", 500, "most records per database transaction")
	f.StringVar(&cfg.OffsetsTable, "offsets-table", "eos_sink_offsets", "table of the consumed offsets, written in the rows' transaction (created if missing)")
	f.StringVar(&cfg.DLQ, "dlq", "", "dead-letter topic (default GROUP-dlq)")
	kafkaCommit := f.Bool("kafka-commit", true, "also commit the offsets to the consumer group in Kafka after each database commit, for lag tools (the sink always resumes from the database's offsets)")
	f.StringVar(&replay, "replay", "", "replay request ID (--replay alone: ID \"default\"): delete the group's stored offsets and read the topics again from the earliest offset, once per ID; a restart with the same ID resumes from the stored offsets and logs that it did not replay (the key absorbs what is already there)")
	f.Lookup("replay").NoOptDefVal = "default"
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", 10*time.Second, "consumer group session timeout")
	f.IntVar(&cfg.Retry.Attempts, "retry-attempts", 10, "tries of one batch on retriable database errors before exiting 1")
	f.DurationVar(&cfg.Retry.Base, "retry-base", 100*time.Millisecond, "first retry backoff (doubles each try, with jitter)")
	f.DurationVar(&cfg.Retry.Max, "retry-max", 5*time.Second, "longest retry backoff")
	f.StringVar(&cfg.PostgresWritePath, "pg-write-path", "auto", "how rows reach PostgreSQL: copy (COPY into a staging table, then INSERT ... SELECT ... ON CONFLICT), insert (multi-row INSERTs), or auto (COPY for batches of 5000 or more); same guarantees")
	f.DurationVar(&cfg.LockTimeout, "lock-timeout", 10*time.Second, "longest wait of one statement for a row lock (PostgreSQL lock_timeout, MySQL innodb_lock_wait_timeout); the batch is then rolled back and retried, so a stuck transaction cannot stall the sink")
	f.DurationVar(&cfg.IdleInTransactionTimeout, "idle-in-transaction-timeout", 30*time.Second, "the database ends a session idle inside a transaction this long (PostgreSQL idle_in_transaction_session_timeout, MariaDB idle_transaction_timeout): a paused sink process loses its transaction and its locks, and the live one goes on")
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 10*time.Second, "on SIGINT/SIGTERM, how long the batch in flight may take to commit before it is rolled back")
	f.StringVar(&events, "events", "", `write lifecycle events (started, assigned, revoked, written, committed, stopped) as JSON lines to this file, or "-" for stdout`)
	f.StringVar(&metricsAddr, "metrics-addr", "", `serve Prometheus /metrics (eos_sink_*) on this host:port; "" disables`)
	f.DurationVar(&cfg.CommitDelay, "test-commit-delay", 0, "wait this long between writing a batch and committing it (testing only)")
	_ = f.MarkHidden("test-commit-delay")
	f.BoolVar(&naive, "naive", false, "run the naive at-least-once sink instead (eosctl demo sink's counter-example)")
	_ = f.MarkHidden("naive")
	for _, req := range []string{"mapping", "group", "input"} {
		_ = cmd.MarkFlagRequired(req)
	}
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		cfg.NoKafkaCommit = !*kafkaCommit
		cfg.Replay, cfg.ReplayID = replay != "", replay
		if cfg.DSN == "" { // not a flag default: help would print the password
			cfg.DSN = os.Getenv("EOSCTL_SINK_DSN")
		}
		if cfg.DSN == "" {
			return usage(fmt.Errorf("--to (or EOSCTL_SINK_DSN) is required"))
		}
		return nil
	}
	return cmd
}

// sinkTerms maps the sink library's Config field names, which its errors
// use, to this command's flags.
var sinkTerms = strings.NewReplacer(
	"DSN", "--to", "OffsetsTable", "--offsets-table", "SessionTimeout", "--session-timeout",
	"BatchSize", "--batch-size", "PostgresWritePath", "--pg-write-path", "LockTimeout", "--lock-timeout", "IdleInTransactionTimeout", "--idle-in-transaction-timeout", "ShutdownTimeout", "--shutdown-timeout", "ReplayID", "--replay", "Replay", "--replay", "Mapping", "--mapping", "Topics", "--input", "Group", "--group",
)

// sinkErr speaks in flags, keeping what errors.Is needs for the exit code.
func sinkErr(err error) error {
	if err == nil || err == context.Canceled {
		return nil
	}
	return flagError{msg: sinkTerms.Replace(err.Error()), err: err}
}

type flagError struct {
	msg string
	err error
}

func (e flagError) Error() string { return e.msg }
func (e flagError) Unwrap() error { return e.err }
