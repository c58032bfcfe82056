// Package sink writes Kafka records into a SQL database (PostgreSQL,
// MySQL/MariaDB, or SQLite for demos) so that every input record's effect is
// in the table exactly once — where exactly-once can hold, and no further —
// for programs that load topics into tables, as eosctl sink does.
//
// # What is guaranteed, and how
//
// Exactly-once (one database, offsets in it). The sink reads its topics with
// read_committed and writes each batch in ONE database transaction: the rows
// and, in the same transaction, the next offset of every partition the batch
// read, in an offsets table (Config.OffsetsTable). On start and on every
// partition assignment it seeks to the offsets stored in the database, never
// Kafka's. A crash before the commit leaves neither rows nor offsets; a crash
// after it leaves both, and the next owner resumes after them. The offsets
// row is updated compare-and-set (WHERE next_offset = the offset this
// process resumed from) and written before the rows, so two processes that
// both believe they own a partition (a rebalance racing a slow commit, a
// paused process waking up) cannot both commit the same range: the loser's
// transaction changes nothing and is rolled back, and it re-seeks.
//
// Effectively-once (idempotent writes). When the same records are delivered
// again anyway — a replay from offset 0 (Config.Replay, done once per
// Config.ReplayID), another tool that writes the same table, records
// produced twice upstream with the same idempotency key — the rows are
// written with INSERT ... ON CONFLICT (key column) DO NOTHING (PostgreSQL,
// SQLite) or INSERT ... ON DUPLICATE KEY UPDATE k=k (MySQL; not INSERT
// IGNORE, which would also swallow NOT NULL, type and foreign-key errors),
// so the table's unique key on the idempotency key absorbs the repeat, and
// only it: a collision on any other unique index is a rejected row, a dead
// letter. MySQL cannot name the index a duplicate hit, so New refuses a
// MySQL table with a unique index besides the key's. Without a unique index
// on exactly the key column the rows are plain INSERTs: a replay inserts
// them again.
//
// A paused process cannot stall the live one: every connection has a lock
// timeout and an idle-in-transaction timeout (Config.LockTimeout,
// Config.IdleInTransactionTimeout), and a batch locks its offsets rows in
// (topic, partition) order. Into PostgreSQL large batches go by COPY into a
// staging table and one INSERT ... SELECT (Config.PostgresWritePath).
//
// Not caught by either: a row deleted or changed in the database by someone
// else, a record that never reached the topic, a bug that maps a record to
// the wrong row. Only reconciling the topic against the table finds those.
//
// # Failure handling
//
// The sink fails closed: while the database is unreachable nothing is
// acknowledged and no offset moves. Retriable errors (connection loss,
// server shutdown, deadlock, serialization failure, lock timeout) are
// retried with exponential backoff and jitter, at most Config.Retry.Attempts
// times, after which Run returns the error and the process should be
// restarted: it resumes from the database's offsets. Permanent errors of one
// row (a NOT NULL, CHECK, type, foreign-key or unique violation other than
// the idempotency key) send that record to the dead-letter topic, with the
// database's reason, and the batch goes on; the sink logs a warning with
// the counts by reason and the first reason (at once, then at most every
// 10s). Dead letters are produced before the database commit that
// moves the offset past them, so they are at-least-once: a crash between the
// two produces them again, with the same eos-idempotency-key header.
// Schema errors (a missing table or column) and authentication failures
// stop the sink at start, before it reads anything.
package sink
