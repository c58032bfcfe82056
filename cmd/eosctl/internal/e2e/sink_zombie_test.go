package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestALiveSinkProgressesWhileAZombieIsPausedInItsTransaction: sink A is
// SIGSTOPped between writing a batch and committing it, holding its
// transaction's locks on the offsets rows. Sink B takes the partitions over
// and must commit on every partition within 30s (the database ends A's
// idle transaction after --idle-in-transaction-timeout, B's statements
// give up waiting after --lock-timeout and are retried), A resumed later
// commits nothing stale, and the table (no unique key: a duplicate would be
// a second row) holds each record once. Then, with its offsets rows locked
// by another transaction, B is sent SIGTERM and exits 0 within its
// --shutdown-timeout, and a new sink finishes the topic: each record once.
// (Before: B moved 0 offsets, waiting for ever on A's locks, and SIGTERM
// could not stop it.)
func TestALiveSinkProgressesWhileAZombieIsPausedInItsTransaction(t *testing.T) {
	testenv.Long(t) // about 30s: two database kinds, a session timeout and an idle-transaction timeout each
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) { sinkZombie(t, kind) })
	}
}

func sinkZombie(t *testing.T, kind string) {
	const (
		n          = 20_000
		more       = 100
		partitions = 4
		group      = "sink-zombie"
		topic      = "zombie-in"
		shutdown   = 2 * time.Second
	)
	e := newEnv(t, broker.Config{})
	dsn := dbtest.Fresh(t, kind)
	db := dbtest.Open(t, dsn)
	keylessEvents(t, db, kind)
	mapping := writer(t)("events.yaml", sinkMapping)
	e.produce(topic, n, partitions, 0)
	opts := []string{"--lock-timeout", "1s", "--idle-in-transaction-timeout", "4s", "--shutdown-timeout", shutdown.String(),
		"--retry-attempts", "1000", "--retry-max", "500ms", "--batch-size", "200", "--kafka-commit=false", "--pg-write-path", "copy"}

	a := e.sinkProc(0, dsn, mapping, group, topic, append(opts, "--test-commit-delay", "1s")...)
	deadline := time.Now().Add(time.Minute)
	for a.Last().Kind != sink.EventWritten {
		if time.Now().After(deadline) {
			t.Fatal("sink A wrote no batch within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Signal(syscall.SIGCONT) })
	paused := stored(t, db, group, topic)
	t.Logf("sink A paused inside its transaction; stored offsets %v", paused)

	b := e.sinkProc(1, dsn, mapping, group, topic, opts...)
	began := time.Now()
	for {
		now := stored(t, db, group, topic)
		moved := 0
		for p := range int32(partitions) {
			if now[p] > paused[p] {
				moved++
			}
		}
		if moved == partitions {
			t.Logf("sink B committed on every partition %s after it started, sink A still paused: %v", time.Since(began).Round(time.Millisecond), now)
			break
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("sink B moved %d of %d partitions in 30s while sink A was paused inside its transaction: from %v to %v", moved, partitions, paused, now)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.waitStored(db, group, topic, n, 2*time.Minute)
	// The zombie wakes up: its transaction is gone, its commit fails and
	// it re-reads the database's offsets; then it stops on SIGTERM.
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	requireEachSeqOnce(t, db, n)
	_ = a.Signal(syscall.SIGTERM)
	if code := a.Wait(); code != 0 {
		t.Fatalf("sink A exited %d after SIGCONT and SIGTERM, want 0", code)
	}

	// SIGTERM while B waits for locks another transaction holds.
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	if _, err := tx.ExecContext(t.Context(), fmt.Sprintf("SELECT next_offset FROM eos_sink_offsets WHERE consumer_group = '%s' FOR UPDATE", group)); err != nil {
		t.Fatal(err)
	}
	for i := range more {
		r := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"seq":%d,"user":"u","amount":1}`, n+i))}
		if err := e.cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// B has fetched them and waits for the locks: its statements time out.
	retries := strings.Count(e.logs.String(), "rolled back, retrying")
	for wait := time.Now().Add(20 * time.Second); strings.Count(e.logs.String(), "rolled back, retrying") <= retries; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("sink B did not retry a batch within 20s while its offsets rows were locked")
		}
	}
	sent := time.Now()
	if err := b.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(shutdown + 5*time.Second):
		t.Fatalf("sink B still running %s after SIGTERM (--shutdown-timeout %s) while waiting for locks", time.Since(sent).Round(time.Millisecond), shutdown)
	}
	if code := b.Wait(); code != 0 {
		t.Fatalf("sink B exited %d after SIGTERM, want 0", code)
	}
	t.Logf("sink B stopped %s after SIGTERM while waiting for locks", time.Since(sent).Round(time.Millisecond))
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	c := e.sinkProc(2, dsn, mapping, group, topic, opts...)
	e.waitStored(db, group, topic, n+more, time.Minute)
	_ = c.Signal(syscall.SIGTERM)
	if code := c.Wait(); code != 0 {
		t.Fatalf("sink C exited %d after SIGTERM, want 0", code)
	}
	requireEachSeqOnce(t, db, n+more)
}

// keylessEvents creates the table events WITHOUT a unique key: a record
// written twice would be two rows.
func keylessEvents(t *testing.T, db *sink.DB, kind string) {
	t.Helper()
	text := "TEXT"
	if kind == dbtest.MySQL {
		text = "VARCHAR(64)"
	}
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE events (seq BIGINT NOT NULL, usr "+text+" NOT NULL, amount DOUBLE PRECISION)"); err != nil {
		t.Fatal(err)
	}
}

// stored is group's stored offsets of topic, by partition.
func stored(t *testing.T, db *sink.DB, group, topic string) map[int32]int64 {
	t.Helper()
	s, err := sink.StoredOffsets(t.Context(), db, "eos_sink_offsets", group)
	if err != nil {
		t.Fatal(err)
	}
	return s[topic]
}

// requireEachSeqOnce: seq 0..n-1 each in events exactly once, nothing else.
func requireEachSeqOnce(t *testing.T, db *sink.DB, n int64) {
	t.Helper()
	dups := queryInt(t, db, "SELECT COUNT(*) FROM (SELECT seq, COUNT(*) FROM events GROUP BY seq HAVING COUNT(*) > 1) d")
	rows := queryInt(t, db, "SELECT COUNT(*) FROM events")
	distinct := queryInt(t, db, fmt.Sprintf("SELECT COUNT(DISTINCT seq) FROM events WHERE seq >= 0 AND seq < %d", n))
	if dups != 0 || rows != n || distinct != n {
		t.Fatalf("%d keys with more than one row, %d rows, %d distinct keys: want 0, %d, %d", dups, rows, distinct, n, n)
	}
}
