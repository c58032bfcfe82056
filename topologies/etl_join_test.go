package topologies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every mistake in a join fails at start with FILE:LINE: KEY: REASON and
// wraps eos.ErrConfig.
func TestBadJoinConfigsGiveFileLineAndReason(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"not a mapping", "join: catalog\n", `1: join: want a mapping of keys to values`},
		{"no table", "join: {key: sku, as: p}\n", `1: join.table: missing: want the table's topic`},
		{"no key", "join: {table: cat, as: p}\n", `1: join.key: missing: want an expression`},
		{"no as", "join: {table: cat, key: sku}\n", `1: join.as: missing: want the name`},
		{"bad missing", "join:\n  table: cat\n  key: sku\n  as: p\n  missing: skip\n", `5: join.missing: want dead-letter (the default: reason join-missing), drop or null, got "skip"`},
		{"bad as", "join: {table: cat, key: sku, as: 'a b'}\n", `1: join.as: want a name for the row's variable`},
		{"meta as", "join: {table: cat, key: sku, as: _key}\n", `1: join.as: _key is a metadata variable`},
		{"key uses row", "join: {table: cat, key: p.sku, as: p}\n", `1: join.key: the key expression uses p, the row it looks up`},
		{"bad table", "join: {table: 'a b', key: sku, as: p}\n", `1: join.table: topic "a b" has the character ' '`},
		{"typo", "join: {table: cat, key: sku, as: p, mising: drop}\n", `1: join.mising: unknown key (did you mean "missing"? known: table, key, as, missing)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, "join.yaml", tc.body)
			_, err := NewETL(p)
			if err == nil {
				t.Fatalf("config %q was accepted", tc.body)
			}
			if !errors.Is(err, eos.ErrConfig) {
				t.Fatalf("error %v does not wrap eos.ErrConfig", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, p+":") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("got  %q\nwant %q", msg, p+":"+tc.want)
			}
		})
	}
}

// catalogRow is the table value of sku k at version v.
func catalogRow(k, v int) []byte {
	return fmt.Appendf(nil, `{"name":"item-%d","price":%d,"v":%d}`, k, 100*k+v, v)
}

// Each event is joined with the row its key had when the event was
// written, through aborted transactions: the table (300 skus, every one
// written twice, every 10th then deleted) is complete before any event, so
// the row current at each event's position is the table's last value of
// its sku, computed here from the writes alone. Events of a sku without a
// row (deleted, or never written) are dead-lettered join-missing; every
// event is in the output or the dead letters exactly once.
func TestJoinGivesEachEventTheRowCurrentAtItsPosition(t *testing.T) {
	e := newTEnv(t)
	const skus, events = 300, 6000
	var table []*kgo.Record
	want := map[string][]byte{} // the reference: the last write of each sku
	for v := 1; v <= 2; v++ {
		for k := range skus {
			table = append(table, &kgo.Record{Key: []byte("sku-" + strconv.Itoa(k)), Value: catalogRow(k, v)})
			want["sku-"+strconv.Itoa(k)] = catalogRow(k, v)
		}
	}
	for k := 0; k < skus; k += 10 {
		table = append(table, &kgo.Record{Key: []byte("sku-" + strconv.Itoa(k))}) // a tombstone
		delete(want, "sku-"+strconv.Itoa(k))
	}
	e.produce("cat", 3, table)
	var in []*kgo.Record
	for i := range events {
		sku := "sku-" + strconv.Itoa(i%(skus+20)) // 20 skus never written
		in = append(in, &kgo.Record{Key: []byte(sku), Value: fmt.Appendf(nil, `{"seq":%d,"sku":%q,"qty":%d}`, i, sku, i%7)})
	}
	cfg := writeConfig(t, "join.yaml", "topology: etl\njoin: {table: cat, key: sku, as: product}\nmap:\n  price: product.price\n  item: product\n")
	tr, err := NewETL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.topic("ev", 3)
	w := e.run("join", "etl", tr, "ev", "ev-out", nil, func(c *pipeline.Config) { e.abortFraction = 0.2; c.MaxTxnRecords = 200 },
		func() { e.produce("ev", 3, in) })
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted; the test needs some")
	}
	seen := joinedEvents(e, "ev-out", want, func(v, item map[string]any) bool {
		return v["price"] == item["price"] && fmt.Sprint(v["item"]) == fmt.Sprint(item)
	})
	dead := e.deadLetters("join-dlq", "etl", "ev")
	for at, reason := range dead {
		if reason != "join-missing" {
			t.Fatalf("dead letter of ev[%s] has reason %q, want join-missing", at, reason)
		}
	}
	for i, r := range in {
		joined, dl := seen[i], dead[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] != ""
		if joined == dl || dl != (want[string(r.Key)] == nil) {
			t.Fatalf("event %d (sku %s): joined %v, dead-lettered %v", i, r.Key, joined, dl)
		}
	}
	s, _ := tr.JoinStats()
	if s.Rows != int64(len(want)) || s.Restored != int64(len(table)) {
		t.Fatalf("join stats %+v: want %d rows from %d table records", s, len(want), len(table))
	}
}

// joinedEvents reads the joined events of topic (each has a seq) and fails
// the test for an event joined twice, one joined although its sku has no
// row in want, or one whose value joinedAs does not accept as joined with
// its sku's row; it returns the seqs it read.
func joinedEvents(e *tenv, topic string, want map[string][]byte, joinedAs func(v, row map[string]any) bool) map[int]bool {
	t := e.t
	t.Helper()
	seen := map[int]bool{}
	for _, r := range e.read(topic) {
		v := decode(t, r.Value)
		seq := int(v["seq"].(float64))
		if seen[seq] {
			t.Fatalf("event %d joined twice", seq)
		}
		seen[seq] = true
		row := want[string(r.Key)]
		if row == nil {
			t.Fatalf("event %d (sku %s, which has no row) was joined: %s", seq, r.Key, r.Value)
		}
		if !joinedAs(v, decode(t, row)) {
			t.Fatalf("event %d (sku %s) joined %s, want the row %s", seq, r.Key, r.Value, row)
		}
	}
	return seen
}

// The table follows the group's assignment: a second worker joins while
// events stream (the first gives up half its partitions, and their table
// partitions, to it) and later leaves (the first takes them back and
// restores their table partitions again). Every event must still be joined
// exactly once with its sku's row, and none dead-lettered: a worker that
// joined a record against a table partition it did not hold would have
// dead-lettered it join-key-partition, or joined it with no row.
func TestJoinFollowsRebalances(t *testing.T) {
	e := newTEnv(t)
	const skus, events = 500, 9000
	var table []*kgo.Record
	for k := range skus {
		table = append(table, &kgo.Record{Key: []byte("sku-" + strconv.Itoa(k)), Value: catalogRow(k, 1)})
	}
	e.produce("cat4", 6, table)
	e.topic("ev4", 6)
	cfg := writeConfig(t, "join.yaml", "topology: etl\njoin: {table: cat4, key: _key, as: row}\nmap:\n  price: row.price\n")
	type worker struct {
		w    *pipeline.Worker
		tr   *ETL
		stop func()
	}
	start := func(instance string) *worker {
		tr, err := NewETL(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pipeline.New(pipeline.Config{App: "join4", Instance: instance, Inputs: []string{"ev4"}, Output: "ev4-out",
			CommitInterval: 20 * time.Millisecond, SessionTimeout: 4 * time.Second, ClientOpts: e.opts}, tr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return &worker{w, tr, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker %s: %v", instance, err)
			}
		}}
	}
	// busy waits until a worker has joined records (and so restored its
	// table partitions) and committed.
	busy := func(x *worker, what string) {
		testenv.Eventually(t, time.Minute, what, func() (bool, string) {
			s, _ := x.tr.JoinStats()
			return s.Lookups > 0 && x.w.Stats().Committed.Load() > 0, fmt.Sprintf("%+v", s)
		})
	}
	var in []*kgo.Record
	for i := range events {
		sku := "sku-" + strconv.Itoa(i%skus)
		in = append(in, &kgo.Record{Key: []byte(sku), Value: fmt.Appendf(nil, `{"seq":%d}`, i)})
	}
	a := start("a")
	e.produce("ev4", 6, in[:events/3])
	busy(a, "worker a joined records")
	b := start("b")
	e.produce("ev4", 6, in[events/3:2*events/3])
	busy(b, "worker b joined records")
	b.stop()
	e.produce("ev4", 6, in[2*events/3:])
	testenv.Eventually(t, 2*time.Minute, "the group caught up", func() (bool, string) {
		ok, err := committed.Check(e.ctx, e.opts, committed.Wait{Group: "join4", Topics: []string{"ev4"}, Outputs: []string{"ev4-out"}})
		return err == nil && ok, fmt.Sprint(err)
	})
	a.stop()
	// a read the partitions it gave b back again: more table records than
	// the table holds.
	if sa, _ := a.tr.JoinStats(); sa.Restored <= skus {
		t.Fatalf("worker a read %d table records, the table's %d once: the partitions never moved", sa.Restored, skus)
	}
	seen := map[int]bool{}
	for _, r := range e.read("ev4-out") {
		v := decode(t, r.Value)
		seq := int(v["seq"].(float64))
		k, _ := strconv.Atoi(strings.TrimPrefix(string(r.Key), "sku-"))
		if seen[seq] || v["price"] != float64(100*k+1) {
			t.Fatalf("event %d: %s (seen before: %v), want price %d", seq, r.Value, seen[seq], 100*k+1)
		}
		seen[seq] = true
	}
	if len(seen) != events {
		t.Fatalf("%d of %d events joined; dead letters: %v", len(seen), events, e.deadLetters("join4-dlq", "", "ev4"))
	}
}

// While events stream, the table changes: before each batch of events the
// writer commits a new version of every sku's row, and each event carries
// the version that was current when it was written. The allowed rows of an
// event are that version and any later one (a poll may fetch it after the
// next update, and an aborted transaction's events are joined again); an
// older one, or none, fails.
func TestJoinSeesTableUpdatesCommittedBeforeEachEvent(t *testing.T) {
	e := newTEnv(t)
	const skus, rounds = 50, 15
	e.topic("cat2", 2)
	e.topic("ev2", 2)
	for k := range skus {
		e.produce("cat2", 2, []*kgo.Record{{Key: []byte("s" + strconv.Itoa(k)), Value: catalogRow(k, 0)}})
	}
	cfg := writeConfig(t, "join.yaml", "topology: etl\njoin: {table: cat2, key: _key, as: row}\nmap:\n  got: row.v\n")
	tr, err := NewETL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	e.run("join2", "etl", tr, "ev2", "ev2-out", nil, func(c *pipeline.Config) { e.abortFraction = 0.2; c.MaxTxnRecords = 40 }, func() {
		for v := range rounds {
			var ups, evs []*kgo.Record
			for k := range skus {
				ups = append(ups, &kgo.Record{Topic: "cat2", Key: []byte("s" + strconv.Itoa(k)), Value: catalogRow(k, v)})
				evs = append(evs, &kgo.Record{Topic: "ev2", Key: []byte("s" + strconv.Itoa(k)), Value: fmt.Appendf(nil, `{"seq":%d,"min":%d}`, n, v)})
				n++
			}
			// ProduceSync returns once the broker has the updates: every
			// event below is written after them.
			if err := e.cl.ProduceSync(e.ctx, ups...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := e.cl.ProduceSync(e.ctx, evs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	seen := map[int]bool{}
	for _, r := range e.read("ev2-out") {
		v := decode(t, r.Value)
		seq, low, got := int(v["seq"].(float64)), v["min"].(float64), v["got"].(float64)
		if seen[seq] {
			t.Fatalf("event %d joined twice", seq)
		}
		seen[seq] = true
		if got < low || got >= rounds {
			t.Fatalf("event %d joined version %v; allowed: %v to %d", seq, got, low, rounds-1)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d of %d events joined", len(seen), n)
	}
}

// A table whose partition count differs from the input's stops the worker
// at start with an error that wraps eos.ErrConfig and names the table and
// the setting that chose it.
func TestJoinRefusesATableNotCoPartitioned(t *testing.T) {
	e := newTEnv(t)
	e.topic("cat3", 2)
	e.topic("ev3", 3)
	cfg := writeConfig(t, "join.yaml", "topology: etl\njoin: {table: cat3, key: _key, as: row}\n")
	tr, err := NewETL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pipeline.New(pipeline.Config{App: "join3", Instance: "0", Inputs: []string{"ev3"}, Output: "ev3-out", ClientOpts: e.opts}, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), "table topic cat3 has 2 partitions and input ev3 has 3") || !strings.Contains(err.Error(), "join.table in "+cfg+":2") {
		t.Fatalf("got %v", err)
	}
}

// A key whose table partition the worker does not hold is refused as a
// dead letter, not answered "no row"; the partition is Kafka's (murmur2)
// as kgo's default partitioner chooses it.
func TestTableRefusesKeysOfPartitionsItDoesNotHold(t *testing.T) {
	tb, err := NewTable("cat", "")
	if err != nil {
		t.Fatal(err)
	}
	tb.nparts = 4
	tb.owned[1] = &tablePart{}
	part := kgo.StickyKeyPartitioner(nil).ForTopic("x")
	for i := range 100 {
		k := "key-" + strconv.Itoa(i)
		p := part.Partition(&kgo.Record{Key: []byte(k)}, 4)
		_, ok, err := tb.Get(k)
		var dl *pipeline.DeadLetterError
		switch {
		case p == 1 && (err != nil || ok):
			t.Fatalf("key %s of the owned partition: %v %v", k, ok, err)
		case p != 1 && (!errors.As(err, &dl) || dl.Reason != "join-key-partition" || !errors.Is(err, ErrKeyPartition)):
			t.Fatalf("key %s of partition %d: got %v", k, p, err)
		}
	}
}

// A table topic that deletes old segments can lose rows that were
// written once; Start says so in a warning naming the topic and its
// policy, and not for a compacted topic or one of infinite retention.
func TestTableWarnsOfATopicThatCanLoseRows(t *testing.T) {
	e := newTEnv(t)
	e.topic("ev6", 2)
	for _, c := range []struct {
		topic   string
		configs map[string]*string
		warn    bool
	}{
		{"cat-delete", map[string]*string{"cleanup.policy": new("delete"), "retention.ms": new("604800000")}, true},
		{"cat-compact", map[string]*string{"cleanup.policy": new("compact")}, false},
		{"cat-compact-delete", map[string]*string{"cleanup.policy": new("compact,delete")}, false},
		{"cat-forever", map[string]*string{"cleanup.policy": new("delete"), "retention.ms": new("-1"), "retention.bytes": new("-1")}, false},
	} {
		t.Run(c.topic, func(t *testing.T) {
			if _, _, err := admin.EnsureTopic(e.ctx, e.cl, c.topic, 2, c.configs); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			tb, err := NewTable(c.topic, "")
			if err != nil {
				t.Fatal(err)
			}
			env := pipeline.StartEnv{ClientOpts: e.opts, Inputs: []string{"ev6"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if err := tb.Start(e.ctx, env); err != nil {
				t.Fatal(err)
			}
			tb.Stop()
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "topic="+c.topic+" ")
			if warned != c.warn || tb.Stats().NotCompacted != c.warn {
				t.Fatalf("want a warning %v, got stats %+v and logs %q", c.warn, tb.Stats(), logs.String())
			}
			if c.warn && !strings.Contains(logs.String(), "cleanup.policy=delete") {
				t.Fatalf("the warning does not name the policy: %q", logs.String())
			}
		})
	}
}
