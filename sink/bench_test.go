package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkSinkRows measures rows per second from a topic of 100-byte
// records into a table with a primary key, through the whole sink (Kafka
// fetches, mapping, the database transaction with the offsets), at batch
// sizes 1, 100 and 1000 (PostgreSQL by COPY), PostgreSQL's multi-row INSERT
// at 1000 and 5000 beside COPY, against the naive sink (one autocommitted INSERT
// per row, offsets in Kafka). b.N is the number of records: run it with a
// fixed count, e.g.
//
//	go test ./sink -run '^$' -bench SinkRows -benchtime 20000x
func BenchmarkSinkRows(b *testing.B) {
	for _, kind := range dbtest.Kinds {
		for _, batch := range []int{1, 100, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", dbtest.Name(kind), batch), func(b *testing.B) {
				benchSink(b, kind, batch, false)
			})
		}
		b.Run(dbtest.Name(kind)+"/naive", func(b *testing.B) { benchSink(b, kind, 500, true) })
	}
	// PostgreSQL's write path before COPY, for comparison (see also
	// BenchmarkSinkWritePath, which interleaves the two).
	for _, batch := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("postgres/batch=%d/multi-row-insert", batch), func(b *testing.B) {
			benchSinkWith(b, dbtest.Postgres, batch, false, func(c *sink.Config) { c.PostgresWritePath = "insert" })
		})
		b.Run(fmt.Sprintf("postgres/batch=%d/copy", batch), func(b *testing.B) {
			benchSinkWith(b, dbtest.Postgres, batch, false, func(c *sink.Config) { c.PostgresWritePath = "copy" })
		})
	}
}

func benchSink(b *testing.B, kind string, batch int, naive bool) {
	benchSinkWith(b, kind, batch, naive, nil)
}

func benchSinkWith(b *testing.B, kind string, batch int, naive bool, tune func(*sink.Config)) {
	bk, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bk.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	n := int64(b.N)
	if _, err := datagen.Produce(b.Context(), cl, datagen.Config{Topic: "in", Count: n, Size: 100, Partitions: 4}); err != nil {
		b.Fatal(err)
	}
	dsn := dbtest.Fresh(b, kind)
	db := dbtest.Open(b, dsn)
	text := "TEXT"
	if kind == dbtest.MySQL {
		text = "VARCHAR(64)"
	}
	if _, err := db.ExecContext(b.Context(), "CREATE TABLE events (seq BIGINT PRIMARY KEY, usr "+text+" NOT NULL, amount DOUBLE PRECISION)"); err != nil {
		b.Fatal(err)
	}
	m, err := sink.ParseMapping("bench.yaml", []byte(fmt.Sprintf(eventsMapping, "events")))
	if err != nil {
		b.Fatal(err)
	}
	cfg := sink.Config{DSN: dsn, Group: "g", Topics: []string{"in"}, Mapping: m, ClientOpts: []kgo.Opt{kgo.SeedBrokers(bk.Addrs()...)}, BatchSize: batch, SessionTimeout: 3 * time.Second}
	if tune != nil {
		tune(&cfg)
	}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	if naive {
		go func() { done <- sink.RunNaive(ctx, cfg) }()
	} else {
		s, err := sink.New(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		go func() { done <- s.Run(ctx) }()
	}
	// Done when the rows are all there: the sink's stored offsets say so
	// cheaply; the naive sink's Kafka commits lag its rows, so for it the
	// table is counted (less often: a COUNT is not free).
	poll := 20 * time.Millisecond
	if naive {
		poll = 200 * time.Millisecond
	}
	for {
		var rows int64
		if naive {
			if err := db.QueryRowContext(b.Context(), "SELECT COUNT(*) FROM events").Scan(&rows); err != nil {
				b.Fatal(err)
			}
		} else {
			stored, err := sink.StoredOffsets(b.Context(), db, "eos_sink_offsets", "g")
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range stored["in"] {
				rows += o
			}
		}
		if rows >= n {
			break
		}
		select {
		case err := <-done:
			b.Fatalf("sink stopped at %d of %d rows: %v", rows, n, err)
		case <-time.After(poll):
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-done
	b.ReportMetric(float64(n)/elapsed.Seconds(), "rows/s")
}
