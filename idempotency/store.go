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
//
// Only tx is undone by a crash. A handler can run more than once for a key:
// when its process dies (or stalls longer than Config.StaleAfter) between
// the claim and the commit, another caller takes the claim over once it
// is stale and runs the handler again. So an effect outside tx (charge a
// card, call an API, send a mail) must itself be idempotent on the key:
// pass the key to the external system (an Idempotency-Key header, a
// client reference it deduplicates on) so that the second run's call is
// absorbed there. AttemptOf(ctx) tells the handler the key and whether
// this run follows such a takeover.
type Handler func(ctx context.Context, tx *sql.Tx) ([]byte, error)

// Attempt describes the handler's run; see AttemptOf.
type Attempt struct {
	BizType, Key string
	// TakenOver: an earlier run of this key claimed it and neither
	// committed nor released it (its process crashed, or ran longer than
	// Config.StaleAfter). Its database writes were rolled back, but any
	// external call it made may have happened: the key passed to the
	// external system is what makes repeating it safe.
	TakenOver bool
}

type attemptKey struct{}

// AttemptOf returns the Attempt of the handler run whose context is ctx
// (false outside a handler).
func AttemptOf(ctx context.Context) (Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(Attempt)
	return a, ok
}

// Config configures a Store; zero values take the defaults.
type Config struct {
	// Table is the records table; default eos_idempotency.
	Table string
	// StaleAfter is how long a claim may stay in progress before another
	// caller takes it over and runs the handler again; default 5 minutes,
	// judged by the database's clock (its now()), not the host's. Set it
	// well above the handler's longest run: a handler still running when
	// its claim is taken over has its transaction rolled back
	// (ErrTakenOver), but an external call it made stays made.
	StaleAfter time.Duration
	// Retention is how long records are kept at least; default 30 days.
	// Maintain drops the daily partitions older than that.
	Retention time.Duration
	// LockWait bounds the wait for the per-key claim lock; default 5s.
	LockWait time.Duration
	// Now is the clock that picks a record's day (its partition) and
	// Maintain's retention cut-off; default time.Now. A claim's age is
	// never judged by it, only by the database's clock.
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
	day, takenOver, prior, err := s.claim(ctx, bizType, key, owner)
	if err != nil {
		return nil, err
	}
	if prior != nil {
		return answer(prior)
	}
	ctx = context.WithValue(ctx, attemptKey{}, Attempt{BizType: bizType, Key: key, TakenOver: takenOver})
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
		d.Quote(s.cfg.Table), d.Ph(1), d.Ph(2), d.Ph(3), d.now(), d.Ph(4), d.Ph(5), d.Ph(6), inProgress),
		state, value, msg, key, day, owner)
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
		d.Quote(s.cfg.Table), d.Ph(1), d.Ph(2), d.Ph(3), inProgress), key, day, owner)
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// dayOf is t's UTC day, the partition a record claimed at t goes to.
func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }
