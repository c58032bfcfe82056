package topologies

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The etl join processed on several goroutines (a backlog large enough
// for the worker to fork the etl, 40% of the transactions aborted and
// processed again) still joins each event exactly once with its sku's
// row, and dead-letters exactly the events of skus without one. Run under
// -race, a fork sharing the etl's scratch or the table reader's would
// fail it too.
func TestForkedJoinGivesEachEventItsRowExactlyOnce(t *testing.T) {
	e := newTEnv(t)
	const skus, events = 500, 40000
	var table []*kgo.Record
	want := map[string][]byte{}
	for k := range skus {
		if k%10 == 0 {
			continue // no row
		}
		key := "sku-" + strconv.Itoa(k)
		table = append(table, &kgo.Record{Key: []byte(key), Value: catalogRow(k, 1)})
		want[key] = catalogRow(k, 1)
	}
	e.produce("cat", 3, table)
	var in []*kgo.Record
	for i := range events {
		sku := "sku-" + strconv.Itoa(i%skus)
		in = append(in, &kgo.Record{Key: []byte(sku), Value: fmt.Appendf(nil, `{"seq":%d,"sku":%q}`, i, sku)})
	}
	e.produce("ev", 3, in) // a backlog: polls of thousands of records
	cfg := writeConfig(t, "join.yaml", "topology: etl\njoin: {table: cat, key: _key, as: product}\nmap:\n  price: product.price\n  name: product.name\n")
	tr, err := NewETL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := e.run("forked", "etl", tr, "ev", "ev-out", nil, func(c *pipeline.Config) { e.abortFraction = 0.4; c.Parallelism = 3; c.MaxTxnRecords = 4000 }, nil)
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted; the test needs some")
	}
	if n := len(tr.join.table.readers); n < 2 {
		t.Fatalf("the table has %d reader(s): the etl was never forked, so this test proves nothing", n)
	}
	seen := joinedEvents(e, "ev-out", want, func(v, item map[string]any) bool {
		return v["price"] == item["price"] && v["name"] == item["name"]
	})
	dead := e.deadLetters("forked-dlq", "etl", "ev")
	for i, r := range in {
		joined, dl := seen[i], dead[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] != ""
		if joined == dl || dl != (want[string(r.Key)] == nil) {
			t.Fatalf("event %d (sku %s): joined %v, dead-lettered %v", i, r.Key, joined, dl)
		}
	}
	s, _ := tr.JoinStats()
	if s.Lookups < events || s.Misses < events/10 {
		t.Fatalf("join stats %+v: want at least %d lookups (every event, and again after aborts), %d misses", s, events, events/10)
	}
}

// A fork shares what Process only reads (the join's table, the dropped
// count the stats report) and owns everything Process writes: its
// expressions (each holds the machine it runs on), environment, scratch
// and output buffers, and a table reader of its own.
func TestETLForkSharesOnlyWhatProcessReads(t *testing.T) {
	cfg := writeConfig(t, "join.yaml", "topology: etl\njoin: {table: cat, key: sku, as: product}\nfilter: qty > 0\nmap:\n  price: product.price\nkey: sku\n")
	tr, err := NewETL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := tr.Fork().(*ETL)
	if !ok || f == tr {
		t.Fatalf("Fork gave %T %p, want a new *ETL", f, f)
	}
	if f.join.table != tr.join.table || f.join.dropped != tr.join.dropped {
		t.Error("the fork does not share the join's table and dropped count")
	}
	for what, same := range map[string]bool{
		"table reader": f.join.rd == tr.join.rd, "environment": f.env == tr.env,
		"filter": f.filter == tr.filter, "key": f.key == tr.key, "join key": f.join.key == tr.join.key,
		"map field": f.fields[0].e == tr.fields[0].e,
	} {
		if same {
			t.Errorf("the fork shares the %s, which Process writes", what)
		}
	}
	if len(tr.join.table.readers) != 2 {
		t.Errorf("the table has %d readers, want 2 (the etl's and the fork's)", len(tr.join.table.readers))
	}
}
