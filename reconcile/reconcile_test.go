package reconcile_test

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/reconcile"
	"github.com/eosctl/eos/sink"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const mappingYAML = `table: events
key_column: seq
key: seq
columns:
  usr: user
  amount: amount
`

// sunk is a topic "in" of 3 partitions written by the sink (group "g")
// into a fresh database of kind.
type sunk struct {
	kind string
	opts []kgo.Opt
	cl   *kgo.Client
	dsn  string
	db   *sink.DB
	m    *sink.Mapping
}

// eventsDDL is the table of mappingYAML, with seq as its primary key.
func eventsDDL(kind string) string {
	text := "TEXT"
	if kind == dbtest.MySQL {
		text = "VARCHAR(64)"
	}
	return "CREATE TABLE events (seq BIGINT PRIMARY KEY, usr " + text + " NOT NULL, amount DOUBLE PRECISION)"
}

// setup produces n datagen records (seq 0 to n-1) and has the sink write
// them into a table created by ddl, with mapping.
func setup(t *testing.T, kind string, n int64) *sunk {
	t.Helper()
	return setupWith(t, kind, n, eventsDDL(kind), mappingYAML)
}

func setupWith(t *testing.T, kind string, n int64, ddl, mapping string) *sunk {
	t.Helper()
	b, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if _, err := datagen.Produce(t.Context(), cl, datagen.Config{Topic: "in", Count: n, Size: 100, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	dsn := dbtest.Fresh(t, kind)
	db := dbtest.Open(t, dsn)
	if _, err := db.ExecContext(t.Context(), ddl); err != nil {
		t.Fatal(err)
	}
	m, err := sink.ParseMapping("m.yaml", []byte(mapping))
	if err != nil {
		t.Fatal(err)
	}
	s := &sunk{kind, opts, cl, dsn, db, m}
	s.sink(t)
	return s
}

// produce appends records with Kafka key key and value v each.
func (s *sunk) produce(t *testing.T, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if err := s.cl.ProduceSync(t.Context(), &kgo.Record{Topic: "in", Key: []byte(kv[i]), Value: []byte(kv[i+1])}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// produceSeq appends datagen records seq from to to-1.
func (s *sunk) produceSeq(t *testing.T, from, to int64) {
	t.Helper()
	var kv []string
	for i := from; i < to; i++ {
		kv = append(kv, strconv.FormatInt(i, 10), string(datagen.Value(i, time.Now(), 100)))
	}
	s.produce(t, kv...)
}

// sink runs the sink until its stored offsets reach the topic's end.
func (s *sunk) sink(t *testing.T) {
	t.Helper()
	snap, err := verify.Snapshot(t.Context(), kadm.NewClient(s.cl), "in")
	if err != nil {
		t.Fatal(err)
	}
	sk, err := sink.New(t.Context(), sink.Config{DSN: s.dsn, Group: "g", Topics: []string{"in"}, Mapping: s.m, ClientOpts: s.opts, SessionTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sk.Run(ctx) }()
	for deadline := time.Now().Add(time.Minute); ; {
		stored, err := sink.StoredOffsets(t.Context(), s.db, "eos_sink_offsets", "g")
		if err != nil && !strings.Contains(err.Error(), "exist") {
			t.Fatal(err)
		}
		caught := true
		for _, p := range snap {
			caught = caught && stored["in"][p.Partition] >= p.End
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink stored %v, want %v", stored, snap)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sk.Close()
}

func (s *sunk) config(from *int64, repair bool) reconcile.Config {
	return reconcile.Config{DSN: s.dsn, Topic: "in", Group: "g", Mapping: s.m, ClientOpts: s.opts, From: from, Repair: repair, TempDir: ""}
}

func (s *sunk) run(t *testing.T, from *int64, repair bool) *reconcile.Report {
	t.Helper()
	return s.runWith(t, s.config(from, repair))
}

func (s *sunk) runWith(t *testing.T, cfg reconcile.Config) *reconcile.Report {
	t.Helper()
	rep, err := reconcile.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (s *sunk) count(t *testing.T, q string) int64 {
	t.Helper()
	var n int64
	if err := s.db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (s *sunk) exec(t *testing.T, q string) {
	t.Helper()
	if _, err := s.db.ExecContext(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// table is the whole table, for comparing before and after.
func (s *sunk) table(t *testing.T) []string {
	t.Helper()
	rows, err := s.db.QueryContext(t.Context(), "SELECT seq, usr, amount FROM events ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var seq int64
		var usr string
		var amount float64
		if err := rows.Scan(&seq, &usr, &amount); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(seq, usr, amount))
	}
	return out
}

func keys(fs []reconcile.Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, f.Key+"/"+f.Column)
	}
	return out
}

// TestPlantedMissingExtraAndChangedRowsAreEachFound: after a clean run, a
// deleted row, a row no record asked for and an edited column are each
// found and classified; a rerun over the same range gives the same report;
// --repair restores the missing row only, and a second repair changes
// nothing.
func TestPlantedMissingExtraAndChangedRowsAreEachFound(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			const n = 2000
			s := setup(t, kind, n)
			zero := int64(0)
			if rep := s.run(t, &zero, false); !rep.Clean() || rep.Keys != n || !rep.ExtraChecked {
				t.Fatalf("the sink's table: %s; want clean, %d keys, extras checked", rep.Summary(), n)
			}
			s.exec(t, "DELETE FROM events WHERE seq = 17")
			s.exec(t, "INSERT INTO events (seq, usr, amount) VALUES (999999, 'planted', 1)")
			s.exec(t, "UPDATE events SET usr = 'tampered' WHERE seq = 42")

			rep := s.run(t, &zero, false)
			if got := [3][]string{keys(rep.Missing), keys(rep.Extra), keys(rep.Changed)}; !reflect.DeepEqual(got, [3][]string{{"17/"}, {"999999/"}, {"42/usr"}}) {
				t.Fatalf("findings missing/extra/changed = %v; want [17] [999999] [42/usr]: %s", got, rep.Summary())
			}
			if rep.Changed[0].Table != "tampered" || rep.Changed[0].Topic == "tampered" {
				t.Fatalf("changed finding %+v: want the topic's value against the table's", rep.Changed[0])
			}
			again := s.run(t, &zero, false)
			if !reflect.DeepEqual([3][]reconcile.Finding{rep.Missing, rep.Extra, rep.Changed}, [3][]reconcile.Finding{again.Missing, again.Extra, again.Changed}) {
				t.Fatalf("a rerun over the same range differs:\n%s\n%s", rep.Summary(), again.Summary())
			}
			// Nothing new since: a run from the stored watermark reads nothing.
			if next := s.run(t, nil, false); next.Records != 0 || !next.Clean() || next.ExtraChecked {
				t.Fatalf("a run from the stored watermark: %s; want 0 records, clean, extras not checked", next.Summary())
			}

			before := s.table(t)
			fixed := s.run(t, &zero, true)
			if fixed.Repaired != 1 {
				t.Fatalf("repair wrote %d rows, want 1 (the missing one)", fixed.Repaired)
			}
			once := s.table(t)
			if len(once) != len(before)+1 {
				t.Fatalf("repair: %d rows, want %d", len(once), len(before)+1)
			}
			if twice := s.run(t, &zero, true); twice.Repaired != 0 || !reflect.DeepEqual(s.table(t), once) {
				t.Fatalf("a second repair changed the table (%d repaired)", twice.Repaired)
			}
			final := s.run(t, &zero, false)
			if got := [3][]string{keys(final.Missing), keys(final.Extra), keys(final.Changed)}; !reflect.DeepEqual(got, [3][]string{{}, {"999999/"}, {"42/usr"}}) {
				t.Fatalf("after the repair: %v; want no missing, the extra and the changed row still reported (never deleted or overwritten)", got)
			}
		})
	}
}
