package sink_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/sink"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a log destination the sink and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestACollisionOnAnotherUniqueIndexIsADeadLetterNeverAbsorbed: records
// keyed by seq into a table that also has a UNIQUE usr column, 2,000
// records over datagen's 16 users. The conflict handling names the key, so
// only a repeat of seq would be absorbed: each user's first record is a
// row and every other record is a dead letter carrying the database's
// reason (the index's name), nothing is counted as a duplicate, and the
// sink warns with the count and the first reason. MariaDB cannot name the
// conflict target, so with seq as primary key the sink refuses the table in
// one line naming the index; without a key on seq (a plain INSERT) it
// dead-letters like PostgreSQL. (Before: 16 rows, 1,984 "duplicates
// absorbed", no dead letter, no warning.)
func TestACollisionOnAnotherUniqueIndexIsADeadLetterNeverAbsorbed(t *testing.T) {
	const n = 2000
	for _, kind := range dbtest.Kinds {
		for _, keyed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/seq-primary-key=%v", dbtest.Name(kind), keyed), func(t *testing.T) {
				k := newKafka(t)
				dsn := dbtest.Fresh(t, kind)
				db := dbtest.Open(t, dsn)
				text, key := "TEXT", "BIGINT NOT NULL"
				if kind == dbtest.MySQL {
					text = "VARCHAR(64)"
				}
				if keyed {
					key = "BIGINT PRIMARY KEY"
				}
				exec(t, db, fmt.Sprintf("CREATE TABLE events (seq %s, usr %s NOT NULL UNIQUE, amount DOUBLE PRECISION)", key, text))
				k.produce(t, "in", n, 2)
				logs := &syncBuffer{}
				met := sink.NewMetrics("g")
				cfg := sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: mapping(t, eventsMapping, "events"), ClientOpts: k.opts(),
					PostgresWritePath: "copy", Metrics: met, Logger: slog.New(slog.NewTextHandler(logs, nil))}
				if kind == dbtest.MySQL && keyed {
					s, err := sink.New(t.Context(), cfg)
					if err == nil {
						s.Close()
						t.Fatal("the sink started on a MariaDB table with a second unique index: a collision on it would be absorbed")
					}
					if !errors.Is(err, eos.ErrConfig) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "usr") {
						t.Fatalf("error %q: want one configuration error line naming the index usr", err)
					}
					t.Logf("refused: %v", err)
					return
				}
				stop := runSink(t, cfg)
				waitStored(t, db, "g", "in", n, 2*time.Minute)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				rows := count(t, db, "SELECT COUNT(*) FROM events")
				users := count(t, db, "SELECT COUNT(DISTINCT usr) FROM events")
				var dead int64
				for _, o := range k.endOffsets(t, "g-dlq") {
					dead += o
				}
				if rows != datagen.NumUsers || users != datagen.NumUsers || dead != n-datagen.NumUsers {
					t.Fatalf("%d rows of %d users and %d dead letters: want %d, %d and %d (every record a row or a dead letter)", rows, users, dead, datagen.NumUsers, datagen.NumUsers, n-datagen.NumUsers)
				}
				if d := testutil.ToFloat64(met.Duplicates()); d != 0 {
					t.Fatalf("%v duplicates absorbed, want 0: no seq repeats", d)
				}
				for _, r := range readAll(t, k, "g-dlq", int(dead)) {
					if reason, why := header(r, "eos-dlq-reason"), header(r, "eos-dlq-error"); reason != "rejected-by-database" || !strings.Contains(why, "usr") {
						t.Fatalf("dead letter %s: reason %q, error %q: want rejected-by-database with the database's reason naming usr", r.Value, reason, why)
					}
				}
				if l := logs.String(); !strings.Contains(l, "went to the dead-letter topic g-dlq") || !strings.Contains(l, "first_reason=rejected-by-database") {
					t.Fatalf("no warning about the records that could not be written; log:\n%s", l)
				}
			})
		}
	}
}

// TestValuesArriveAsWritten: strings with tabs, newlines, backslashes,
// quotes and non-ASCII letters, a null, large and negative numbers arrive
// in the table exactly as the records held them (PostgreSQL's COPY text
// format escapes them; MariaDB's INSERT binds them).
func TestValuesArriveAsWritten(t *testing.T) {
	users := []string{"a\tb", "c\nd\r", `e\f`, `g"h'i`, "ü€", `\N`, ""}
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			k, dsn, db := setup(t, kind, "events")
			var recs []string
			for i, u := range users {
				b, _ := json.Marshal(u)
				recs = append(recs, fmt.Sprintf(`{"seq":%d,"user":%s,"amount":%d.25}`, i, b, -i*1000003))
			}
			recs = append(recs, fmt.Sprintf(`{"seq":%d,"user":"x","amount":null}`, len(users)))
			produceValues(t, k, "in", recs)
			stop := runSink(t, sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: mapping(t, eventsMapping, "events"), ClientOpts: k.opts(), PostgresWritePath: "copy"})
			waitStored(t, db, "g", "in", int64(len(recs)), time.Minute)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for i, u := range users {
				var got string
				var amount float64
				if err := db.QueryRowContext(t.Context(), fmt.Sprintf("SELECT usr, amount FROM events WHERE seq = %d", i)).Scan(&got, &amount); err != nil {
					t.Fatal(err)
				}
				want, _ := strconv.ParseFloat(fmt.Sprintf("%d.25", -i*1000003), 64)
				if got != u || amount != want {
					t.Errorf("seq %d: usr %q amount %v, want %q %v", i, got, amount, u, want)
				}
			}
			if n := count(t, db, fmt.Sprintf("SELECT COUNT(*) FROM events WHERE seq = %d AND amount IS NULL", len(users))); n != 1 {
				t.Errorf("the null amount: %d rows with amount NULL, want 1", n)
			}
		})
	}
}
