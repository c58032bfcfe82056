package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/internal/seed"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kadm"
)

const sinkMapping = `table: events
key_column: seq
key: seq
columns:
  usr: user
  amount: amount
`

// sinkProc starts `eosctl sink` instance i (a label only: sinks of one
// group share everything else) with the test's broker.
func (e *env) sinkProc(i int, dsn, mapping, group, topic string, extra ...string) *supervise.Proc {
	e.t.Helper()
	name := group + "-" + strconv.Itoa(i)
	args := append([]string{"sink", "--brokers", e.b.Addrs()[0], "--to", dsn, "--mapping", mapping, "--group", group,
		"--input", topic, "--instance", strconv.Itoa(i), "--session-timeout", "3s", "--events", "-", "--log-level", "info"}, extra...)
	return e.start(name, args)
}

// storedSum sums group's offsets of topic stored in db.
func storedSum(t *testing.T, db *sink.DB, group, topic string) int64 {
	t.Helper()
	stored, err := sink.StoredOffsets(t.Context(), db, "eos_sink_offsets", group)
	if err != nil {
		return -1 // the server may be restarting
	}
	var sum int64
	for _, o := range stored[topic] {
		sum += o
	}
	return sum
}

func (e *env) waitStored(db *sink.DB, group, topic string, n int64, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for storedSum(e.t, db, group, topic) < n {
		if time.Now().After(deadline) {
			e.t.Fatalf("group %s stored offsets sum to %d of %d after %s", group, storedSum(e.t, db, group, topic), n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func queryInt(t *testing.T, db *sink.DB, q string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// TestSinkExactlyOnceIntoTheTableThroughKillsRebalancesAndADatabaseRestart:
// 200,000 records through two real `eosctl sink` processes into a table
// with NO unique key (so a record written twice would be two rows), while
// one of them is SIGKILLed at random at least 5 times (at least 2 of those
// between writing a batch and committing it), the group goes 1 -> 2 -> 1
// processes, and the database server is restarted mid-run: every key is in
// the table exactly once, the row count equals the input, and the stored
// offsets equal the topic's end offsets. Then the table gets its primary
// key (which it can only if there are no duplicates) and the whole topic is
// replayed from offset 0: the table is unchanged.
func TestSinkExactlyOnceIntoTheTableThroughKillsRebalancesAndADatabaseRestart(t *testing.T) {
	testenv.Long(t)
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) { sinkExactlyOnce(t, kind) })
	}
}

func sinkExactlyOnce(t *testing.T, kind string) {
	const (
		n          = 200_000
		partitions = 4
		kills      = 6
		group      = "sink-eo"
	)
	began := time.Now()
	e := newEnv(t, broker.Config{})
	srv := dbtest.StartPrivate(t, kind)
	db := dbtest.Open(t, srv.DSN)
	keylessEvents(t, db, kind)
	mapping := writer(t)("events.yaml", sinkMapping)
	// A commit delay keeps each batch's transaction open long enough for
	// a kill to land inside it; many retries ride out the server restart.
	// No commits to Kafka's group: whatever a restarted or newly assigned
	// process resumes from can only come from the database.
	extra := []string{"--batch-size", "500", "--test-commit-delay", "20ms", "--retry-attempts", "30", "--retry-max", "2s", "--kafka-commit=false",
		"--pg-write-path", "copy"} // PostgreSQL's COPY path, as at batches of 5,000 and more
	produced := e.produceAsync("sink-in", n, partitions, 20_000)

	procs := []*supervise.Proc{e.sinkProc(0, srv.DSN, mapping, group, "sink-in", extra...)}
	e.waitStored(db, group, "sink-in", 5_000, time.Minute)
	t.Logf("%s: sink 0 committing; starting sink 1", time.Since(began).Round(time.Millisecond))
	procs = append(procs, e.sinkProc(1, srv.DSN, mapping, group, "sink-in", extra...)) // 1 -> 2
	// The kill instants and victims, from a logged seed.
	rng := seed.Rand(t)
	midTxn, restarted := 0, false
	for k := range kills {
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		if k == kills/2 {
			if got := storedSum(t, db, group, "sink-in"); got >= n {
				t.Fatalf("the sinks finished (%d) before the server restart: the restart would not be mid-run", got)
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
			restarted = true
			t.Logf("%s: database server restarted", time.Since(began).Round(time.Millisecond))
		}
		i := rng.IntN(len(procs))
		p := procs[i]
		if k%2 == 0 {
			// Wait for a batch written and not yet committed.
			deadline := time.Now().Add(10 * time.Second)
			for p.Last().Kind != sink.EventWritten && time.Now().Before(deadline) {
				time.Sleep(500 * time.Microsecond)
			}
			if p.Last().Kind == sink.EventWritten {
				midTxn++
			}
		}
		p.Kill()
		procs[i] = e.sinkProc(i, srv.DSN, mapping, group, "sink-in", extra...)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// 2 -> 1: the second process stops cleanly, the first takes over.
	// (Once it runs: a SIGTERM before its handler is set would kill it.)
	for procs[1].Count(pipeline.EventStarted) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	_ = procs[1].Signal(syscall.SIGTERM)
	if code := procs[1].Wait(); code != 0 {
		t.Fatalf("sink 1 exited %d after SIGTERM, want 0", code)
	}
	t.Logf("%s: kills done, sink 1 stopped", time.Since(began).Round(time.Millisecond))
	e.waitStored(db, group, "sink-in", n, 2*time.Minute)
	t.Logf("%s: all %d records committed", time.Since(began).Round(time.Millisecond), n)
	for _, p := range procs {
		select {
		case <-p.Done():
			if code := p.Wait(); code != 0 && p != procs[1] {
				t.Fatalf("sink %s exited %d on its own", p.Name, code)
			}
		default:
		}
	}
	e.stop()
	if midTxn < kills/4+1 || !restarted {
		t.Fatalf("only %d of %d kills landed between a batch's write and its commit (restarted: %v)", midTxn, kills, restarted)
	}

	requireEachSeqOnce(t, db, n)
	requireStoredAtEnd(t, e, db, group, "sink-in")
	retried := strings.Count(e.logs.String(), "rolled back, retrying")
	t.Logf("%s: %d rows, each key once, after %d kills (%d between write and commit), a 1->2->1 rebalance and a server restart (%d batches rolled back and retried); %d batches committed",
		dbtest.Name(kind), n, kills, midTxn, retried, e.Count(pipeline.EventCommitted))

	// The replay: with the key made unique, the whole topic again.
	if _, err := db.ExecContext(t.Context(), "ALTER TABLE events ADD PRIMARY KEY (seq)"); err != nil {
		t.Fatalf("adding the primary key (fails only if a key has two rows): %v", err)
	}
	p := e.sinkProc(9, srv.DSN, mapping, group, "sink-in", "--replay", "--batch-size", "1000")
	deadline := time.Now().Add(2 * time.Minute)
	for p.Count(pipeline.EventCommitted) == 0 || storedSum(t, db, group, "sink-in") < n {
		if time.Now().After(deadline) {
			t.Fatalf("the replay did not reach the end: stored offsets sum to %d", storedSum(t, db, group, "sink-in"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.stop()
	t.Logf("%s: replay done", time.Since(began).Round(time.Millisecond))
	if rows := queryInt(t, db, "SELECT COUNT(*) FROM events"); rows != n {
		t.Fatalf("after the replay from offset 0: %d rows, want %d", rows, n)
	}
	requireStoredAtEnd(t, e, db, group, "sink-in")
}

// requireStoredAtEnd: the offsets the sink stored are the topic's end
// offsets, partition by partition.
func requireStoredAtEnd(t *testing.T, e *env, db *sink.DB, group, topic string) {
	t.Helper()
	stored, err := sink.StoredOffsets(t.Context(), db, "eos_sink_offsets", group)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if got := stored[topic][o.Partition]; got != o.Offset {
			t.Errorf("stored offset of %s[%d] = %d, want the end offset %d", topic, o.Partition, got, o.Offset)
		}
	})
}

// TestSinkBadInputExitsWithADocumentedCode: a bad DSN, a missing table, a
// missing column and a wrong password each make `eosctl sink` print one
// line and exit with its documented code (2 bad input, 4 authorization),
// having written nothing.
func TestSinkBadInputExitsWithADocumentedCode(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			e := newEnv(t, broker.Config{})
			dsn := dbtest.Fresh(t, kind)
			db := dbtest.Open(t, dsn)
			if _, err := db.ExecContext(t.Context(), "CREATE TABLE events (seq BIGINT PRIMARY KEY, usr VARCHAR(64) NOT NULL, amount DOUBLE PRECISION)"); err != nil {
				t.Fatal(err)
			}
			e.produce("bad-in", 100, 1, 0)
			write := writer(t)
			good := write("good.yaml", sinkMapping)
			cases := []struct {
				name, dsn, mapping string
				code               int
				says               string
				extra              []string
			}{
				{"bad DSN", strings.Replace(dsn, "://", ":/", 1), good, 2, "--to", nil},
				{"unknown scheme", "oracle://u:p@127.0.0.1/db", good, 2, "--to scheme", nil},
				{"missing table", dsn, write("t.yaml", strings.Replace(sinkMapping, "table: events", "table: nope", 1)), 2, "nope", nil},
				{"missing column", dsn, write("c.yaml", sinkMapping+"  nocol: amount\n"), 2, "nocol", nil},
				{"bad mapping", dsn, write("m.yaml", sinkMapping+"  x: amount +\n"), 2, "columns.x", nil},
				{"wrong password", dbtest.WithPassword(dsn, "wrong"), good, 4, "authentication", nil},
				{"replay id without =", dsn, good, 2, "--replay=ID", []string{"--replay", "2"}},
			}
			for _, c := range cases {
				var stderr strings.Builder
				p, err := supervise.Start(e.ctx, supervise.Config{Name: c.name, Bin: eosctl, Stderr: &stderr, Args: append([]string{"sink",
					"--brokers", e.b.Addrs()[0], "--to", c.dsn, "--mapping", c.mapping, "--group", "g", "--input", "bad-in", "--retry-attempts", "2"}, c.extra...)})
				if err != nil {
					t.Fatal(err)
				}
				code := p.Wait()
				out := strings.TrimSpace(stderr.String())
				if code != c.code || strings.Count(out, "\n") != 0 || !strings.Contains(out, c.says) || strings.Contains(out, ":wrong@") {
					t.Errorf("%s: exit %d, stderr %q: want exit %d and one line naming %q", c.name, code, out, c.code, c.says)
				}
			}
			if rows := queryInt(t, db, "SELECT COUNT(*) FROM events"); rows != 0 {
				t.Fatalf("%d rows written by sinks that refused to start", rows)
			}
		})
	}
}

// writer returns a function writing files into a temporary directory of t
// and returning their paths.
func writer(t *testing.T) func(name, body string) string {
	dir := t.TempDir()
	return func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}
