package sink_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSinkWritePath measures the sink's write stage alone (mapping
// each 100-byte datagen record, then one database transaction per batch
// with the rows and the offsets of 4 partitions, fsync on at the server's
// defaults), from records in memory, no Kafka: PostgreSQL's COPY path
// beside the multi-row INSERT it replaced, and MariaDB's multi-row INSERT.
// The paths are interleaved (rounds of each, order alternating, each into
// a fresh table with a primary key) and the medians reported, so both see
// the same machine. b.N is the records per round; EOS_BENCH_ROUNDS the
// rounds (default 5):
//
//	go test ./sink -run '^$' -bench SinkWritePath -benchtime 200000x
func BenchmarkSinkWritePath(b *testing.B) {
	rounds := 5
	if r, err := strconv.Atoi(os.Getenv("EOS_BENCH_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	for _, batch := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("postgres/batch=%d", batch), func(b *testing.B) {
			writePaths(b, dbtest.Postgres, batch, rounds, []string{"copy", "multi-row-insert"})
		})
		b.Run(fmt.Sprintf("mariadb/batch=%d", batch), func(b *testing.B) {
			writePaths(b, dbtest.MySQL, batch, rounds, []string{"multi-row-insert"})
		})
	}
}

func writePaths(b *testing.B, kind string, batch, rounds int, paths []string) {
	n := b.N
	ts := time.Now()
	recs := make([]*kgo.Record, n)
	offs := make([]int64, 4)
	for i := range n {
		p := int32(i % 4)
		recs[i] = &kgo.Record{Topic: "in", Partition: p, Offset: offs[p], Value: datagen.Value(int64(i), ts, 100), Timestamp: ts}
		offs[p]++
	}
	dsn := dbtest.Fresh(b, kind)
	db := dbtest.Open(b, dsn)
	text := "TEXT"
	if kind == dbtest.MySQL {
		text = "VARCHAR(64)"
	}
	m, err := sink.ParseMapping("bench.yaml", []byte(fmt.Sprintf(eventsMapping, "events")))
	if err != nil {
		b.Fatal(err)
	}
	rates := map[string][]float64{}
	b.ResetTimer()
	for r := range rounds {
		order := slices.Clone(paths)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, path := range order {
			b.StopTimer()
			for _, q := range []string{"DROP TABLE IF EXISTS events", "CREATE TABLE events (seq BIGINT PRIMARY KEY, usr " + text + " NOT NULL, amount DOUBLE PRECISION)", "DROP TABLE IF EXISTS eos_sink_offsets"} {
				if _, err := db.ExecContext(b.Context(), q); err != nil {
					b.Fatal(err)
				}
			}
			cfg := sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m}
			if path == "multi-row-insert" {
				cfg.PostgresWritePath = "insert"
			} else {
				cfg.PostgresWritePath = "copy"
			}
			w, err := sink.NewWriter(b.Context(), cfg, "in", 4)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			for lo := 0; lo < n; lo += batch {
				if err := w.Write(b.Context(), recs[lo:min(lo+batch, n)]); err != nil {
					b.Fatal(err)
				}
			}
			took := time.Since(start)
			b.StopTimer()
			w.Close()
			var rows int64
			if err := db.QueryRowContext(b.Context(), "SELECT COUNT(*) FROM events").Scan(&rows); err != nil || rows != int64(n) {
				b.Fatalf("%s: %d rows (%v), want %d", path, rows, err, n)
			}
			rates[path] = append(rates[path], float64(n)/took.Seconds())
			b.StartTimer()
		}
	}
	b.StopTimer()
	for path, rs := range rates {
		slices.Sort(rs)
		b.ReportMetric(rs[len(rs)/2], path+"-rows/s")
		b.Logf("%s %s batch=%d: rows/s per round %.0f, median %.0f", dbtest.Name(kind), path, batch, rs, rs[len(rs)/2])
	}
}
