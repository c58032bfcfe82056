package reconcile_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/reconcile"
	"github.com/eosctl/eos/sink"
)

// TestRecordsBeyondTheSinksOffsetsArePendingNeverMissingNorRepaired: a
// sink that is merely behind (500 records produced after it stopped) into
// a table WITHOUT a unique key: reconcile --repair reports them pending,
// not missing, and writes nothing; the sink then writes each once (before
// the fix, repair inserted them and the sink again: 2 rows each).
func TestRecordsBeyondTheSinksOffsetsArePendingNeverMissingNorRepaired(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			ddl := strings.Replace(eventsDDL(kind), " PRIMARY KEY", "", 1)
			s := setupWith(t, kind, 1000, ddl, mappingYAML)
			s.exec(t, "CREATE INDEX events_seq ON events (seq)")
			s.produceSeq(t, 1000, 1500)
			zero := int64(0)
			rep := s.run(t, &zero, true)
			if rep.MissingCount != 0 || rep.Repaired != 0 || rep.PendingOffsets != 500 || rep.Keys != 1000 || !rep.Clean() {
				t.Fatalf("a sink 500 records behind: %s; want 1000 keys judged, 0 missing, 0 repaired, 500 pending", rep.Summary())
			}
			s.sink(t)
			if rows, keys := s.count(t, "SELECT COUNT(*) FROM events"), s.count(t, "SELECT COUNT(DISTINCT seq) FROM events"); rows != 1500 || keys != 1500 {
				t.Fatalf("after the sink caught up: %d rows for %d keys, want 1500 and 1500", rows, keys)
			}
			if rep := s.run(t, nil, false); !rep.Clean() || rep.Keys != 500 || rep.PendingOffsets != 0 {
				t.Fatalf("the next run, from the stored watermark: %s; want the 500 formerly pending keys judged, clean", rep.Summary())
			}
		})
	}
}

// TestTheRowIsComparedWithTheRecordTheSinkKeeps: amounts 10 then 99 for
// one key: in insert mode the sink keeps 10 and the run is clean (before the
// fix: "changed: topic 99, table 10"), also on an incremental run whose
// range holds only the 99; in upsert mode it keeps 99, and a row edited
// back to 10 is changed against 99.
func TestTheRowIsComparedWithTheRecordTheSinkKeeps(t *testing.T) {
	rec := func(amount int) string { return fmt.Sprintf(`{"seq":5000,"user":"u","amount":%d}`, amount) }
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			ins := setup(t, kind, 10)
			ins.produce(t, "5000", rec(10))
			ins.sink(t)
			if rep := ins.run(t, nil, false); !rep.Clean() {
				t.Fatalf("insert mode, first record: %s", rep.Summary())
			}
			ins.produce(t, "5000", rec(99))
			ins.sink(t)
			if rep := ins.run(t, nil, false); !rep.Clean() || rep.Records != 1 {
				t.Fatalf("insert mode, an incremental run over the repeat only: %s %+v; want clean (the sink kept 10)", rep.Summary(), rep.Changed)
			}
			zero := int64(0)
			if rep := ins.run(t, &zero, false); !rep.Clean() {
				t.Fatalf("insert mode, from 0: %s %+v; want clean (the sink kept the first record, 10)", rep.Summary(), rep.Changed)
			}

			up := setupWith(t, kind, 10, eventsDDL(kind), mappingYAML+"mode: upsert\n")
			up.produce(t, "5000", rec(10), "5000", rec(99))
			up.sink(t)
			if rep := up.run(t, &zero, false); !rep.Clean() {
				t.Fatalf("upsert mode: %s %+v; want clean (the sink kept the last record, 99)", rep.Summary(), rep.Changed)
			}
			up.exec(t, "UPDATE events SET amount = 10 WHERE seq = 5000")
			rep := up.run(t, &zero, false)
			if len(rep.Changed) != 1 || rep.Changed[0].Topic != "99" || rep.Changed[0].Table != "10" {
				t.Fatalf("upsert mode, row set back to the first record: %+v; want changed topic 99, table 10", rep.Changed)
			}
		})
	}
}

// TestFindingsAreExactAcrossManySpillBuckets: with 20 buckets of 100
// records (reconcile.WithBucketRecords), keys repeated with other values
// (insert mode: the first counts) and planted findings, the run finds
// exactly the planted ones, and MaxFindings lists 1 of each while counting
// all.
func TestFindingsAreExactAcrossManySpillBuckets(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			s := setup(t, kind, 2000)
			var kv []string
			for i := range 300 { // repeats of existing keys, other amounts: absorbed
				kv = append(kv, fmt.Sprint(i*5), fmt.Sprintf(`{"seq":%d,"user":"other","amount":-1}`, i*5))
			}
			s.produce(t, kv...)
			s.sink(t)
			s.exec(t, "DELETE FROM events WHERE seq IN (17, 1717)")
			s.exec(t, "INSERT INTO events (seq, usr, amount) VALUES (999999, 'planted', 1), (888888, 'planted', 1)")
			s.exec(t, "UPDATE events SET usr = 'tampered' WHERE seq IN (42, 1042)")
			zero := int64(0)
			rep := s.runWith(t, reconcile.WithBucketRecords(s.config(&zero, false), 100))
			if got := [3][]string{keys(rep.Missing), keys(rep.Extra), keys(rep.Changed)}; !reflect.DeepEqual(got, [3][]string{{"17/", "1717/"}, {"888888/", "999999/"}, {"1042/usr", "42/usr"}}) ||
				rep.Keys != 2000 || rep.Records != 2300 {
				t.Fatalf("findings missing/extra/changed = %v; want [17 1717] [888888 999999] [42/usr 1042/usr]: %s", got, rep.Summary())
			}
			cfg := reconcile.WithBucketRecords(s.config(&zero, false), 100)
			cfg.MaxFindings = 1
			rep = s.runWith(t, cfg)
			if len(rep.Missing)+len(rep.Extra)+len(rep.Changed) != 3 || rep.MissingCount != 2 || rep.ExtraCount != 2 || rep.ChangedCount != 2 {
				t.Fatalf("MaxFindings 1: listed %d/%d/%d, counted %d/%d/%d; want 1 each listed, 2 each counted",
					len(rep.Missing), len(rep.Extra), len(rep.Changed), rep.MissingCount, rep.ExtraCount, rep.ChangedCount)
			}
		})
	}
}

// TestKeysAreLookedUpThroughTheKeysIndex: an incremental run over 2,000
// records against a table of 100,000 rows reads it through the key's
// index, never a whole-table scan (before the fix the key was cast to text,
// one scan per 500 keys). PostgreSQL: pg_stat_user_tables counts no new
// sequential scan; MariaDB: with max_join_size=20000 a statement that
// would examine more rows is refused.
func TestKeysAreLookedUpThroughTheKeysIndex(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			s := setup(t, kind, 2000)
			// A copy of the sink's table that only the reconciler reads
			// (the sink's own statements, whose statistics PostgreSQL
			// reports when its connections end, must not count).
			copyDDL, fill := "CREATE TABLE ev2 (LIKE events INCLUDING ALL)", "INSERT INTO ev2 (seq, usr, amount) SELECT g, 'filler', 0 FROM generate_series(100000, 199999) g"
			if kind == dbtest.MySQL {
				copyDDL, fill = "CREATE TABLE ev2 LIKE events", "INSERT INTO ev2 (seq, usr, amount) SELECT seq, 'filler', 0 FROM seq_100000_to_199999"
			}
			s.exec(t, copyDDL)
			s.exec(t, "INSERT INTO ev2 SELECT * FROM events")
			s.exec(t, fill)
			m, err := sink.ParseMapping("m.yaml", []byte(strings.Replace(mappingYAML, "table: events", "table: ev2", 1)))
			if err != nil {
				t.Fatal(err)
			}
			one := int64(1)
			cfg := s.config(&one, false)
			cfg.Mapping = m
			if kind == dbtest.MySQL {
				s.exec(t, "ANALYZE TABLE ev2")
				cfg.DSN += "?max_join_size=20000"
				if rep := s.runWith(t, cfg); !rep.Clean() || rep.Keys != 1997 {
					t.Fatalf("%s; want clean, 1997 keys", rep.Summary())
				}
				return
			}
			s.exec(t, "ANALYZE ev2")
			scans := func() (seq, idx int64) {
				s.exec(t, "SELECT pg_stat_clear_snapshot()")
				if err := s.db.QueryRowContext(t.Context(), "SELECT seq_scan, COALESCE(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'ev2'").Scan(&seq, &idx); err != nil {
					t.Fatal(err)
				}
				return seq, idx
			}
			seq0, idx0 := scans()
			if rep := s.runWith(t, cfg); !rep.Clean() || rep.Keys != 1997 {
				t.Fatalf("%s; want clean, 1997 keys", rep.Summary())
			}
			for deadline := time.Now().Add(30 * time.Second); ; {
				seq, idx := scans()
				if idx > idx0 {
					if seq != seq0 {
						t.Fatalf("the run scanned the table %d times (and used its index %d times), want 0 scans", seq-seq0, idx-idx0)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the run used the key's index 0 times and scanned the table %d times", seq-seq0)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestTheSnapshotOutlivesAnIdleInTransactionTimeout: the read snapshot is
// idle while the topic is read; a database-wide
// idle_in_transaction_session_timeout (here 50 ms, against a read of
// 20,000 records) must not end the run.
func TestTheSnapshotOutlivesAnIdleInTransactionTimeout(t *testing.T) {
	s := setup(t, dbtest.Postgres, 20000)
	s.exec(t, "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET idle_in_transaction_session_timeout = ''50ms''', current_database()); END $$")
	zero := int64(0)
	if rep := s.run(t, &zero, false); !rep.Clean() || rep.Keys != 20000 {
		t.Fatalf("%s; want clean, 20000 keys", rep.Summary())
	}
}
