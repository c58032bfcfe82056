package idempotency

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// claim takes key for owner: an atomic INSERT of an in-progress record
// into today's partition, under the per-key lock that makes it atomic with
// the look-up of the key in earlier partitions. It returns the day of the
// claimed record (and whether it took over a stale claim), or the prior
// record to answer with. Every time it writes or compares is the
// database's (dialect.now), never the host's.
func (s *Store) claim(ctx context.Context, bizType, key, owner string) (string, bool, *record, error) {
	today := dayOf(s.cfg.Now())
	if err := s.ensure(ctx, today); err != nil {
		return "", false, nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return "", false, nil, err
	}
	defer conn.Close()
	if s.d == mysql {
		// Before BEGIN: the lock must be held before the transaction's
		// snapshot is taken.
		unlock, err := s.lockMySQL(ctx, conn, key)
		if err != nil {
			return "", false, nil, err
		}
		defer unlock()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return "", false, nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if s.d == postgres {
		if err := s.lockPostgres(ctx, tx, key); err != nil {
			return "", false, nil, err
		}
	}

	d, t := s.d, s.d.Quote(s.cfg.Table)
	insert := fmt.Sprintf("INSERT INTO %s (idem_key, day, biz_type, state, owner, claimed_at) VALUES (%s, %s, %s, '%s', %s, %s)",
		t, d.Ph(1), d.Ph(2), d.Ph(3), inProgress, d.Ph(4), d.now())
	if d == postgres {
		insert += " ON CONFLICT DO NOTHING"
	} else {
		insert += " ON DUPLICATE KEY UPDATE idem_key = idem_key"
	}
	res, err := tx.ExecContext(ctx, insert, key, today, bizType, owner)
	if err != nil {
		return "", false, nil, fmt.Errorf("idempotency: claiming %q: %w", key, err)
	}
	inserted, err := res.RowsAffected()
	if err != nil {
		return "", false, nil, err
	}
	// The oldest record of the key other than the one just inserted.
	// (The day as text and the age as a comparison: the MySQL driver
	// scans dates only with parseTime, which the caller's DSN may lack.)
	q := fmt.Sprintf("SELECT CAST(day AS CHAR(10)), biz_type, state, owner, claimed_at < %s, result, error FROM %s WHERE idem_key = %s",
		d.ago(d.Ph(1)), t, d.Ph(2))
	args := []any{s.cfg.StaleAfter.Microseconds(), key}
	if inserted == 1 {
		q += " AND day <> " + d.Ph(3)
		args = append(args, today)
	}
	q += " ORDER BY day LIMIT 1"
	var r record
	err = tx.QueryRowContext(ctx, q, args...).Scan(&r.day, &r.bizType, &r.state, &r.owner, &r.stale, &r.result, &r.errMessage)
	switch {
	case errors.Is(err, sql.ErrNoRows) && inserted == 1:
		if err := tx.Commit(); err != nil {
			return "", false, nil, err
		}
		return today, false, nil, nil // ours
	case err != nil:
		return "", false, nil, fmt.Errorf("idempotency: reading the record of %q: %w", key, err)
	}
	// The key has a record: ours, if just inserted, is not needed.
	if err := tx.Rollback(); err != nil {
		return "", false, nil, err
	}
	switch {
	case r.bizType != bizType:
		return "", false, nil, &BizTypeError{Key: key, BizType: bizType, RecordedAs: r.bizType}
	case r.state != inProgress:
		return "", false, &r, nil
	case !r.stale:
		return "", false, nil, ErrInProgress
	}
	// Stale: take it over, compare-and-set on the owner, so that of two
	// callers taking over at once one wins.
	res, err = conn.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET owner = %s, claimed_at = %s WHERE idem_key = %s AND day = %s AND owner = %s AND state = '%s'",
		t, d.Ph(1), d.now(), d.Ph(2), d.Ph(3), d.Ph(4), inProgress), owner, key, r.day, r.owner)
	if err != nil {
		return "", false, nil, fmt.Errorf("idempotency: taking over %q: %w", key, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return "", false, nil, ErrInProgress
	}
	return r.day, true, nil, nil
}

// lockKey names key's claim lock: a hash, so any key fits.
func (s *Store) lockKey(key string) string {
	sum := sha256.Sum256([]byte(s.cfg.Table + "\x00" + key))
	return hex.EncodeToString(sum[:20])
}

// lockPostgres takes key's claim lock for the rest of tx (an advisory
// transaction lock).
func (s *Store) lockPostgres(ctx context.Context, tx *sql.Tx, key string) error {
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.cfg.LockWait.Milliseconds())); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", s.lockKey(key)); err != nil {
		return fmt.Errorf("%w (waiting for the claim lock: %w)", ErrInProgress, err)
	}
	return nil
}

// lockMySQL takes key's claim lock for conn's session until unlock.
func (s *Store) lockMySQL(ctx context.Context, conn *sql.Conn, key string) (unlock func(), err error) {
	name := "eos-idem:" + s.lockKey(key)
	var got sql.NullInt64
	secs := max(1, int(s.cfg.LockWait/time.Second))
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", name, secs).Scan(&got); err != nil {
		return nil, err
	}
	if !got.Valid || got.Int64 != 1 {
		return nil, fmt.Errorf("%w (the claim lock was busy for %ds)", ErrInProgress, secs)
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", name)
	}, nil
}
