package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/idempotency"
)

// TestClaimExpiryIsJudgedByTheDatabaseClock: a claim is stale after
// StaleAfter by the database's clock, whatever the hosts' clocks say. A
// caller whose clock is 10 minutes ahead must not take over a claim made
// a moment ago, and a claim written by a host whose clock is 10 minutes
// behind must not look stale to the others (before the fix both were
// taken over at once, StaleAfter being 5 minutes, and the handler ran
// twice).
func TestClaimExpiryIsJudgedByTheDatabaseClock(t *testing.T) {
	skewed := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(d) } }
	each(t, func(t *testing.T, kind string) {
		db, _ := setup(t, kind)
		for _, c := range []struct {
			key            string
			holder, caller time.Duration // the hosts' clock skews
		}{
			{"caller-ahead", 0, 10 * time.Minute},
			{"holder-behind", -10 * time.Minute, 0},
		} {
			holder, err := idempotency.Open(t.Context(), db, idempotency.Config{Now: skewed(c.holder)})
			if err != nil {
				t.Fatal(err)
			}
			caller, err := idempotency.Open(t.Context(), db, idempotency.Config{Now: skewed(c.caller)})
			if err != nil {
				t.Fatal(err)
			}
			started, resume, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				_, err := holder.Do(t.Context(), "payment", c.key, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
					close(started)
					<-resume
					return effect(c.key)(ctx, tx)
				})
				done <- err
			}()
			<-started
			_, err = caller.Do(t.Context(), "payment", c.key, effect(c.key))
			close(resume)
			if herr := <-done; herr != nil {
				t.Fatalf("%s: the holder: %v", c.key, herr)
			}
			if !errors.Is(err, idempotency.ErrInProgress) || effects(t, db, c.key) != 1 {
				t.Fatalf("%s: a caller during a claim made a moment ago got %v, %d effects; want ErrInProgress and 1 effect (the claim is not stale by the database's clock)",
					c.key, err, effects(t, db, c.key))
			}
		}
	})
}

// TestAHandlerRunAgainAfterACrashPassesTheSameKeyToTheExternalSystem: a
// process that made its external call (a payment API taking an
// Idempotency-Key) and was SIGKILLed before its commit: once the claim is
// stale, the next Do runs the handler again, AttemptOf says it took over,
// and the API sees the same key twice and charges once.
func TestAHandlerRunAgainAfterACrashPassesTheSameKeyToTheExternalSystem(t *testing.T) {
	each(t, func(t *testing.T, kind string) {
		db, dsn := setup(t, kind)
		api := newPaymentAPI()
		srv := httptest.NewServer(api)
		defer srv.Close()

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EOS_IDEM_CRASH_DSN="+dsn, "EOS_IDEM_CRASH_API="+srv.URL)
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the crashing caller ended with %v, want SIGKILL", err)
		}
		if api.requests() != 1 || effects(t, db, "k") != 0 {
			t.Fatalf("after the crash: %d API calls, %d committed effects; want 1 and 0", api.requests(), effects(t, db, "k"))
		}
		s, err := idempotency.Open(t.Context(), db, idempotency.Config{StaleAfter: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		age(t, db, 2)
		var attempt idempotency.Attempt
		v, err := s.Do(t.Context(), "payment", "k", func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
			attempt, _ = idempotency.AttemptOf(ctx)
			return charge(ctx, tx, srv.URL)
		})
		if err != nil || attempt != (idempotency.Attempt{BizType: "payment", Key: "k", TakenOver: true}) {
			t.Fatalf("the run after the takeover: %q, %v, attempt %+v; want TakenOver for payment/k", v, err, attempt)
		}
		if api.requests() != 2 || api.charges() != 1 || effects(t, db, "k") != 1 {
			t.Fatalf("%d API calls, %d charges, %d committed effects; want 2 calls (the handler ran again), 1 charge, 1 effect",
				api.requests(), api.charges(), effects(t, db, "k"))
		}
	})
}

// charge is the handler of the crash test: the external call with the key,
// then the local effect in tx.
func charge(ctx context.Context, tx *sql.Tx, url string) ([]byte, error) {
	a, _ := idempotency.AttemptOf(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/charges", strings.NewReader(`{"amount":100}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Idempotency-Key", a.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("payment API: " + resp.Status)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO effects (k) VALUES ('"+a.Key+"')"); err != nil {
		return nil, err
	}
	return []byte(resp.Header.Get("Charge-Id")), nil
}

// paymentAPI charges once per Idempotency-Key, as payment providers do.
type paymentAPI struct {
	mu    sync.Mutex
	calls int
	seen  map[string]bool
}

func newPaymentAPI() *paymentAPI { return &paymentAPI{seen: map[string]bool{}} }

func (p *paymentAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	k := r.Header.Get("Idempotency-Key")
	p.seen[k] = true
	w.Header().Set("Charge-Id", "ch-"+k)
}

func (p *paymentAPI) requests() int { p.mu.Lock(); defer p.mu.Unlock(); return p.calls }
func (p *paymentAPI) charges() int  { p.mu.Lock(); defer p.mu.Unlock(); return len(p.seen) }
