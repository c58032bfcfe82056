package idempotency

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// Errors of Do.
var (
	// ErrInProgress: another caller claimed the key and is running its
	// handler (or crashed less than Config.StaleAfter ago). Try again
	// later: the stored result will be there.
	ErrInProgress = errors.New("idempotency: the key is in progress in another caller")
	// ErrTakenOver: this caller's claim went stale and another caller
	// took it over while the handler ran; this handler's transaction was
	// rolled back, the other caller's result is the one that counts.
	ErrTakenOver = errors.New("idempotency: the claim was taken over by another caller; this run was rolled back")
)

// BizTypeError is returned when the key is recorded under another business
// type: keys are unique across types, and one type never sees another's
// result.
type BizTypeError struct {
	Key, BizType, RecordedAs string
}

// Error names the key and both business types.
func (e *BizTypeError) Error() string {
	return fmt.Sprintf("idempotency: key %q is recorded as business type %q, not %q", e.Key, e.RecordedAs, e.BizType)
}

// FinalError is a failure that is the answer for a key: the handler
// returned it through Final, it was stored, and every later Do of the key
// returns it again without running the handler.
type FinalError struct{ Msg string }

// Error returns the stored message of the handler's final error.
func (e *FinalError) Error() string { return e.Msg }

// Final marks a handler's error as the final answer for the key (a
// declined payment, say), to be stored and returned on every repeat. Any
// other handler error rolls back and frees the key for another try.
func Final(err error) error { return &FinalError{Msg: err.Error()} }

// Handler does the work of one key in tx, which also stores its result:
// whatever it writes through tx commits together with the record.
type Handler func(ctx context.Context, tx *sql.Tx) ([]byte, error)

// Config configures a Store; zero values take the defaults.
type Config struct {
	// Table is the records table; default eos_idempotency.
	Table string
	// StaleAfter is how long a claim may stay in progress before another
	// caller takes it over; default 5 minutes. Set it well above the
	// handler's longest run.
	StaleAfter time.Duration
	// Retention is how long records are kept at least; default 30 days.
	// Maintain drops the daily partitions older than that.
	Retention time.Duration
	// LockWait bounds the wait for the per-key claim lock; default 5s.
	LockWait time.Duration
	// Now is the clock, for the record's day and ages; default time.Now.
	Now func() time.Time
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,40}$`)

func (c *Config) defaults() error {
	if c.Table == "" {
		c.Table = "eos_idempotency"
	}
	if !identRE.MatchString(c.Table) {
		return fmt.Errorf("idempotency: Table %q is not a plain SQL identifier of at most 41 characters", c.Table)
	}
	if c.StaleAfter <= 0 {
		c.StaleAfter = 5 * time.Minute
	}
	if c.Retention <= 0 {
		c.Retention = 30 * 24 * time.Hour
	}
	if c.LockWait <= 0 {
		c.LockWait = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Store runs handlers once per key, with the records in one table.
type Store struct {
	db  *sql.DB
	d   *dialect
	cfg Config

	mu      sync.Mutex
	ensured map[string]bool // days whose partition exists
}

// Open creates the records table (partitioned by day) if it is missing and
// the partitions of the coming days. db is a PostgreSQL (pgx) or MySQL /
// MariaDB (go-sql-driver/mysql) pool.
func Open(ctx context.Context, db *sql.DB, cfg Config) (*Store, error) {
	s, err := newStore(db, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.create(ctx); err != nil {
		return nil, err
	}
	if _, err := s.Maintain(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func newStore(db *sql.DB, cfg Config) (*Store, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	d, err := dialectOf(db)
	if err != nil {
		return nil, err
	}
	return &Store{db: db, d: d, cfg: cfg, ensured: map[string]bool{}}, nil
}

// Do runs h once for key, with the records in the default table
// (eos_idempotency), which Open must have created. See Store.Do.
func Do(ctx context.Context, db *sql.DB, bizType, key string, h Handler) ([]byte, error) {
	s, err := newStore(db, Config{})
	if err != nil {
		return nil, err
	}
	return s.Do(ctx, bizType, key, h)
}

// record is a stored record.
type record struct {
	day        string
	bizType    string
	state      string
	owner      string
	stale      bool // claimed longer than StaleAfter ago
	result     []byte
	errMessage sql.NullString
}

const (
	inProgress = "in_progress"
	done       = "done"
	failed     = "failed"
)

// Do runs h for key unless it ran before. The first caller's result (or
// Final failure) is stored in h's transaction and returned to every later
// caller of the key. It returns ErrInProgress while another caller runs h,
// *BizTypeError when the key belongs to another bizType, ErrTakenOver when
// this caller's claim went stale and was taken over, and h's own error
// (after rolling back and freeing the key) when h fails without Final.
func (s *Store) Do(ctx context.Context, bizType, key string, h Handler) ([]byte, error) {
	if key == "" || bizType == "" {
		return nil, errors.New("idempotency: bizType and key must not be empty")
	}
	owner := token()
	day, prior, err := s.claim(ctx, bizType, key, owner)
	if err != nil {
		return nil, err
	}
	if prior != nil {
		return answer(prior)
	}
	return s.run(ctx, key, day, owner, h)
}

func answer(r *record) ([]byte, error) {
	if r.state == failed {
		return nil, &FinalError{Msg: r.errMessage.String}
	}
	return r.result, nil
}

// run runs h and stores its outcome in h's transaction, if this caller
// still owns the claim.
func (s *Store) run(ctx context.Context, key, day, owner string, h Handler) ([]byte, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		s.release(key, day, owner)
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	value, herr := h(ctx, tx)
	state, msg := done, sql.NullString{}
	var fe *FinalError
	switch {
	case herr == nil:
	case errors.As(herr, &fe):
		state, msg, value = failed, sql.NullString{String: fe.Msg, Valid: true}, nil
	default:
		_ = tx.Rollback()
		s.release(key, day, owner)
		return nil, herr
	}
	d := s.d
	res, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET state = %s, result = %s, error = %s, finished_at = %s WHERE idem_key = %s AND day = %s AND owner = %s AND state = '%s'",
		d.quote(s.cfg.Table), d.ph(1), d.ph(2), d.ph(3), d.ph(4), d.ph(5), d.ph(6), d.ph(7), inProgress),
		state, value, msg, s.cfg.Now().UTC(), key, day, owner)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n != 1 {
		return nil, ErrTakenOver
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("idempotency: committing %q (outcome unknown: call Do again for the stored result): %w", key, err)
	}
	if state == failed {
		return nil, &FinalError{Msg: msg.String}
	}
	return value, nil
}

// release deletes this caller's claim after its handler failed, so that the
// key can be tried again. If it fails, the claim goes stale and is taken
// over after StaleAfter.
func (s *Store) release(key, day, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := s.d
	_, _ = s.db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE idem_key = %s AND day = %s AND owner = %s AND state = '%s'",
		d.quote(s.cfg.Table), d.ph(1), d.ph(2), d.ph(3), inProgress), key, day, owner)
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// dayOf is t's UTC day, the partition a record claimed at t goes to.
func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }
