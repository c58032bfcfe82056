package topologies

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every mistake in a dedup configuration fails at start with
// FILE:LINE: KEY: REASON and wraps eos.ErrConfig.
func TestBadDedupConfigsGiveFileLineAndReason(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"missing key", "retention: 1h\n", `1: key: missing: want the event id`},
		{"missing retention", "key: event_id\n", `1: retention: missing: want how long a key is held`},
		{"bad retention", "key: event_id\nretention: a day\n", `2: retention: want a positive duration such as 500ms, 1m or 1h30m, got "a day"`},
		{"zero retention", "key: event_id\nretention: 0s\n", `2: retention: want a positive duration`},
		{"sub-ms retention", "key: event_id\nretention: 10us\n", `2: retention: want at least 1ms`},
		{"key not compiling", "key: event_id +\nretention: 1h\n", `1: key: expression "event_id +" does not compile`},
		{"key unknown function", "key: lowr(event_id)\nretention: 1h\n", `1: key: expression "lowr(event_id)" calls unknown function lowr()`},
		{"header typo", "retention: 1h\nkey:\n  headr: x\n", `3: key.headr: unknown key (did you mean "header"? known: header)`},
		{"empty header", "retention: 1h\nkey: {header: ''}\n", `2: key.header: want a header name`},
		{"bad clock", "key: id\nretention: 1h\nclock: wall\n", `3: clock: want event (the record's event time: time, or its timestamp) or processing (the worker's clock), got "wall"`},
		{"time with processing clock", "key: id\nretention: 1h\nclock: processing\ntime: ts\n", `4: time: time reads event time, but clock is processing (line 3): drop one`},
		{"bad repeats", "key: id\nretention: 1h\nrepeats: keep\n", `3: repeats: want drop, or {audit: TOPIC} to send every repeat to TOPIC, got "keep"`},
		{"repeats typo", "key: id\nretention: 1h\nrepeats:\n  audti: x\n", `4: repeats.audti: unknown key (did you mean "audit"? known: audit)`},
		{"bad audit topic", "key: id\nretention: 1h\nrepeats:\n  audit: 'a topic'\n", `4: repeats.audit: topic "a topic" has the character ' ' at byte 1`},
		{"bad repartition", "key: id\nretention: 1h\nrepartition: maybe\n", `3: repartition: want true or false, got "maybe"`},
		{"unknown key", "key: id\nretention: 1h\nretension: 2h\n", `3: retension: unknown key (did you mean "retention"?`},
		{"etl key in dedup", "key: id\nretention: 1h\nfilter: x > 1\n", `3: filter: unknown key (a key of the etl topology: is this file for etl?`},
		{"dedup key in etl", "", ""}, // checked below
		{"wrong topology", "topology: etl\nkey: id\n", `1: topology: this file configures the etl topology, not dedup`},
	} {
		if tc.body == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) { requireConfigError(t, "dedup", tc.body, tc.want) })
	}
	p := writeConfig(t, "etl.yaml", "filter: x > 1\nretention: 1h\n")
	if _, err := NewETL(p); err == nil || !strings.Contains(err.Error(), "2: retention: unknown key (a key of the dedup topology: is this file for dedup?") {
		t.Fatalf("dedup key in an etl file: %v", err)
	}
}

// dedupEvent is one generated input record of the dedup tests.
type dedupEvent struct {
	id  string // event id; "" for a record without one
	ts  int64  // event time, ms
	bad string // a poison value instead of JSON, if set
}

func (ev dedupEvent) value(i int) []byte {
	if ev.bad != "" {
		return []byte(ev.bad)
	}
	if ev.id == "" {
		return fmt.Appendf(nil, `{"seq":%d,"ts":%d}`, i, ev.ts)
	}
	return fmt.Appendf(nil, `{"event_id":%q,"seq":%d,"ts":%d}`, ev.id, i, ev.ts)
}

// genDedup makes distinct event ids, each sent 1 to 4 times at random
// places in the input (so the repeats of one id fall in other transactions
// of the input and of the worker), with records lacking an event id and
// poison pills among them. Event times rise 1ms per record.
func genDedup(distinct int, seed uint64) []dedupEvent {
	rng := rand.New(rand.NewPCG(seed, seed))
	var evs []dedupEvent
	for i := range distinct {
		for range 1 + rng.IntN(4) {
			evs = append(evs, dedupEvent{id: "ev-" + strconv.Itoa(i)})
		}
	}
	for i := range distinct / 50 {
		evs = append(evs, dedupEvent{}, dedupEvent{bad: []string{`{"event_id":`, `[1,2]`}[i%2]})
	}
	rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	for i := range evs {
		evs[i].ts = 1_700_000_000_000 + int64(i)
	}
	return evs
}

// dedupReference judges the input as the topology must, independently of
// it: per partition, in offset order, a key passes if it is not held; a
// passed key is held until the partition's clock (the largest event time
// so far) reaches its passing time plus retention. It returns the indexes
// of the records that pass and of the repeats.
func dedupReference(evs []dedupEvent, rs []*kgo.Record, retention int64) (pass, repeat map[int]bool) {
	pass, repeat = map[int]bool{}, map[int]bool{}
	byPart := map[int32][]int{}
	for i := range rs {
		byPart[rs[i].Partition] = append(byPart[rs[i].Partition], i)
	}
	for _, idx := range byPart {
		// rs are produced in order: per partition, index order is offset order.
		heldUntil := map[string]int64{}
		clock := int64(-1 << 63)
		for _, i := range idx {
			ev := evs[i]
			if ev.bad != "" || ev.id == "" {
				continue
			}
			clock = max(clock, ev.ts)
			if until, ok := heldUntil[ev.id]; ok && clock < until {
				repeat[i] = true
				continue
			}
			heldUntil[ev.id] = clock + retention
			pass[i] = true
		}
	}
	return pass, repeat
}

// checkDedup reads the output, the audit topic and the dead letters with
// read_committed and compares them with the reference: every record that
// passes exactly once and nothing else in the output, every repeat exactly
// once in the audit topic, every record without a usable key dead-lettered
// once with its reason.
func checkDedup(t *testing.T, e *tenv, app string, evs []dedupEvent, rs []*kgo.Record, retention int64, repartition bool) {
	once := retention >= 24*time.Hour.Milliseconds() // longer than the input: each id passes once
	t.Helper()
	pass, repeat := dedupReference(evs, rs, retention)
	if repartition {
		// State lives per partition of the repartition topic, keyed by
		// event id; the order in which the records of one id from several
		// input partitions reach it is not the input's. With a retention
		// longer than the input, exactly one record of each id passes,
		// whichever it is, and the others are repeats.
		first := map[string]int{}
		for i, ev := range evs {
			if ev.bad == "" && ev.id != "" {
				if _, ok := first[ev.id]; !ok {
					first[ev.id] = i
				}
			}
		}
		passed := map[string]int{}
		for _, r := range e.read(app + "-out") {
			m := decode(t, r.Value)
			passed[m["event_id"].(string)] = int(m["seq"].(float64))
		}
		pass, repeat = map[int]bool{}, map[int]bool{}
		for i, ev := range evs {
			if ev.bad != "" || ev.id == "" {
				continue
			}
			seq, ok := passed[ev.id]
			if !ok {
				seq = first[ev.id] // missing: bySeq reports it
			}
			if seq == i {
				pass[i] = true
			} else {
				repeat[i] = true
			}
		}
	}
	bySeq := func(topic string, want map[int]bool, what string) {
		t.Helper()
		got := map[int]int{}
		ids := map[string]int{}
		for _, r := range e.read(topic) {
			m := decode(t, r.Value)
			seq := int(m["seq"].(float64))
			got[seq]++
			ids[m["event_id"].(string)]++
			if string(r.Key) != string(rs[seq].Key) {
				t.Fatalf("%s: record %d has key %q, its input had %q", topic, seq, r.Key, rs[seq].Key)
			}
			if h := headers(r); h[origKeyHeader] != "" || h[pipeline.IdempotencyKeyHeader] == "" {
				t.Fatalf("%s: record %d has headers %v", topic, seq, h)
			}
		}
		for seq, n := range got {
			if n != 1 || !want[seq] {
				t.Fatalf("%s: input record %d (event %s) is there %d times; the reference says it %s: %v", topic, seq, evs[seq].id, n, what, want[seq])
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, the reference has %d", topic, len(got), len(want))
		}
		if what == "passes" {
			for id, n := range ids {
				if n != 1 && once {
					t.Fatalf("event %s passed %d times", id, n)
				}
			}
		}
	}
	bySeq(app+"-out", pass, "passes")
	bySeq(app+"-repeats", repeat, "is a repeat")
	wantDL := map[string]string{}
	for i, ev := range evs {
		switch {
		case ev.bad != "":
			wantDL[at(rs[i])] = "malformed-json"
		case ev.id == "":
			wantDL[at(rs[i])] = "missing-field"
		}
	}
	gotDL := e.deadLetters(app+"-dlq", "dedup", app+"-in")
	if len(gotDL) != len(wantDL) {
		t.Fatalf("%d dead letters, want %d", len(gotDL), len(wantDL))
	}
	for k, reason := range wantDL {
		if gotDL[k] != reason {
			t.Fatalf("dead letter of %s: %q, want %q", k, gotDL[k], reason)
		}
	}
}

const dedupConfig = `topology: dedup
key: event_id
retention: %s
time: ts
repeats:
  audit: %s-repeats
repartition: %v
`

// runDedup produces evs (keyed by event id, or by sequence number when
// repartition is set) while a worker of the dedup topology runs, with a
// fifth of its transactions (of at most 100 records) aborted on purpose, and returns the input
// records with their partitions and offsets.
func runDedup(t *testing.T, e *tenv, app string, evs []dedupEvent, retention string, repartition bool) []*kgo.Record {
	t.Helper()
	rs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		k := ev.id
		if repartition || k == "" {
			k = strconv.Itoa(i)
		}
		rs[i] = &kgo.Record{Key: []byte(k), Value: ev.value(i), Timestamp: time.UnixMilli(ev.ts)}
	}
	e.topic(app+"-in", 3)
	runDedupWorker(t, e, app, retention, repartition, func() { e.produce(app+"-in", 3, rs) })
	return rs
}

func runDedupWorker(t *testing.T, e *tenv, app, retention string, repartition bool, feed func()) *Dedup {
	t.Helper()
	tr, err := NewDedup(writeConfig(t, app+".yaml", fmt.Sprintf(dedupConfig, retention, app, repartition)))
	if err != nil {
		t.Fatal(err)
	}
	var topics []string
	if repartition {
		topics = []string{app + "-seen-repartition"}
	}
	w := e.run(app, "dedup", tr, app+"-in", app+"-out", topics, func(c *pipeline.Config) {
		aborting(e, 0.2)
		c.OnEvent = tr.OnEvent
		c.MaxTxnRecords = 100 // many transactions, so many aborted ones
	}, feed)
	t.Logf("worker: %d committed, %d aborted", w.Stats().Committed.Load(), w.Stats().Aborted.Load())
	return tr
}

// Records with one event id keyed by it, so in one partition, repeated up
// to four times across the input's transactions, through a worker that
// aborts a fifth of its transactions and is then stopped and started
// again (its seen keys restored from the changelog) for a second input
// that repeats every id of the first: every id passes exactly once, every
// repeat is in the audit topic exactly once, every record without an id
// is dead-lettered once, read with read_committed.
func TestDedupPassesEveryEventIDOnceThroughAbortsAndRestarts(t *testing.T) {
	e := newTEnv(t)
	const app = "dd"
	evs := genDedup(1500, 11)
	rs := runDedup(t, e, app, evs, "24h", false)
	// Again: every id of the first input once more, after a restart.
	var more []*kgo.Record
	n := len(evs)
	for i := range 1500 {
		ev := dedupEvent{id: "ev-" + strconv.Itoa(i), ts: 1_700_000_000_000 + int64(n)}
		evs = append(evs, ev)
		more = append(more, &kgo.Record{Key: []byte(ev.id), Value: ev.value(n), Timestamp: time.UnixMilli(ev.ts)})
		n++
	}
	tr := runDedupWorker(t, e, app, "24h", false, func() { e.produce(app+"-in", 3, more) })
	rs = append(rs, more...)
	checkDedup(t, e, app, evs, rs, (24 * time.Hour).Milliseconds(), false)
	st := tr.Stats()
	if st.Passed != 0 || st.Repeats != 1500 || st.KeysHeld != 1500 {
		t.Fatalf("second worker's stats %+v, want 0 passed, 1500 repeats, 1500 keys held", st)
	}
}

// The same with the input keyed by sequence number, so the repeats of an id
// are spread over every partition: repartition: true brings them together,
// and each id passes once, with its original Kafka key.
func TestDedupWithRepartitionPassesEveryEventIDOnceAcrossPartitions(t *testing.T) {
	e := newTEnv(t)
	const app = "ddr"
	evs := genDedup(1000, 12)
	rs := runDedup(t, e, app, evs, "24h", true)
	checkDedup(t, e, app, evs, rs, (24 * time.Hour).Milliseconds(), true)
}

// With a retention shorter than the input's span of event time, a key is
// forgotten once its partition's clock passes its retention, and passes
// again: the output equals the reference's, and the changelog holds a
// tombstone for each forgotten key, so compaction shrinks it.
func TestDedupForgetsKeysAfterRetentionWithTombstones(t *testing.T) {
	e := newTEnv(t)
	const app = "ddx"
	var evs []dedupEvent
	// Each id twice in a row (10ms apart: a repeat), and again 4s of event
	// time later (past the retention: it passes again).
	for i := range 3000 {
		evs = append(evs, dedupEvent{id: "ev-" + strconv.Itoa((i/2)%200), ts: 1_700_000_000_000 + int64(i)*10})
	}
	const retention = 1500 // ms
	rs := runDedup(t, e, app, evs, "1500ms", false)
	checkDedup(t, e, app, evs, rs, retention, false)
	pass, _ := dedupReference(evs, rs, retention)
	if len(pass) != 1500 {
		t.Fatalf("the reference passes %d records, want 1500: the test does not test expiry", len(pass))
	}
	// The changelog as compaction leaves it: the last record of each key
	// (batches of ids, and each partition's clock).
	type pk struct {
		p int32
		k string
	}
	last := map[pk][]byte{}
	for _, r := range e.read(app + "-seen-changelog") {
		last[pk{r.Partition, string(r.Key)}] = r.Value
	}
	final := map[int32]int64{} // each partition's clock, from the changelog
	for k, v := range last {
		if k.k == clockKey {
			final[k.p] = int64(binary.BigEndian.Uint64(v))
		}
	}
	// Held: the ids of live batches whose entry has not expired by its
	// partition's clock. Every live batch must hold one such id (a batch
	// whose ids all expired gets a tombstone).
	held := map[string]bool{}
	live, dead := 0, 0
	for k, v := range last {
		switch {
		case k.k == clockKey:
		case v == nil:
			dead++
		default:
			live++
			tab := newKeyTable(maphash.MakeSeed())
			b, ok, err := tab.load(k.k, v)
			if !ok || err != nil {
				t.Fatalf("changelog record %q of partition %d is not a batch of ids: %v", k.k, k.p, err)
			}
			some := false
			bt := &tab.batches[b]
			for off := batchHeader; off < len(bt.data); {
				id, exp, next := bt.entry(off)
				if exp > final[k.p] {
					held[string(id)], some = true, true
				}
				off = next
			}
			if !some {
				t.Fatalf("changelog batch %q of partition %d is live with every id expired by the clock %d", k.k, k.p, final[k.p])
			}
		}
	}
	// Live: the ids whose last pass is within the retention of their
	// partition's last clock.
	clock, lastPass := map[int32]int64{}, map[string]int{}
	for i, r := range rs {
		clock[r.Partition] = max(clock[r.Partition], evs[i].ts)
		if pass[i] {
			lastPass[evs[i].id] = i
		}
	}
	want := map[string]bool{}
	for id, i := range lastPass {
		if evs[i].ts+retention > clock[rs[i].Partition] {
			want[id] = true
		}
	}
	if !maps.Equal(held, want) || len(want) == 0 || len(want) > 100 || dead == 0 {
		t.Fatalf("compacted changelog: %d live batches holding %d ids, %d tombstones; want the %d ids passed within the retention, and tombstones", live, len(held), dead, len(want))
	}
	for p, c := range clock {
		if final[p] != c {
			t.Fatalf("partition %d: changelog clock %d, want %d", p, final[p], c)
		}
	}
}

// Keyed by a header, the value need not be JSON; a key is held for the
// retention from the moment it passed, and a repeat does not extend the
// hold: with retention 1.5s, "a" at 0s passes, at 1s is a repeat (held
// until 1.5s), at 2s passes again (a repeat that extended the hold to 2.5s
// would have dropped it), at 3.6s passes again. A record without the
// header, or with it empty, is dead-lettered as dedup-key.
func TestDedupByHeaderHoldsAKeyForItsRetentionFromItsPass(t *testing.T) {
	e := newTEnv(t)
	const app = "ddh"
	base := time.UnixMilli(1_700_000_000_000)
	rec := func(id string, ms int64, value string) *kgo.Record {
		r := &kgo.Record{Key: []byte("k"), Value: []byte(value), Timestamp: base.Add(time.Duration(ms) * time.Millisecond)}
		if id != "-" {
			r.Headers = []kgo.RecordHeader{{Key: "event-id", Value: []byte(id)}}
		}
		return r
	}
	rs := []*kgo.Record{
		rec("a", 0, "a0 (not JSON)"), rec("a", 1000, "a1"), rec("b", 1200, "b0"), rec("-", 1300, "no header"),
		rec("a", 2000, "a2"), rec("", 2100, "empty header"), rec("a", 3600, "a3"),
	}
	cfg := writeConfig(t, app+".yaml", "topology: dedup\nkey: {header: event-id}\nretention: 1500ms\nrepeats: drop\n")
	tr, err := NewDedup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.topic(app+"-in", 1)
	e.run(app, "dedup", tr, app+"-in", app+"-out", nil, func(c *pipeline.Config) { c.OnEvent = tr.OnEvent }, func() { e.produce(app+"-in", 1, rs) })
	var got []string
	for _, r := range e.read(app + "-out") {
		got = append(got, string(r.Value))
	}
	if want := "a0 (not JSON),b0,a2,a3"; strings.Join(got, ",") != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	dl := e.deadLetters(app+"-dlq", "dedup", app+"-in")
	if len(dl) != 2 || dl[at(rs[3])] != "dedup-key" || dl[at(rs[5])] != "dedup-key" {
		t.Fatalf("dead letters %v, want offsets 3 and 5 as dedup-key", dl)
	}
	if st := tr.Stats(); st.Passed != 4 || st.Repeats != 1 {
		t.Fatalf("stats %+v, want 4 passed, 1 repeat", st)
	}
}

// A worker that gives partitions away in a rebalance forgets their keys:
// each key is held by the one worker that owns its partition, so the
// workers' KeysHeld add up to the distinct keys, and the one that gave
// partitions away frees their memory. Before, the revoked partitions'
// tables stayed (and counted) until a record of them came back.
func TestDedupForgetsTheKeysOfPartitionsItGaveAway(t *testing.T) {
	e := newTEnv(t)
	const app, ids = "ddr", 1200
	e.topic(app+"-in", 6)
	cfg := writeConfig(t, app+".yaml", "topology: dedup\nkey: event_id\nretention: 24h\n")
	type worker struct {
		w        *pipeline.Worker
		tr       *Dedup
		assigned atomic.Int64 // assignments seen
		stop     func()
	}
	start := func(instance string) *worker {
		tr, err := NewDedup(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x := &worker{tr: tr}
		onEvent := func(ev pipeline.Event) {
			tr.OnEvent(ev)
			if ev.Kind == pipeline.EventAssigned && len(ev.Partitions[app+"-in"]) > 0 {
				x.assigned.Add(1)
			}
		}
		w, err := pipeline.New(pipeline.Config{App: app, Instance: instance, Inputs: []string{app + "-in"}, Output: app + "-out",
			CommitInterval: 20 * time.Millisecond, SessionTimeout: 4 * time.Second, ClientOpts: e.opts, OnEvent: onEvent}, tr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		x.w, x.stop = w, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker %s: %v", instance, err)
			}
		}
		return x
	}
	events := func(from, to int) []*kgo.Record {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			id := "ev-" + strconv.Itoa(i)
			rs = append(rs, &kgo.Record{Key: []byte(id), Value: fmt.Appendf(nil, `{"event_id":%q,"seq":%d}`, id, i)})
		}
		return rs
	}
	caughtUp := func(what string) {
		testenv.Eventually(t, 2*time.Minute, what, func() (bool, string) {
			ok, err := committed.Check(e.ctx, e.opts, committed.Wait{Group: app, Topics: []string{app + "-in"}, Outputs: []string{app + "-out"}})
			return err == nil && ok, fmt.Sprint(err)
		})
	}
	a := start("a")
	e.produce(app+"-in", 6, events(0, ids/2))
	caughtUp("worker a passed the first half")
	testenv.Eventually(t, time.Minute, "worker a holds the first half", func() (bool, string) {
		s := a.tr.Stats()
		return s.KeysHeld == ids/2, fmt.Sprintf("%+v", s)
	})
	b := start("b")
	testenv.Eventually(t, time.Minute, "worker b was given partitions", func() (bool, string) {
		return b.assigned.Load() > 0, ""
	})
	e.produce(app+"-in", 6, events(ids/2, ids))
	caughtUp("both workers passed the second half")
	testenv.Eventually(t, time.Minute, "each key held by one worker", func() (bool, string) {
		sa, sb := a.tr.Stats(), b.tr.Stats()
		return sa.KeysHeld+sb.KeysHeld == ids && sb.KeysHeld > 0, fmt.Sprintf("a %+v, b %+v", sa, sb)
	})
	b.stop()
	a.stop()
	if n := len(e.read(app + "-out")); n != ids {
		t.Fatalf("%d records passed, want %d (each id once)", n, ids)
	}
}

// A transaction whose records of a partition are all repeats can still
// move that partition's clock, and expire keys with it; the clock must be
// written with that transaction. It was not (only a partition that passed
// a key was flushed), so after a restart the partition's clock went back to
// the last transaction that passed one, and a record with an earlier event
// time than the clock had reached was judged against the older clock: a
// key that had expired was taken for a repeat. Here, in one partition with
// a retention of 100ms: k1 passes at 1000 and k2 at 1001, in one
// transaction and so in one batch of keys; k2 again at 1100, alone in the
// next transaction, is a repeat that moves the clock to k1's expiry (the
// batch stays: k2 is held). After a restart, k1 at 1050 must pass, as it
// does without one.
func TestDedupKeepsAClockMovedOnlyByRepeatsAcrossARestart(t *testing.T) {
	e := newTEnv(t)
	const app = "ddc"
	evs := []dedupEvent{{id: "k1", ts: 1000}, {id: "k2", ts: 1001}, {id: "k2", ts: 1100}, {id: "k1", ts: 1050}}
	rs := make([]*kgo.Record, len(evs))
	for i, ev := range evs {
		rs[i] = &kgo.Record{Key: []byte("one"), Value: ev.value(i), Timestamp: time.UnixMilli(ev.ts)}
	}
	e.topic(app+"-in", 1)
	for i, part := range [][]*kgo.Record{rs[:3], rs[3:]} { // a restart in between
		tr, err := NewDedup(writeConfig(t, app+".yaml", fmt.Sprintf(dedupConfig, "100ms", app, false)))
		if err != nil {
			t.Fatal(err)
		}
		w := e.run(app, "dedup", tr, app+"-in", app+"-out", nil, func(c *pipeline.Config) {
			aborting(e, 0)
			c.OnEvent = tr.OnEvent
			c.MaxTxnRecords = 2 // k1 and k2, then the repeat alone
		}, func() { e.produce(app+"-in", 1, part) })
		if i == 0 && w.Stats().Committed.Load() != 2 {
			t.Fatalf("the first worker committed %d transactions, want 2: {k1, k2} and {k2 again}", w.Stats().Committed.Load())
		}
	}
	checkDedup(t, e, app, evs, rs, 100, false)
}
