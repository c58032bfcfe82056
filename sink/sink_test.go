package sink_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/sink"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRowsAndOffsetsCommitTogether: a topic read to its end leaves every
// record as exactly one row and the stored offsets at the end offsets; a
// replay of the whole topic from offset 0 then adds no row (the key absorbs
// every record, and the metric says so).
func TestRowsAndOffsetsCommitTogether(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			k, dsn, db := setup(t, kind, "events")
			const n = 5000
			k.produce(t, "in", n, 3)
			m := mapping(t, eventsMapping, "events")
			stop := runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m, ClientOpts: k.opts(), BatchSize: 300, PostgresWritePath: "copy"})
			waitStored(t, db, "g", "in", n, time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			requireEachKeyOnce(t, db, "events", n)
			requireOffsetsAtEnd(t, k, db, "g", "in")

			met := sink.NewMetrics("g")
			stop = runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m, ClientOpts: k.opts(), Replay: true, Metrics: met, PostgresWritePath: "copy"})
			waitStored(t, db, "g", "in", n, time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			requireEachKeyOnce(t, db, "events", n)
			requireOffsetsAtEnd(t, k, db, "g", "in")
			if got := testutil.ToFloat64(met.Duplicates()); got != n {
				t.Fatalf("replay absorbed %v duplicates, want %d", got, n)
			}
		})
	}
}

// TestBadRowsGoToTheDeadLetterTopic: a record the database rejects (NOT
// NULL) and a record that is not JSON go to the DLQ with their reason; every
// other record is written, and the offsets move past all of them.
func TestBadRowsGoToTheDeadLetterTopic(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			k, dsn, db := setup(t, kind, "events")
			var recs []string
			for i := range 20 {
				switch i {
				case 5:
					recs = append(recs, `{"seq":5,"user":null,"amount":1}`) // usr NOT NULL
				case 9:
					recs = append(recs, `not json`)
				default:
					recs = append(recs, fmt.Sprintf(`{"seq":%d,"user":"u%d","amount":%d.5}`, i, i, i))
				}
			}
			produceValues(t, k, "in", recs)
			stop := runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: mapping(t, eventsMapping, "events"), ClientOpts: k.opts(), PostgresWritePath: "copy"})
			waitStored(t, db, "g", "in", 20, time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := count(t, db, "SELECT COUNT(*) FROM events"); got != 18 {
				t.Fatalf("%d rows, want 18", got)
			}
			if got := count(t, db, "SELECT COUNT(*) FROM events WHERE seq IN (5, 9)"); got != 0 {
				t.Fatalf("%d rows for the bad records, want 0", got)
			}
			dl := readAll(t, k, "g-dlq", 2)
			reasons := map[string]string{}
			for _, r := range dl {
				reasons[header(r, "eos-dlq-offset")] = header(r, "eos-dlq-reason")
			}
			if reasons["5"] != "rejected-by-database" || reasons["9"] != "malformed-json" {
				t.Fatalf("dead letters by offset: %v, want 5: rejected-by-database, 9: malformed-json", reasons)
			}
		})
	}
}

// TestTransitionsApplyOnceAndIllegalOnesAreDeadLettered: the state-machine
// mode applies a legal transition, absorbs its repeat, and dead-letters an
// illegal one (wrong current status, or no row) — the three told apart.
func TestTransitionsApplyOnceAndIllegalOnesAreDeadLettered(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			k, dsn, db := setup(t, kind, "orders")
			for i := range 3 {
				exec(t, db, fmt.Sprintf("INSERT INTO orders (seq, usr, amount, status) VALUES (%d, 'u', 1, 'pending')", i))
			}
			produceValues(t, k, "in", []string{
				`{"seq":0,"from":"pending","to":"paid"}`, // legal
				`{"seq":0,"from":"pending","to":"paid"}`, // repeat: absorbed
				`{"seq":1,"from":"paid","to":"shipped"}`, // illegal: 1 is pending
				`{"seq":7,"from":"pending","to":"paid"}`, // illegal: no row
				`{"seq":2,"from":"pending","to":"paid"}`, // legal
				`{"seq":2,"from":"paid","to":"shipped"}`, // legal, in the same batch
			})
			m := mapping(t, `table: orders
key_column: seq
key: seq
mode: transition
transition:
  status_column: status
  from: from
  to: to
`)
			met := sink.NewMetrics("g")
			stop := runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m, ClientOpts: k.opts(), Metrics: met})
			waitStored(t, db, "g", "in", 6, time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for seq, want := range []string{"paid", "pending", "shipped"} {
				var got string
				if err := db.QueryRowContext(t.Context(), "SELECT status FROM orders WHERE seq = "+itoa(seq)).Scan(&got); err != nil || got != want {
					t.Fatalf("order %d: status %q (%v), want %q", seq, got, err, want)
				}
			}
			if d := testutil.ToFloat64(met.Duplicates()); d != 1 {
				t.Fatalf("%v repeats absorbed, want 1", d)
			}
			dl := readAll(t, k, "g-dlq", 2)
			for _, r := range dl {
				if header(r, "eos-dlq-reason") != "illegal-transition" {
					t.Fatalf("dead letter %s: reason %q, want illegal-transition", r.Value, header(r, "eos-dlq-reason"))
				}
			}
		})
	}
}

// TestSQLiteForDemos: the embedded SQLite the demo uses keeps the same
// promise: each key once, offsets at the end, a replay absorbed.
func TestSQLiteForDemos(t *testing.T) {
	k := newKafka(t)
	dsn := "sqlite:" + t.TempDir() + "/demo.db"
	db, err := sink.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eventsTable(t, db, "events", true)
	const n = 3000
	k.produce(t, "in", n, 2)
	m := mapping(t, eventsMapping, "events")
	for _, replay := range []bool{false, true} {
		met := sink.NewMetrics("g")
		stop := runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m, ClientOpts: k.opts(), Replay: replay, Metrics: met})
		waitStored(t, db, "g", "in", n, time.Minute)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		requireEachKeyOnce(t, db, "events", n)
		requireOffsetsAtEnd(t, k, db, "g", "in")
		if replay && testutil.ToFloat64(met.Duplicates()) != n {
			t.Fatalf("the replay absorbed %v duplicates, want %d", testutil.ToFloat64(met.Duplicates()), n)
		}
	}
}

// TestReplayRunsOncePerReplayID: a sink restarted with the same replay
// request (a supervisor that keeps --replay in its arguments) replays once:
// the first start reads the topic again from offset 0 (every record a
// duplicate the key absorbs), the next start with the same id resumes from
// the stored offsets and says so, and a new id replays again. (Before:
// every start with Replay replayed, so a table without a unique key got
// every row again on every restart.)
func TestReplayRunsOncePerReplayID(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			k, dsn, db := setup(t, kind, "events")
			const n = 1000
			k.produce(t, "in", n, 2)
			m := mapping(t, eventsMapping, "events")
			for i, c := range []struct {
				replay   bool
				id       string
				replayed bool
				says     string
			}{
				{false, "", false, ""},
				{true, "", true, `replay default of group g: deleted the stored offsets of 2 partitions`},
				{true, "", false, `replay default of group g was done at`},
				{true, "again", true, `replay again of group g: deleted`},
				{true, "again", false, `NOT replaying again`},
			} {
				// One new record per start, to wait for.
				before := int64(n + i)
				if i > 0 {
					r := &kgo.Record{Topic: "in", Value: []byte(fmt.Sprintf(`{"seq":%d,"user":"u","amount":1}`, n+i-1))}
					if err := k.cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
						t.Fatal(err)
					}
					before = int64(n + i - 1)
				}
				logs := &syncBuffer{}
				met := sink.NewMetrics("g")
				stop := runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m, ClientOpts: k.opts(),
					Replay: c.replay, ReplayID: c.id, Metrics: met, Logger: slog.New(slog.NewTextHandler(logs, nil))})
				waitStored(t, db, "g", "in", int64(n+i), time.Minute)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				want := 0.0
				if c.replayed {
					want = float64(before)
				}
				if got := testutil.ToFloat64(met.Duplicates()); got != want {
					t.Fatalf("start %d (replay %v, id %q): %v duplicates absorbed, want %v; log:\n%s", i, c.replay, c.id, got, want, logs)
				}
				if !strings.Contains(logs.String(), c.says) {
					t.Fatalf("start %d: the log does not say %q:\n%s", i, c.says, logs)
				}
			}
			requireEachKeyOnce(t, db, "events", n+4)
		})
	}
}
