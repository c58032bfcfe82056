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
// rolled back with its transaction). After Config.StaleAfter (by the
// database's clock) a caller takes it over with a compare-and-set on the record's owner, and runs the
// handler; should the old holder wake up, its final UPDATE finds another
// owner and its transaction rolls back (ErrTakenOver). So one handler
// transaction commits per key, whatever crashes.
//
// A handler error that is not Final rolls the work back and deletes the
// claim, so the key can be tried again.
//
// # What it guarantees, and what it does not
//
// What commits through tx commits at most once per key (within the
// retention), together with the stored result: that is the guarantee.
// The handler itself can RUN more than once for a key: after a crash (or a
// stall longer than StaleAfter) between the claim and the commit, the next
// caller takes the claim over once it is stale and runs the handler again.
// An external effect — charge a card, call an API, send a mail — is not
// in tx and is not undone, so it happens again unless the external call
// itself takes the key: pass the key to the external system (an
// Idempotency-Key header, a client reference it deduplicates on) so that
// it absorbs the second call. AttemptOf(ctx) gives the handler the key and
// tells it when its run follows a takeover (see the externalCall example).
// An external system that cannot deduplicate on a key cannot be made
// exactly-once by this package.
//
// A claim's age is judged by the database's clock (now() in PostgreSQL,
// UTC_TIMESTAMP() in MySQL), which writes claimed_at too: application
// hosts with skewed clocks neither take over a claim that is still
// running nor write claims that look stale at once. Config.Now only
// picks a record's daily partition and the retention cut-off.
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
