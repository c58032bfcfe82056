// Package idempotency runs a piece of work once per key, for services that
// consume eos's output (or any at-least-once stream) and must not, say,
// charge a card twice when a record is delivered twice.
//
//	store, err := idempotency.Open(ctx, db, idempotency.Config{})
//	value, err := store.Do(ctx, "payment", key, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
//		// the work, in tx: it commits together with the record of the key
//	})
//
// # How
//
// Do claims the key with an atomic INSERT of an "in progress" record (never
// a SELECT deciding whether to INSERT), runs the handler in a transaction
// of its own, and in that same transaction stores the handler's result and
// marks the record done: the work and the record commit together or not at
// all. A later Do of the key returns the stored result without running the
// handler: the same answer as the first time, a final failure
// (Final(err)) included. While the holder runs, Do returns ErrInProgress;
// a key claimed under another bizType returns a *BizTypeError, never that
// record's result.
//
// A claim whose holder crashed stays "in progress" (its handler's writes
// rolled back with its transaction). After Config.StaleAfter a caller takes
// it over with a compare-and-set on the record's owner, and runs the
// handler; should the old holder wake up, its final UPDATE finds another
// owner and its transaction rolls back (ErrTakenOver). So one handler
// transaction commits per key, whatever crashes.
//
// A handler error that is not Final rolls the work back and deletes the
// claim, so the key can be tried again.
//
// # Retention
//
// Records are kept at least Config.Retention (default 30 days) and cleaned
// by Maintain, which drops whole daily partitions (PostgreSQL declarative
// partitioning, MySQL RANGE COLUMNS partitions): never a big DELETE. A
// repeat older than the retention runs the handler again.
//
// Neither PostgreSQL nor MySQL can enforce a unique key across partitions
// that does not contain the partition column, so the primary key is (key,
// day). A per-key lock held during the claim's few milliseconds
// (pg_advisory_xact_lock, GET_LOCK) stands in for the missing global unique
// index: under it, the INSERT into today's partition and the look-up of the
// key in earlier ones are one atomic step.
package idempotency
