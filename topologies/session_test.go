package topologies

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"
)

// mapKV is a store without a worker, for the Sessioniser's own tests.
type mapKV map[string][]byte

func (m mapKV) Get(k string) ([]byte, bool) { v, ok := m[k]; return v, ok }
func (m mapKV) Put(k string, v []byte)      { m[k] = v }
func (m mapKV) Delete(k string)             { delete(m, k) }
func (m mapKV) Range(fn func(string, []byte) bool) {
	for k, v := range m {
		if !fn(k, v) {
			return
		}
	}
}

// countSum is a test accumulator: a count and a sum, 8 bytes each.
func countSum(n, sum int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(n)), uint64(sum))
}

func mergeCountSum(acc, add []byte) []byte {
	if acc == nil {
		return slices.Clone(add)
	}
	return countSum(int64(binary.BigEndian.Uint64(acc))+int64(binary.BigEndian.Uint64(add)), int64(binary.BigEndian.Uint64(acc[8:]))+int64(binary.BigEndian.Uint64(add[8:])))
}

// view applies session events as a reader of updates does: an update or a
// final result sets the session (key, start), a retraction deletes it. It
// checks that a final result is given once and never changed after.
type view struct {
	t       interface{ Fatalf(string, ...any) }
	current map[string]aggcheck.Window
	final   map[string]bool
	log     []string
}

func newView(t interface{ Fatalf(string, ...any) }) *view {
	return &view{t: t, current: map[string]aggcheck.Window{}, final: map[string]bool{}}
}

func (v *view) apply(e SessionEvent) {
	w := aggcheck.Window{Key: e.Key, Start: e.Start.UnixMilli(), End: e.End.UnixMilli(),
		Orders: int64(binary.BigEndian.Uint64(e.Acc)), Total: float64(int64(binary.BigEndian.Uint64(e.Acc[8:])))}
	v.log = append(v.log, fmt.Sprintf("%s %s [%d,%d] n=%d", e.Kind, e.Key, w.Start, w.End, w.Orders))
	if v.final[w.ID()] {
		v.t.Fatalf("session %s changed (%s) after its final result", w.ID(), e.Kind)
	}
	switch e.Kind {
	case SessionRetract:
		if _, ok := v.current[w.ID()]; !ok {
			v.t.Fatalf("retraction of %s, which is not a current session", w.ID())
		}
		delete(v.current, w.ID())
	case SessionFinal:
		v.final[w.ID()] = true
		w.Final = true
		fallthrough
	default:
		v.current[w.ID()] = w
	}
}

// The sessions of one key as records arrive: a record within the gap
// extends a session, one further away opens another, and one between two
// sessions merges them, retracting the later one; a session closes at
// stream time past end + gap + grace; a record within the gap of a
// closed session, or behind stream time by more than gap + grace, is
// late.
func TestSessioniserMergesRetractsAndClosesByStreamTime(t *testing.T) {
	s, err := NewSessioniser("s", 10*time.Millisecond, 20*time.Millisecond, mergeCountSum)
	if err != nil {
		t.Fatal(err)
	}
	st := mapKV{}
	v := newView(t)
	add := func(key string, ts int64) error { return s.add(st, key, ts, countSum(1, ts), v.apply) }
	for _, ts := range []int64{100, 108, 126} { // [100,108] and [126,126]
		if err := add("a", ts); err != nil {
			t.Fatal(err)
		}
	}
	if err := add("a", 117); err != nil { // within 10 of 108 and of 126: one session
		t.Fatal(err)
	}
	want := []string{
		"update a [100,100] n=1", "update a [100,108] n=2", "update a [126,126] n=1",
		"retract a [126,126] n=1", "update a [100,126] n=4",
	}
	if !slices.Equal(v.log, want) {
		t.Fatalf("events:\n got  %q\n want %q", v.log, want)
	}
	if err := add("b", 156); err != nil { // stream time 156 = 126+10+20: still open
		t.Fatal(err)
	}
	if _, ok := v.current["a/100"]; !ok || v.final["a/100"] {
		t.Fatalf("a/100 closed early: %v", v.log)
	}
	if err := add("b", 157); err != nil { // past 126+10+20: a/100 closes
		t.Fatal(err)
	}
	if !v.final["a/100"] || v.current["a/100"].Orders != 4 {
		t.Fatalf("a/100 not closed with 4 records at stream time 157: %v", v.log)
	}
	// Not late by stream time (136+30 >= 157) but within the gap of the
	// closed session: it belongs to a result already given.
	var dl *pipeline.DeadLetterError
	if err := add("a", 136); !errors.As(err, &dl) || dl.Reason != "late-record" || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a record within the gap of a closed session: got %v, want a late-record dead letter", err)
	}
	if err := add("c", 126); !errors.As(err, &dl) || dl.Reason != "late-record" {
		t.Fatalf("a record gap+grace behind stream time: got %v, want a late-record dead letter", err)
	}
	if err := add("a", 137); err != nil { // more than the gap after the closed session
		t.Fatal(err)
	}
	// Once stream time passes the closed end by 2 gaps + grace, the key's
	// closed end is forgotten; only b's and a's open sessions remain.
	if err := add("b", 400); err != nil {
		t.Fatal(err)
	}
	if err := add("b", 1000); err != nil {
		t.Fatal(err)
	}
	if len(st) != 3 { // stream time, next close, b
		t.Fatalf("store holds %d keys after everything closed, want 3: %q", len(st), slices.Collect(func(yield func(string) bool) {
			for k := range st {
				yield(k)
			}
		}))
	}
}

// Records arrive at most grace behind stream time, in any order: the
// final sessions equal the reference sessioniser's from the sorted input,
// each given once; a reader applying the updates and retractions holds the
// same sessions at the end; records far behind stream time are
// dead-lettered as late, and change nothing.
func TestSessioniserAnyOrderWithinGraceGivesTheReferenceSessions(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		gap := rapid.OneOf(rapid.Just(int64(1)), rapid.Int64Range(1, 50)).Draw(rt, "gap")
		grace := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, 200)).Draw(rt, "grace")
		span := rapid.Int64Range(10, 2000).Draw(rt, "span")
		s, err := NewSessioniser("s", ms(gap), ms(grace), mergeCountSum)
		if err != nil {
			rt.Fatal(err)
		}
		n := rapid.IntRange(1, 200).Draw(rt, "n")
		type rec struct {
			ev      aggcheck.Event
			arrives int64
			late    bool
		}
		recs := make([]rec, n)
		for i := range recs {
			ev := aggcheck.Event{Group: "g" + strconv.Itoa(rapid.IntRange(0, 3).Draw(rt, "group")), TS: rapid.Int64Range(0, span).Draw(rt, "ts")}
			ev.Amount = float64(ev.TS)
			// Arrival order by time plus a delay of at most the grace:
			// no record is more than grace behind stream time.
			// The edges, 0 and grace, drawn often.
			delay := rapid.OneOf(rapid.Just(int64(0)), rapid.Just(grace), rapid.Int64Range(0, grace)).Draw(rt, "delay")
			recs[i] = rec{ev: ev, arrives: ev.TS + delay}
		}
		slices.SortStableFunc(recs, func(a, b rec) int { return int(a.arrives - b.arrives) })
		// Late records, far behind whatever stream time they meet.
		for k := rapid.IntRange(0, 3).Draw(rt, "late"); k > 0 && len(recs) > 0; k-- {
			at := rapid.IntRange(1, len(recs)).Draw(rt, "lateAt")
			recs = slices.Insert(recs, at, rec{ev: aggcheck.Event{Group: "g0", TS: -1_000_000}, late: true})
		}
		st := mapKV{}
		v := newView(rt)
		var evs []aggcheck.Event
		for _, r := range recs {
			err := s.add(st, r.ev.Group, r.ev.TS, countSum(1, r.ev.TS), v.apply)
			var dl *pipeline.DeadLetterError
			switch {
			case r.late && (!errors.As(err, &dl) || dl.Reason != "late-record"):
				rt.Fatalf("late record at %d: got %v, want a late-record dead letter", r.ev.TS, err)
			case !r.late && err != nil:
				rt.Fatalf("record %+v: %v", r.ev, err)
			case !r.late:
				evs = append(evs, r.ev)
			}
		}
		// A heartbeat closes every session.
		if err := s.add(st, "zz", math.MaxInt64/4, countSum(1, 0), v.apply); err != nil {
			rt.Fatal(err)
		}
		want := aggcheck.Sessionise(evs, gap)
		for id, w := range want {
			got, ok := v.current[id]
			if !ok || !v.final[id] || got.Orders != w.Orders || got.Total != w.Total || got.End != w.End {
				rt.Fatalf("session %s: got %+v (final %v), want %+v\nevents: %q", id, got, v.final[id], w, v.log)
			}
		}
		if len(v.current) != len(want)+1 { // and the heartbeat's own
			rt.Fatalf("%d sessions, the reference has %d\nevents: %q", len(v.current)-1, len(want), v.log)
		}
	})
}

func TestSessioniserRefusesBadSettings(t *testing.T) {
	for _, c := range []struct {
		store      string
		gap, grace time.Duration
		merge      func(a, b []byte) []byte
		want       string
	}{
		{"", time.Second, 0, mergeCountSum, "store"},
		{"s", 0, 0, mergeCountSum, "gap"},
		{"s", -time.Second, 0, mergeCountSum, "gap"},
		{"s", time.Microsecond, 0, mergeCountSum, "gap"},
		{"s", time.Second, -1, mergeCountSum, "grace"},
		{"s", time.Second, 0, nil, "merge"},
	} {
		if _, err := NewSessioniser(c.store, c.gap, c.grace, c.merge); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSessioniser(%q, %s, %s): got %v, want an error naming %s", c.store, c.gap, c.grace, err, c.want)
		}
	}
}

// runSessions runs the aggregate topology under cfg over recs written to
// app-in (3 partitions, re-keyed by user), in a fresh worker that aborts a
// fifth of its transactions on purpose, until it has consumed them.
func runSessions(t *testing.T, e *tenv, app, cfg string, recs []*kgo.Record) {
	t.Helper()
	tr, err := NewAggregate(writeConfig(t, app+".yaml", cfg))
	if err != nil {
		t.Fatal(err)
	}
	e.topic(app+"-in", 3)
	e.run(app, "aggregate", tr, app+"-in", app+"-out", []string{app + "-windows-repartition"}, func(c *pipeline.Config) {
		aborting(e, 0.2)
		c.MaxTxnRecords = 200 // many transactions, so many aborted ones
	}, func() { e.produce(app+"-in", 3, recs) })
}

// Session windows through the repartition topic, by a worker that aborts a
// fifth of its transactions, stopped after half the input and replaced by
// a new one (its open sessions restored from the changelog): read with
// read_committed, every session's final result equals the reference
// sessioniser's once, and every late record and poison pill is in the
// dead-letter topic once.
func TestAggregateSessionsThroughRestartsMatchTheReferenceSessioniser(t *testing.T) {
	e := newTEnv(t)
	const app = "ses"
	in := aggcheck.NewSessionInput(app+"-in", 6000, 3)
	half := len(in.Records) / 2
	runSessions(t, e, app, aggcheck.SessionConfig, in.Records[:half])
	if n := len(e.read(app + "-out")); n != 0 {
		t.Fatalf("%d results before any session could close (grace 10m)", n)
	}
	runSessions(t, e, app, aggcheck.SessionConfig, in.Records[half:])
	// Once everything is in, heartbeats close every session (before, one
	// could overtake records of other partitions and make them late).
	runSessions(t, e, app, aggcheck.SessionConfig, in.Heartbeats(3))
	ref := aggcheck.NewSessionReference(app+"-in", e.read(app+"-in"))
	rep := ref.Judge(e.read(app+"-out"), e.read(app+"-dlq"))
	if !rep.OK() {
		t.Fatal(rep)
	}
	t.Log(rep)
}

// With emit: updates, a reader that applies each result to a map by
// session (key, start), deleting retracted sessions, holds at the end
// exactly the reference's sessions, each final: the retractions of merged
// and moved sessions leave none behind. Some sessions must have merged.
func TestAggregateSessionUpdatesRetractMergedSessions(t *testing.T) {
	e := newTEnv(t)
	const app = "sesu"
	in := aggcheck.NewSessionInput(app+"-in", 4000, 4)
	cfg := aggcheck.SessionConfig + "emit: updates\n"
	runSessions(t, e, app, cfg, in.Records)
	runSessions(t, e, app, cfg, in.Heartbeats(3))
	ref := aggcheck.NewSessionReference(app+"-in", e.read(app+"-in"))
	current := map[string]*kgo.Record{}
	var retractions, finals []*kgo.Record
	for _, r := range e.read(app + "-out") {
		var v struct {
			aggcheck.Window
			Retracted bool
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("result %q: %v", r.Value, err)
		}
		id := v.Key + "/" + strconv.FormatInt(v.Start, 10)
		switch {
		case strings.HasPrefix(v.Key, "zz-heartbeat-"): // their sessions never close
		case v.Retracted:
			if current[id] == nil {
				t.Fatalf("retraction %s of no current session", r.Value)
			}
			delete(current, id)
			retractions = append(retractions, r)
		default:
			current[id] = r
			if v.Final {
				finals = append(finals, r)
			}
		}
	}
	// The current sessions, all final, and the final results alone are
	// both the reference.
	for _, rs := range [][]*kgo.Record{slices.Collect(maps.Values(current)), finals} {
		if rep := ref.Judge(rs, e.read(app+"-dlq")); !rep.OK() {
			t.Fatal(rep)
		}
	}
	if len(retractions) == 0 {
		t.Fatal("no session was retracted: the input merged none, and the test proved nothing")
	}
	t.Logf("%d sessions, %d retractions", len(finals), len(retractions))
}

// Every mistake in a session window's configuration fails at start with
// FILE:LINE: KEY: REASON, as eosctl topology check prints it.
func TestBadSessionConfigsGiveFileLineAndReason(t *testing.T) {
	const aggs = "aggregations: {n: count()}\n"
	for _, tc := range []struct{ name, body, want string }{
		{"gap with size", "group_by: user\nwindow:\n  session_gap: 30m\n  size: 1h\n" + aggs, `4: window.size: session windows (session_gap) have no size`},
		{"gap with advance", "group_by: user\nwindow:\n  advance: 1m\n  session_gap: 30m\n" + aggs, `3: window.advance: session windows (session_gap) have no advance`},
		{"zero gap", "group_by: user\nwindow:\n  session_gap: 0s\n" + aggs, `3: window.session_gap: want a positive duration such as 500ms, 1m or 1h30m, got "0s"`},
		{"negative gap", "group_by: user\nwindow:\n  session_gap: -5m\n" + aggs, `3: window.session_gap: want a positive duration`},
		{"gap not a duration", "group_by: user\nwindow: {session_gap: 30}\n" + aggs, `2: window.session_gap: want a positive duration such as 500ms, 1m or 1h30m, got "30"`},
		{"gap below a millisecond", "group_by: user\nwindow: {session_gap: 1500us}\n" + aggs, `2: window.session_gap: want whole milliseconds, got 1.5ms`},
		{"gap typo", "group_by: user\nwindow: {session_gpa: 30m}\n" + aggs, `2: window.session_gpa: unknown key (did you mean "session_gap"?`},
		{"negative grace", "group_by: user\nwindow: {session_gap: 30m, grace: -1s}\n" + aggs, `2: window.grace: want a duration such as 500ms`},
		{"retracted as a name", "group_by: user\nwindow: {session_gap: 30m}\naggregations:\n  n: count()\n  retracted: count()\n", `5: aggregations.retracted: the name "retracted" is taken by the retractions of session windows`},
	} {
		t.Run(tc.name, func(t *testing.T) { requireConfigError(t, "aggregate", tc.body, tc.want) })
	}
}
