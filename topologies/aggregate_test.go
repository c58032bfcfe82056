package topologies

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// event is one generated input record for the aggregate tests.
type event struct {
	group  string
	ts     int64
	amount int
	bad    string // a poison value instead of JSON, if set
}

func (ev event) value() []byte {
	if ev.bad != "" {
		return []byte(ev.bad)
	}
	return fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":%d}`, ev.group, ev.ts, ev.amount)
}

// window is one window's expected result.
type window struct {
	count         int
	sum, min, max float64
}

// reference aggregates events the way the topology must, one stream (state
// partition) at a time, in order: stream time, closing at end+grace, late
// records. It returns the final result of every window that closed, by
// "group/start", and the indexes of late records.
func reference(streams [][]int, evs []event, size, advance, grace int64) (map[string]window, map[int]bool) {
	final := map[string]window{}
	late := map[int]bool{}
	for _, stream := range streams {
		open := map[string]*window{}
		ends := map[string]int64{}
		streamTime := int64(math.MinInt64)
		for _, i := range stream {
			ev := evs[i]
			if ev.bad != "" {
				continue
			}
			updated := 0
			for start := floorDiv(ev.ts-size, advance)*advance + advance; start <= ev.ts; start += advance {
				if streamTime != math.MinInt64 && start+size+grace <= streamTime {
					continue
				}
				k := ev.group + "/" + strconv.FormatInt(start, 10)
				w := open[k]
				if w == nil {
					w = &window{min: math.Inf(1), max: math.Inf(-1)}
					open[k], ends[k] = w, start+size
				}
				a := float64(ev.amount)
				w.count, w.sum, w.min, w.max = w.count+1, w.sum+a, min(w.min, a), max(w.max, a)
				updated++
			}
			if updated == 0 {
				late[i] = true
				continue
			}
			streamTime = max(streamTime, ev.ts)
			for k, end := range ends {
				if end+grace <= streamTime {
					final[k] = *open[k]
					delete(open, k)
					delete(ends, k)
				}
			}
		}
	}
	return final, late
}

// results reads the aggregate's output: final results by "group/start",
// each exactly once, and every "updates" result in order by window.
func results(t *testing.T, rs []*kgo.Record) (map[string]window, map[string][]window) {
	t.Helper()
	final := map[string]window{}
	updates := map[string][]window{}
	for _, r := range rs {
		var v struct {
			Key      string
			Start    int64
			End      int64
			Orders   int
			Total    float64
			Smallest float64
			Biggest  float64
			Mean     float64
			Final    bool
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("result %q: %v", r.Value, err)
		}
		if string(r.Key) != v.Key {
			t.Fatalf("result %s has key %q", r.Value, r.Key)
		}
		k := v.Key + "/" + strconv.FormatInt(v.Start, 10)
		w := window{v.Orders, v.Total, v.Smallest, v.Biggest}
		if math.Abs(v.Mean-v.Total/float64(v.Orders)) > 1e-9 {
			t.Fatalf("result %s: mean is not total/orders", r.Value)
		}
		if !v.Final {
			updates[k] = append(updates[k], w)
			continue
		}
		if _, dup := final[k]; dup {
			t.Fatalf("final result of window %s emitted twice", k)
		}
		final[k] = w
	}
	return final, updates
}

const aggConfig = `topology: aggregate
group_by: user
time: ts
window:
  size: %s
  advance: %s
  grace: %s
aggregations:
  orders: count()
  total: sum(amount)
  smallest: min(amount)
  biggest: max(amount)
  mean: avg(amount)
emit: %s
repartition: %v
`

// genEvents makes n events over groups, 10ms of event time apart, with
// out-of-order records within the grace period, late records far behind
// stream time, and poison pills.
func genEvents(n, groups int, seed uint64) []event {
	rng := rand.New(rand.NewPCG(seed, seed))
	base := int64(1_700_000_000_000)
	var evs []event
	for i := range n {
		ev := event{group: "user-" + strconv.Itoa(rng.IntN(groups)), ts: base + int64(i)*10, amount: rng.IntN(1000) - 100}
		switch {
		case i%101 == 50:
			ev.ts -= 200 // out of order, within grace
		case i%211 == 7:
			ev.ts -= 60_000 // late
		case i%307 == 3:
			ev.bad = []string{`{"user":"x","ts":`, `{"user":"x"}`, `{"user":"x","ts":1,"amount":"many"}`}[i%3]
		}
		evs = append(evs, ev)
	}
	// Move stream time past every window, so that every final result is
	// emitted.
	for g := range groups {
		evs = append(evs, event{group: "user-" + strconv.Itoa(g), ts: base + int64(n)*10 + 3_600_000, amount: 0})
	}
	return evs
}

// oneStream is the order the reference processes n records read from one
// input partition: all of them, in input order.
func oneStream(n int) [][]int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return [][]int{all}
}

func runAggregate(t *testing.T, e *tenv, app string, evs []event, parts int32, keyByGroup bool, size, advance, grace, emit string, repartition bool, extra ...string) ([]*kgo.Record, *pipeline.Worker) {
	t.Helper()
	cfg := writeConfig(t, app+".yaml", fmt.Sprintf(aggConfig, size, advance, grace, emit, repartition)+strings.Join(extra, ""))
	var tr pipeline.Transform
	var err error
	if e.wire != nil {
		tr, err = topologyFor("aggregate").New(Options{Config: cfg, SchemaRegistry: e.registry})
	} else {
		tr, err = NewAggregate(cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	rs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		k := strconv.Itoa(i)
		if keyByGroup {
			k = ev.group
		}
		rs[i] = &kgo.Record{Key: []byte(k), Value: ev.value()}
		if e.wire != nil && ev.bad == "" {
			rs[i].Value = e.wire.encode(t, map[string]any{"user": ev.group, "ts": ev.ts, "amount": int64(ev.amount)})
		}
	}
	var topics []string
	if repartition {
		topics = []string{app + "-windows-repartition"}
	}
	e.topic(app+"-in", parts)
	w := e.run(app, "aggregate", tr, app+"-in", app+"-out", topics, aborting(e, 0.2),
		func() { e.produce(app+"-in", parts, rs) })
	return rs, w
}

func checkAggregate(t *testing.T, e *tenv, app string, evs []event, rs []*kgo.Record, streams [][]int, size, advance, grace int64) map[string][]window {
	t.Helper()
	want, late := reference(streams, evs, size, advance, grace)
	got, updates := results(t, e.read(app+"-out"))
	for k := range got {
		if w, ok := want[k]; !ok || !reflect.DeepEqual(got[k], w) {
			t.Fatalf("window %s: got %+v, want %+v (in the reference: %v)", k, got[k], w, ok)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d final results, the reference has %d", len(got), len(want))
	}
	wantDL := map[string]string{}
	for i, ev := range evs {
		switch ev.bad {
		case "":
		default:
			if e.wire != nil { // JSON is not the wire format
				wantDL[at(rs[i])] = "wire-format"
				continue
			}
		}
		switch ev.bad {
		case `{"user":"x","ts":1,"amount":"many"}`:
			wantDL[at(rs[i])] = "expression-error"
		case `{"user":"x"}`:
			wantDL[at(rs[i])] = "missing-field"
		case "":
			if late[i] {
				wantDL[at(rs[i])] = "late-record"
			}
		default:
			wantDL[at(rs[i])] = "malformed-json"
		}
	}
	if dl := e.deadLetters(app+"-dlq", "aggregate", app+"-in"); !reflect.DeepEqual(dl, wantDL) {
		t.Fatalf("dead letters (by source partition/offset):\n got  %v\n want %v", dl, wantDL)
	}
	t.Logf("%d records, %d windows, %d late, %d poison", len(evs), len(want), len(late), len(wantDL)-len(late))
	return updates
}

// Tumbling windows, re-keyed through the repartition topic: every window's
// final result, read with read_committed through aborted transactions,
// equals the reference exactly, once; late records and poison pills are in
// the dead-letter topic once each, naming their original input record (not
// the repartition topic's).
func TestAggregateTumblingThroughRepartitionMatchesReference(t *testing.T) {
	e := newTEnv(t)
	evs := genEvents(12_000, 25, 1)
	// One input partition: the repartition topic gets the records in
	// input order, so stream time, and lateness, are what the reference
	// computes.
	rs, w := runAggregate(t, e, "tum", evs, 1, false, "1s", "1s", "500ms", "final", true)
	checkAggregate(t, e, "tum", evs, rs, oneStream(len(evs)), 1000, 1000, 500)
	t.Logf("%d commits, %d aborts, %d dead letters", w.Stats().Committed.Load(), w.Stats().Aborted.Load(), w.Stats().DeadLetters.Load())
}

// Hopping windows over an input already keyed by group (repartition:
// false, state on the input's own 3 partitions), emitting every update: the
// final results equal the reference, and each window's updates are
// 1, 2, ..., n records, the last one equal to the final result.
func TestAggregateHoppingWithUpdatesMatchesReference(t *testing.T) {
	e := newTEnv(t)
	evs := genEvents(8_000, 12, 2)
	rs, _ := runAggregate(t, e, "hop", evs, 3, true, "2s", "500ms", "300ms", "updates", false)
	streams := make([][]int, 3)
	for i, r := range rs {
		streams[r.Partition] = append(streams[r.Partition], i)
	}
	updates := checkAggregate(t, e, "hop", evs, rs, streams, 2000, 500, 300)
	checkUpdates(t, e, "hop", updates)
}

// With emit: updates through the repartition topic, stage one combines
// nothing: every record still makes its own update of every window.
func TestAggregateUpdatesThroughRepartitionAreRecordByRecord(t *testing.T) {
	e := newTEnv(t)
	evs := genEvents(6_000, 10, 4)
	rs, _ := runAggregate(t, e, "upd", evs, 1, false, "2s", "1s", "300ms", "updates", true)
	checkUpdates(t, e, "upd", checkAggregate(t, e, "upd", evs, rs, oneStream(len(evs)), 2000, 1000, 300))
}

// checkUpdates checks that each window's updates are 1, 2, ..., n records,
// the last one equal to the window's final result.
func checkUpdates(t *testing.T, e *tenv, app string, updates map[string][]window) {
	t.Helper()
	final, _ := results(t, e.read(app+"-out"))
	for k, us := range updates {
		for i, u := range us {
			if u.count != i+1 {
				t.Fatalf("window %s: update %d has %d records, want %d", k, i, u.count, i+1)
			}
		}
		if f, ok := final[k]; ok && !reflect.DeepEqual(us[len(us)-1], f) {
			t.Fatalf("window %s: last update %+v differs from the final result %+v", k, us[len(us)-1], f)
		}
	}
	if len(updates) < len(final) {
		t.Fatalf("%d windows with updates, %d final", len(updates), len(final))
	}
}
