package sink_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka is one test's embedded broker and client.
type kafka struct {
	b  *broker.Broker
	cl *kgo.Client
}

func newKafka(t *testing.T) *kafka {
	t.Helper()
	b, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); b.Close() })
	return &kafka{b, cl}
}

func (k *kafka) opts() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(k.b.Addrs()...)} }

// produce writes n datagen records to topic; record i has "seq": i.
func (k *kafka) produce(t *testing.T, topic string, n int64, partitions int32) {
	t.Helper()
	if _, err := datagen.Produce(t.Context(), k.cl, datagen.Config{Topic: topic, Count: n, Size: 100, Partitions: partitions}); err != nil {
		t.Fatal(err)
	}
}

// endOffsets sums topic's end offsets per partition.
func (k *kafka) endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	ends, err := kadm.NewClient(k.cl).ListEndOffsets(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// eventsTable creates the table datagen records map to, with seq as its
// primary key when unique is set (and no unique constraint otherwise, so
// that a duplicate shows up as a second row).
func eventsTable(t *testing.T, db *sink.DB, table string, unique bool) {
	t.Helper()
	text := "TEXT"
	if db.Dialect() == "mysql" {
		text = "VARCHAR(64)"
	}
	key := "BIGINT NOT NULL"
	if unique {
		key = "BIGINT PRIMARY KEY"
	}
	exec(t, db, fmt.Sprintf("CREATE TABLE %s (seq %s, usr %s NOT NULL, amount DOUBLE PRECISION, status %s)", table, key, text, text))
}

func exec(t *testing.T, db *sink.DB, q string, args ...any) sql.Result {
	t.Helper()
	res, err := db.ExecContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return res
}

func count(t *testing.T, db *sink.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// requireEachKeyOnce is the verdict of every exactly-once check: seq 0 to
// n-1 each appear exactly once in table, and nothing else does.
func requireEachKeyOnce(t *testing.T, db *sink.DB, table string, n int64) {
	t.Helper()
	dups := count(t, db, fmt.Sprintf("SELECT COUNT(*) FROM (SELECT seq FROM %s GROUP BY seq HAVING COUNT(*) > 1) d", table))
	rows := count(t, db, "SELECT COUNT(*) FROM "+table)
	distinct := count(t, db, fmt.Sprintf("SELECT COUNT(DISTINCT seq) FROM %s WHERE seq >= 0 AND seq < %d", table, n))
	if dups != 0 || rows != n || distinct != n {
		t.Fatalf("%s: %d keys with more than one row, %d rows, %d distinct keys in [0,%d): want 0, %d, %d", table, dups, rows, distinct, n, n, n)
	}
}

// requireOffsetsAtEnd checks the offsets the sink stored equal the topic's
// end offsets.
func requireOffsetsAtEnd(t *testing.T, k *kafka, db *sink.DB, group, topic string) {
	t.Helper()
	stored, err := sink.StoredOffsets(t.Context(), db, "eos_sink_offsets", group)
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range k.endOffsets(t, topic) {
		if got := stored[topic][p]; got != end {
			t.Fatalf("stored offset of %s[%d] = %d, want the end offset %d (all stored: %v)", topic, p, got, end, stored[topic])
		}
	}
}

// waitStored waits until group's stored offsets of topic sum to n.
func waitStored(t *testing.T, db *sink.DB, group, topic string, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var sum int64
	for time.Now().Before(deadline) {
		stored, err := sink.StoredOffsets(t.Context(), db, "eos_sink_offsets", group)
		if err == nil {
			sum = 0
			for _, o := range stored[topic] {
				sum += o
			}
			if sum >= n {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("group %s stored offsets summing to %d of %d within %s", group, sum, n, within)
}

const eventsMapping = `table: %s
key_column: seq
key: seq
columns:
  usr: user
  amount: amount
`

func mapping(t *testing.T, yaml string, args ...any) *sink.Mapping {
	t.Helper()
	m, err := sink.ParseMapping("test.yaml", []byte(fmt.Sprintf(yaml, args...)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runSink runs a sink with cfg in the background; stop cancels it and
// returns Run's error.
func runSink(t *testing.T, cfg sink.Config) (stop func() error) {
	t.Helper()
	if cfg.Logger == nil && testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 3 * time.Second
	}
	s, err := sink.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		err := <-done
		s.Close()
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func itoa(i int) string { return strconv.Itoa(i) }

// produceValues writes values to topic (one partition), in order.
func produceValues(t *testing.T, k *kafka, topic string, values []string) {
	t.Helper()
	if _, err := kadm.NewClient(k.cl).CreateTopic(t.Context(), 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for i, v := range values {
		r := &kgo.Record{Topic: topic, Key: []byte(itoa(i)), Value: []byte(v)}
		if err := k.cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// readAll reads n records of topic from the start.
func readAll(t *testing.T, k *kafka, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append(k.opts(), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		out = append(out, f.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// setup gives a test of kind a broker, a fresh database and in it table,
// keyed by seq (see eventsTable).
func setup(t *testing.T, kind, table string) (*kafka, string, *sink.DB) {
	t.Helper()
	k := newKafka(t)
	dsn := dbtest.Fresh(t, kind)
	db := dbtest.Open(t, dsn)
	eventsTable(t, db, table, true)
	return k, dsn, db
}
