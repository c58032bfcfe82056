package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/idempotency"
	"github.com/eosctl/eos/internal/dbtest"
)

// TestMain doubles as the crashing caller of
// TestCrashBetweenClaimAndCommitLeavesNothingBehind.
func TestMain(m *testing.M) {
	if dsn := os.Getenv("EOS_IDEM_CRASH_DSN"); dsn != "" {
		crash(dsn)
	}
	os.Exit(m.Run())
}

// crash claims key "k", writes the handler's effect (with
// EOS_IDEM_CRASH_API, after calling that payment API with the key), and
// SIGKILLs itself before the commit.
func crash(dsn string) {
	db := open(dsn)
	s, err := idempotency.Open(context.Background(), db, idempotency.Config{})
	if err != nil {
		panic(err)
	}
	_, _ = s.Do(context.Background(), "payment", "k", func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
		if api := os.Getenv("EOS_IDEM_CRASH_API"); api != "" {
			if _, err := charge(ctx, tx, api); err != nil {
				panic(err)
			}
		} else if _, err := tx.ExecContext(ctx, "INSERT INTO effects (k) VALUES ('k')"); err != nil {
			panic(err)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	})
	panic("unreachable")
}

func open(dsn string) *sql.DB {
	db, err := dbtestOpen(dsn)
	if err != nil {
		panic(err)
	}
	return db
}

// clock is a settable clock for Config.Now.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time           { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) set(t time.Time)          { c.off.Store(int64(time.Until(t))) }
func effect(k string) idempotency.Handler { return effectValue(k, "v-"+k) }

// effectValue is a handler that records its run in effects and returns v.
func effectValue(k, v string) idempotency.Handler {
	return func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (k) VALUES ('"+k+"')"); err != nil {
			return nil, err
		}
		return []byte(v), nil
	}
}

// setup gives a test of kind a fresh database with an effects table (one
// row per handler run that committed) and its pool.
func setup(t *testing.T, kind string) (*sql.DB, string) {
	t.Helper()
	dsn := dbtest.Fresh(t, kind)
	db := dbtest.Open(t, dsn)
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE effects (k VARCHAR(64) NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return db.DB, dsn
}

// age moves every claim back minutes by the database's clock, which is the
// clock a claim's expiry is judged by.
func age(t *testing.T, db *sql.DB, minutes int) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), fmt.Sprintf("UPDATE eos_idempotency SET claimed_at = claimed_at - INTERVAL '%d' MINUTE", minutes)); err != nil {
		t.Fatal(err)
	}
}

func effects(t *testing.T, db *sql.DB, k string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM effects WHERE k = '"+k+"'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func each(t *testing.T, fn func(t *testing.T, kind string)) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) { fn(t, kind) })
	}
}

// TestFiftyConcurrentCallersRunTheHandlerOnce: 50 callers of one key, each
// retrying on ErrInProgress: the handler commits once and all 50 get its
// result.
func TestFiftyConcurrentCallersRunTheHandlerOnce(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, _ := setup(t, kind)
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{})
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int64
		h := func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
			n := runs.Add(1)
			time.Sleep(50 * time.Millisecond)
			return effectValue("k", fmt.Sprintf("run-%d", n))(ctx, tx)
		}
		results := make([]string, 50)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				for {
					v, err := s.Do(t.Context(), "payment", "k", h)
					if errors.Is(err, idempotency.ErrInProgress) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if err != nil {
						t.Error(err)
					}
					results[i] = string(v)
					return
				}
			})
		}
		wg.Wait()
		if runs.Load() != 1 || effects(t, db, "k") != 1 {
			t.Fatalf("handler ran %d times, %d effects committed: want 1 and 1", runs.Load(), effects(t, db, "k"))
		}
		for i, r := range results {
			if r != "run-1" {
				t.Fatalf("caller %d got %q, want run-1", i, r)
			}
		}
	})
}

// TestCrashBetweenClaimAndCommitLeavesNothingBehind: a process SIGKILLed
// inside its handler leaves no effect; its claim reads as in progress until
// it is stale, then one caller takes it over and runs the handler once.
func TestCrashBetweenClaimAndCommitLeavesNothingBehind(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, dsn := setup(t, kind)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EOS_IDEM_CRASH_DSN="+dsn)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the crashing caller ended with %v, want SIGKILL", err)
		}
		if n := effects(t, db, "k"); n != 0 {
			t.Fatalf("%d effects of the crashed handler committed, want 0", n)
		}
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{StaleAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Do(t.Context(), "payment", "k", effect("k")); !errors.Is(err, idempotency.ErrInProgress) {
			t.Fatalf("Do of the crashed key before it is stale: %v, want ErrInProgress", err)
		}
		age(t, db, 2)
		for range 2 {
			if v, err := s.Do(t.Context(), "payment", "k", effect("k")); err != nil || string(v) != "v-k" {
				t.Fatalf("Do after the claim went stale: %q, %v", v, err)
			}
		}
		if n := effects(t, db, "k"); n != 1 {
			t.Fatalf("%d effects after the takeover and a repeat, want 1", n)
		}
	})
}

// TestStaleTakeoverFencesTheOldHolder: a holder that only looked dead
// (slower than StaleAfter) and finishes after another caller took over gets
// ErrTakenOver and its transaction rolls back: one effect, the new
// holder's result.
func TestStaleTakeoverFencesTheOldHolder(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, _ := setup(t, kind)
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{StaleAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		started, resume := make(chan struct{}), make(chan struct{})
		old := make(chan error, 1)
		go func() {
			_, err := s.Do(t.Context(), "payment", "k", func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
				close(started)
				<-resume
				return effectValue("k", "old")(ctx, tx)
			})
			old <- err
		}()
		<-started
		age(t, db, 2)
		v, err := s.Do(t.Context(), "payment", "k", effectValue("k", "new"))
		if err != nil || string(v) != "new" {
			t.Fatalf("takeover: %q, %v", v, err)
		}
		close(resume)
		if err := <-old; !errors.Is(err, idempotency.ErrTakenOver) {
			t.Fatalf("the old holder got %v, want ErrTakenOver", err)
		}
		if v, err := s.Do(t.Context(), "payment", "k", effect("k")); err != nil || string(v) != "new" || effects(t, db, "k") != 1 {
			t.Fatalf("after both: %q, %v, %d effects; want new, 1 effect", v, err, effects(t, db, "k"))
		}
	})
}

// TestHandlerFailureRollsBackTheClaim: a handler error (not Final) rolls
// back its effects and frees the key; the next Do runs the handler.
// A Final failure is stored and returned again without running it.
func TestHandlerFailureRollsBackTheClaim(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, _ := setup(t, kind)
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{})
		if err != nil {
			t.Fatal(err)
		}
		boom := errors.New("downstream timeout")
		_, err = s.Do(t.Context(), "payment", "k", func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
			_, _ = effect("k")(ctx, tx)
			return nil, boom
		})
		if !errors.Is(err, boom) || effects(t, db, "k") != 0 {
			t.Fatalf("failed handler: %v, %d effects; want its error and 0", err, effects(t, db, "k"))
		}
		if v, err := s.Do(t.Context(), "payment", "k", effect("k")); err != nil || string(v) != "v-k" {
			t.Fatalf("retry after the failure: %q, %v", v, err)
		}

		declined := func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
			_, _ = effect("d")(ctx, tx)
			return nil, idempotency.Final(errors.New("card declined"))
		}
		var fe *idempotency.FinalError
		for i := range 3 {
			if _, err := s.Do(t.Context(), "payment", "d", declined); !errors.As(err, &fe) || fe.Msg != "card declined" {
				t.Fatalf("call %d of a declined payment: %v, want FinalError card declined", i, err)
			}
		}
		if n := effects(t, db, "d"); n != 1 {
			t.Fatalf("the final failure's handler committed %d times, want 1", n)
		}
	})
}

// TestBizTypeCollisionIsAnError: a key recorded as one business type is an
// error for another, never the first one's result.
func TestBizTypeCollisionIsAnError(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, _ := setup(t, kind)
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Do(t.Context(), "payment", "k", effect("k")); err != nil {
			t.Fatal(err)
		}
		v, err := s.Do(t.Context(), "refund", "k", effect("k"))
		var be *idempotency.BizTypeError
		if !errors.As(err, &be) || be.RecordedAs != "payment" || v != nil {
			t.Fatalf("refund of a payment's key: %q, %v; want no value and a BizTypeError", v, err)
		}
	})
}

// TestRetentionDropsWholePartitions: records older than the retention go
// with their daily partitions (a repeat runs the handler again), younger
// ones stay (a repeat returns the stored result).
func TestRetentionDropsWholePartitions(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, _ := setup(t, kind)
		var c clock
		today := time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
		c.set(today.AddDate(0, 0, -40))
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Do(t.Context(), "payment", "old", effect("old")); err != nil {
			t.Fatal(err)
		}
		c.set(today.AddDate(0, 0, -29))
		if _, err := s.Do(t.Context(), "payment", "young", effect("young")); err != nil {
			t.Fatal(err)
		}
		c.set(today)
		dropped, err := s.Maintain(t.Context())
		if err != nil || len(dropped) == 0 {
			t.Fatalf("Maintain dropped %v, %v: want the partitions older than 30 days", dropped, err)
		}
		if _, err := s.Do(t.Context(), "payment", "young", effect("young")); err != nil || effects(t, db, "young") != 1 {
			t.Fatalf("a 29-day-old key ran its handler again (%v): the retention must keep it", err)
		}
		if _, err := s.Do(t.Context(), "payment", "old", effect("old")); err != nil || effects(t, db, "old") != 2 {
			t.Fatalf("a 40-day-old key: %v, %d effects; want its record dropped and the handler run again", err, effects(t, db, "old"))
		}
		var rows int
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM eos_idempotency").Scan(&rows); err != nil || rows != 2 {
			t.Fatalf("%d records, %v: want young and the new old", rows, err)
		}
	})
}
