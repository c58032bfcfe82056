package topologies

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos/pipeline"
	"go.yaml.in/yaml/v3"
)

// aggregateKeys are the keys of an aggregate configuration.
var aggregateKeys = []string{"topology", "group_by", "time", "window", "aggregations", "emit", "repartition", "preaggregate", "store", "format"}

// Aggregate is the windowed aggregation topology: it groups JSON records by
// a key expression into tumbling, hopping or session windows of event time,
// keeps count, sum, min, max and avg per window in a keyed store, and emits
// each window's result when the window closes (and, with emit: updates,
// after every change).
//
//	group_by: user
//	time: ts                 # Unix ms, RFC 3339 text, or omit for the record timestamp
//	window:
//	  size: 1m
//	  advance: 20s           # hopping windows; omit for tumbling
//	  grace: 10s             # how late a record may be
//	  # or, instead of size and advance, session windows:
//	  # session_gap: 30m     # a group's records at most 30m apart form one session
//	aggregations:
//	  orders: count()
//	  total: sum(amount)
//	  biggest: max(amount)
//	emit: final              # or updates
//	repartition: true        # re-key by group_by first (default)
//	preaggregate: true       # combine before the repartition topic (default)
//
// Event time and closing. Each state partition has a stream time, the
// largest event time it has seen; a window [start, end) closes when stream
// time reaches end + grace, and its final result is emitted then, by the
// record that moved stream time. A record whose every window has closed is
// dead-lettered as "late-record". Stream time only moves with records: the
// last windows of a finite input close when a later record arrives, so end
// an input with a record whose time is past them (a heartbeat) if their
// results matter. Stream time, the open windows and their accumulators are
// state: changelogged, restored, and consistent with the committed offsets,
// so a crash neither loses a window nor counts a record twice.
//
// Session windows are a Sessioniser's (session.go): a session's result has
// the times of its first and last records as start and end; a record that
// bridges two sessions merges them, and with emit: updates the sessions
// merged away or moved are retracted ({"key":..,"start":..,"end":..,
// "retracted":true}). Stage one does not combine records for sessions:
// each is written alone to the repartition topic.
//
// Repartitioning. State lives per partition, so a group must be in one
// partition. With repartition: true (the default) the topology first
// re-keys by group through the internal topic <app>-<store>-repartition and
// aggregates what it reads back from there, as Kafka Streams does; with
// repartition: false it aggregates its input directly, which is right only
// if the input is already keyed by the group (partitioned by kgo's or
// Kafka's default partitioner). Stage one does not write every record: it
// pre-aggregates each transaction's records per group and pane and writes
// the partial results at the commit (combine.go), which gives the same
// results and dead letters as record by record. With preaggregate: false
// stage one writes every record alone, as Kafka Streams does: the same
// results and dead letters, but one repartition record per input record.
// It exists to measure what the combiner is worth (eosctl bench
// --eos-preaggregate), and has no effect with repartition: false, where
// there is no stage one.
type Aggregate struct {
	groupBy     *expression
	time        *expression
	size        int64 // ms
	advance     int64 // ms; == size for tumbling windows
	grace       int64 // ms
	aggs        []aggregation
	updates     bool
	repartition bool
	// preaggregate lets stage one combine records (combine.go); false
	// writes each record alone.
	preaggregate bool
	store        string
	env          *env
	vals         []float64 // the current record's values, reused
	one          []byte    // the current record's accumulator, reused
	pane         int64     // ms: gcd(size, advance), see combiner
	comb         combiner  // stage one's held partials
	// sessions is set for session windows (window.session_gap), which
	// replace size and advance.
	sessions  *Sessioniser
	gap       int64              // ms: window.session_gap, 0 for time windows
	out       pipeline.Emitter   // the emitter of the record being folded, for onSession
	onSession func(SessionEvent) // sessionEvent, made once
}

type aggregation struct {
	key  *yaml.Node // where it is configured
	name string
	op   string // count, sum, min, max, avg
	e    *expression
}

var aggSpec = regexp.MustCompile(`^\s*(count|sum|min|max|avg)\s*\((.*)\)\s*$`)

// NewAggregate reads the aggregate configuration at path.
func NewAggregate(path string) (*Aggregate, error) {
	return newAggregate(Options{Config: path})
}

func newAggregate(o Options) (*Aggregate, error) {
	d, err := readDoc(o.Config)
	if err != nil {
		return nil, err
	}
	d.warn = o.Warn
	return parseAggregate(d)
}

func parseAggregate(d *doc) (*Aggregate, error) {
	if err := d.topologyKey("aggregate"); err != nil {
		return nil, err
	}
	fs, err := d.fields(d.root, "", aggregateKeys)
	if err != nil {
		return nil, err
	}
	t := &Aggregate{repartition: true, preaggregate: true, store: "windows"}
	for _, f := range fs {
		switch f.name {
		case "group_by":
			t.groupBy, err = d.expression(f, anyValue)
		case "time":
			t.time, err = d.expression(f, anyValue)
		case "window":
			err = t.parseWindow(d, f)
		case "aggregations":
			err = t.parseAggs(d, f)
		case "emit":
			var s string
			if s, err = d.str(f); err == nil {
				switch s {
				case "final", "updates":
					t.updates = s == "updates"
				default:
					err = d.errAt(f.value, f.key, "want final (each window's result once, when it closes) or updates (after every change, then the final one), got %q", s)
				}
			}
		case "repartition":
			t.repartition, err = d.boolean(f)
		case "preaggregate":
			t.preaggregate, err = d.boolean(f)
		case "store":
			t.store, err = d.str(f)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, req := range []struct {
		ok   bool
		key  string
		what string
	}{
		{t.groupBy != nil, "group_by", "an expression giving each record's group, such as user"},
		{t.size > 0 || t.gap > 0, "window", "window: {size: 1m} or window: {session_gap: 30m}"},
		{len(t.aggs) > 0, "aggregations", "at least one, such as {orders: count(), total: sum(amount)}"},
	} {
		if !req.ok {
			return nil, d.errAt(d.root, req.key, "missing: want %s", req.what)
		}
	}
	if t.gap > 0 {
		for _, a := range t.aggs {
			if a.name == "retracted" {
				return nil, d.errAt(a.key, "aggregations."+a.name, "the name %q is taken by the retractions of session windows", a.name)
			}
		}
		var err error
		t.sessions, err = NewSessioniser(t.store, ms(t.gap), ms(t.grace), func(acc, add []byte) []byte { return t.merge(acc, acc != nil, add) })
		if err != nil {
			return nil, err
		}
		t.onSession = t.sessionEvent
	}
	exprs := []*expression{t.groupBy, t.time}
	for _, a := range t.aggs {
		exprs = append(exprs, a.e)
	}
	t.env = newEnv(exprs...)
	return t, nil
}

func (t *Aggregate) parseWindow(d *doc, f field) error {
	fs, err := d.fields(f.value, f.key, []string{"size", "advance", "grace", "session_gap"})
	if err != nil {
		return err
	}
	var size, advance, grace, gap time.Duration
	var sized *field // size or advance, which session_gap excludes
	for _, x := range fs {
		var v time.Duration
		if v, err = d.duration(x, x.name == "grace"); err != nil {
			return err
		}
		if v%time.Millisecond != 0 {
			return d.errAt(x.value, x.key, "want whole milliseconds, got %s", v)
		}
		switch x.name {
		case "size":
			size = v
		case "advance":
			advance = v
		case "grace":
			grace = v
		case "session_gap":
			gap = v
		}
		if x.name == "size" || x.name == "advance" {
			sized = &x
		}
	}
	if gap > 0 {
		if sized != nil {
			return d.errAt(sized.line, sized.key, "session windows (session_gap) have no %s: a session lasts while its records are at most session_gap apart; remove %s, or session_gap for tumbling or hopping windows", sized.name, sized.name)
		}
		t.gap, t.grace = gap.Milliseconds(), grace.Milliseconds()
		return nil
	}
	if size == 0 {
		return d.errAt(f.value, f.key+".size", "missing: want the window length, such as 1m")
	}
	if advance == 0 {
		advance = size
	}
	if advance > size {
		return d.errAt(f.value, f.key+".advance", "advance %s is longer than size %s: windows would leave gaps", advance, size)
	}
	if size/advance > 1000 {
		return d.errAt(f.value, f.key+".advance", "advance %s puts every record in %d windows; at most 1000", advance, size/advance)
	}
	t.size, t.advance, t.grace = size.Milliseconds(), advance.Milliseconds(), grace.Milliseconds()
	t.pane = gcd(t.size, t.advance)
	return nil
}

func (t *Aggregate) parseAggs(d *doc, f field) error {
	fs, err := d.fields(f.value, f.key, nil)
	if err != nil {
		return err
	}
	for _, x := range fs {
		spec, err := d.str(x)
		if err != nil {
			return err
		}
		if slices.Contains([]string{"key", "start", "end", "final"}, x.name) {
			return d.errAt(x.line, x.key, "the name %q is taken by the result's own fields (key, start, end, final)", x.name)
		}
		m := aggSpec.FindStringSubmatch(spec)
		if m == nil {
			return d.errAt(x.value, x.key, "want count(), sum(EXPR), min(EXPR), max(EXPR) or avg(EXPR), got %q", spec)
		}
		a := aggregation{key: x.line, name: x.name, op: m[1]}
		arg := strings.TrimSpace(m[2])
		switch {
		case a.op == "count" && arg != "":
			return d.errAt(x.value, x.key, "count() takes no argument: it counts records, got count(%s)", arg)
		case a.op != "count" && arg == "":
			return d.errAt(x.value, x.key, "%s() needs the expression to aggregate, such as %s(amount)", a.op, a.op)
		case a.op != "count":
			if a.e, err = d.compile(x.value.Line, x.key, arg, anyValue); err != nil {
				return err
			}
		}
		t.aggs = append(t.aggs, a)
	}
	if len(t.aggs) == 0 {
		return d.errAt(f.value, f.key, "want at least one, such as {orders: count()}")
	}
	return nil
}

// Declare implements pipeline.Declarer.
func (t *Aggregate) Declare() pipeline.Declaration {
	d := pipeline.Declaration{Stores: []string{t.store}, DeadLetters: true}
	if t.repartition {
		d.Repartition = t.store
	}
	return d
}

// Process implements pipeline.Transform.
func (t *Aggregate) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	if in.Repartitioned {
		return t.stageTwo(in, out)
	}
	if err := t.env.load(in); err != nil {
		return err
	}
	group, err := t.group(in)
	if err != nil {
		return err
	}
	ts, err := t.eventTime(in)
	if err != nil {
		return err
	}
	vals, err := t.values()
	if err != nil {
		return err
	}
	if t.repartition {
		// Stage one: everything is evaluated here, so bad records are
		// dead-lettered here; re-key by group, with the results.
		t.stageOne(in, group, ts, vals, out)
		return nil
	}
	return t.update(in.Store(t.store), string(group), ts, t.single(vals), out)
}

// stageTwo folds what stage one wrote, keyed by group: a partial (see
// combiner) or a single record with its input value.
func (t *Aggregate) stageTwo(in *pipeline.Record, out pipeline.Emitter) error {
	st := in.Store(t.store)
	if ts, acc, srcs, ok := t.decodePartial(in.Value); ok {
		err := t.update(st, string(in.Key), ts, acc, out)
		if dl, ok := err.(*pipeline.DeadLetterError); ok {
			// Every record in it is late: dead-letter them, not it.
			if dl.Sources, err = decodeSources(srcs); err != nil {
				return pipeline.DeadLetter("repartition-format", err)
			}
			return dl
		}
		return err
	}
	ts, vals, orig, err := t.decodeStaged(in.Value)
	if err != nil {
		return err
	}
	err = t.update(st, string(in.Key), ts, t.single(vals), out)
	if dl, ok := err.(*pipeline.DeadLetterError); ok {
		dl.Value = orig // the input record's value, not the internal one
	}
	return err
}

// A repartition record's value is stage one's results followed by the input
// value: version byte 1, the number of values (1 byte), the event time and
// each value (8 bytes each, big-endian), the input value. The topic is
// internal; only this topology reads it.
const stagedVersion = 1

func (t *Aggregate) encodeStaged(ts int64, vals []float64, orig []byte) []byte {
	b := make([]byte, 0, 10+8*len(vals)+len(orig))
	b = append(b, stagedVersion, byte(len(vals)))
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	for _, v := range vals {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(v))
	}
	return append(b, orig...)
}

func (t *Aggregate) decodeStaged(b []byte) (int64, []float64, []byte, error) {
	n := len(t.aggs)
	if len(b) < 10+8*n || b[0] != stagedVersion || int(b[1]) != n {
		return 0, nil, nil, pipeline.DeadLetter("repartition-format", fmt.Errorf("the repartition record was written by a different configuration (%d aggregations, this one has %d): a changed configuration needs a new app (pipeline.Config.App)", b[min(1, len(b)-1)], n))
	}
	ts := int64(binary.BigEndian.Uint64(b[2:]))
	vals := t.scratch()
	for i := range vals {
		vals[i] = math.Float64frombits(binary.BigEndian.Uint64(b[10+8*i:]))
	}
	return ts, vals, b[10+8*n:], nil
}

// group returns the record's group, as the key of its repartition record.
func (t *Aggregate) group(in *pipeline.Record) ([]byte, error) {
	v, err := t.groupBy.eval(t.env.m)
	if err != nil {
		return nil, err
	}
	k, err := keyBytes(v)
	if err != nil || k == nil {
		return nil, pipeline.DeadLetter("expression-error", fmt.Errorf("%s: group_by gave %v, want a string or number", t.groupBy.where, v))
	}
	return k, nil
}

// eventTime returns the record's event time in Unix milliseconds.
func (t *Aggregate) eventTime(in *pipeline.Record) (int64, error) {
	if t.time == nil {
		return in.Timestamp.UnixMilli(), nil
	}
	return evalEventTime(t.time, t.env)
}

// scratch returns the slice for the current record's values: one per
// aggregation, reused from record to record (neither stage keeps them).
func (t *Aggregate) scratch() []float64 {
	if t.vals == nil {
		t.vals = make([]float64, len(t.aggs))
	}
	return t.vals
}

// values evaluates every aggregation's expression (count has none). The
// slice is reused by the next record.
func (t *Aggregate) values() ([]float64, error) {
	vals := t.scratch()
	clear(vals)
	for i, a := range t.aggs {
		if a.e == nil {
			continue
		}
		v, err := a.e.eval(t.env.m)
		if err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case int:
			vals[i] = float64(x)
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, pipeline.DeadLetter("expression-error", fmt.Errorf("%s: %s(%s) gave %v, want a finite number", a.e.where, a.op, a.e.src, x))
			}
			vals[i] = x
		default:
			return nil, pipeline.DeadLetter("expression-error", fmt.Errorf("%s: %s(%s) gave %v (%T), want a number", a.e.where, a.op, a.e.src, v, v))
		}
	}
	return vals, nil
}

// Keys of the store: windows are "<start, 8 bytes big-endian><group>";
// the partition's stream time and the earliest close of its open windows
// live under keys shorter than 8 bytes, which no window key can be.
const (
	streamTimeKey = "\x00st"
	nextCloseKey  = "\x00nc"
)

func windowKey(start int64, group string) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(start))
	return string(b[:]) + group
}

// kv is what the windows need of a store: *pipeline.Store, or a map in
// tests that run without a worker.
type kv interface {
	Get(key string) ([]byte, bool)
	Put(key string, value []byte)
	Delete(key string)
	Range(fn func(key string, value []byte) bool)
}

func getInt(st kv, key string, def int64) int64 {
	v, ok := st.Get(key)
	if !ok || len(v) != 8 {
		return def
	}
	return int64(binary.BigEndian.Uint64(v))
}

func putInt(st kv, key string, v int64) {
	st.Put(key, binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(v)))
}

// update folds an accumulator (one record's, or a partial's) of event time
// ts into its windows, then closes the windows that stream time has passed.
func (t *Aggregate) update(st *pipeline.Store, group string, ts int64, add []byte, out pipeline.Emitter) error {
	if t.sessions != nil {
		t.out = out
		return t.sessions.add(st, group, ts, add, t.onSession)
	}
	streamTime := getInt(st, streamTimeKey, math.MinInt64)
	nextClose := getInt(st, nextCloseKey, math.MaxInt64)
	// The windows [s, s+size) containing ts, s a multiple of advance.
	updated := 0
	for start := t.firstStart(ts); start <= ts; start += t.advance {
		end := start + t.size
		if streamTime != math.MinInt64 && end+t.grace <= streamTime {
			continue // closed already
		}
		key := windowKey(start, group)
		acc, ok := st.Get(key)
		acc = t.merge(acc, ok, add)
		st.Put(key, acc)
		if !ok && end+t.grace < nextClose {
			nextClose = end + t.grace
			putInt(st, nextCloseKey, nextClose)
		}
		if t.updates {
			t.emit(out, group, start, end, acc, false)
		}
		updated++
	}
	if updated == 0 {
		last := floorDiv(ts, t.advance) * t.advance
		return pipeline.DeadLetter("late-record", fmt.Errorf("every window of its event time closed before it arrived: the last, [%s, %s), closed with its grace period (%s) when the partition's stream time reached %s, and stream time is %s",
			rfc3339(last), rfc3339(last+t.size), time.Duration(t.grace)*time.Millisecond, rfc3339(last+t.size+t.grace), rfc3339(streamTime)))
	}
	if ts > streamTime {
		streamTime = ts
		putInt(st, streamTimeKey, streamTime)
		if streamTime >= nextClose {
			t.close(st, streamTime, out)
		}
	}
	return nil
}

// firstStart is the start of the first window containing ts: windows are
// [s, s+size) with s a multiple of advance.
func (t *Aggregate) firstStart(ts int64) int64 {
	return floorDiv(ts-t.size, t.advance)*t.advance + t.advance
}

func rfc3339(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// close emits and deletes every window that closed by streamTime, in order
// of end then group, and records the next close.
func (t *Aggregate) close(st *pipeline.Store, streamTime int64, out pipeline.Emitter) {
	type closed struct {
		start int64
		group string
		key   string
		acc   []byte
	}
	var done []closed
	next := int64(math.MaxInt64)
	st.Range(func(k string, v []byte) bool {
		if len(k) < 8 {
			return true
		}
		start := int64(binary.BigEndian.Uint64([]byte(k[:8])))
		c := start + t.size + t.grace
		if c <= streamTime {
			done = append(done, closed{start, k[8:], k, v})
		} else if c < next {
			next = c
		}
		return true
	})
	slices.SortFunc(done, func(a, b closed) int {
		return cmp.Or(cmp.Compare(a.start, b.start), strings.Compare(a.group, b.group))
	})
	for _, c := range done {
		t.emit(out, c.group, c.start, c.start+t.size, c.acc, true)
		st.Delete(c.key)
	}
	if next == math.MaxInt64 {
		st.Delete(nextCloseKey)
	} else {
		putInt(st, nextCloseKey, next)
	}
}

// An accumulator is the record count, then sum, min and max per aggregation,
// each 8 bytes.
func (t *Aggregate) accLen() int { return 8 + 24*len(t.aggs) }

// newAcc returns an empty accumulator.
func (t *Aggregate) newAcc() []byte { return t.emptyAcc(make([]byte, t.accLen())) }

// emptyAcc empties acc and returns it.
func (t *Aggregate) emptyAcc(acc []byte) []byte {
	clear(acc)
	for i := range t.aggs {
		binary.BigEndian.PutUint64(acc[8+24*i+8:], math.Float64bits(math.Inf(1)))
		binary.BigEndian.PutUint64(acc[8+24*i+16:], math.Float64bits(math.Inf(-1)))
	}
	return acc
}

// single returns the accumulator of one record's values, reused by the
// next record.
func (t *Aggregate) single(vals []float64) []byte {
	if t.one == nil {
		t.one = make([]byte, t.accLen())
	}
	t.foldInto(t.emptyAcc(t.one), vals)
	return t.one
}

// foldInto adds one record's values to acc, in place.
func (t *Aggregate) foldInto(acc []byte, vals []float64) {
	binary.BigEndian.PutUint64(acc, binary.BigEndian.Uint64(acc)+1)
	for i, v := range vals {
		t.combine(acc[8+24*i:], v, v, v)
	}
}

// merge returns a new accumulator: acc (if ok) with add folded in. The
// store's value is never changed in place: the journal holds it.
func (t *Aggregate) merge(acc []byte, ok bool, add []byte) []byte {
	var next []byte
	if ok && len(acc) == t.accLen() {
		next = slices.Clone(acc)
	} else {
		next = t.newAcc()
	}
	binary.BigEndian.PutUint64(next, binary.BigEndian.Uint64(next)+binary.BigEndian.Uint64(add))
	for i := range t.aggs {
		o := 8 + 24*i
		f := func(k int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(add[o+k:])) }
		t.combine(next[o:], f(0), f(8), f(16))
	}
	return next
}

// combine folds a sum, min and max into one aggregation's 24 bytes.
func (t *Aggregate) combine(b []byte, sum, lo, hi float64) {
	get := func(k int) float64 { return math.Float64frombits(binary.BigEndian.Uint64(b[k:])) }
	binary.BigEndian.PutUint64(b, math.Float64bits(get(0)+sum))
	binary.BigEndian.PutUint64(b[8:], math.Float64bits(min(get(8), lo)))
	binary.BigEndian.PutUint64(b[16:], math.Float64bits(max(get(16), hi)))
}

// sessionEvent writes what the Sessioniser reports: final results, and with
// emit: updates every update and retraction.
func (t *Aggregate) sessionEvent(e SessionEvent) {
	switch {
	case e.Kind == SessionFinal || e.Kind == SessionUpdate && t.updates:
		t.emit(t.out, e.Key, e.Start.UnixMilli(), e.End.UnixMilli(), e.Acc, e.Kind == SessionFinal)
	case e.Kind == SessionRetract && t.updates:
		b := make([]byte, 0, 64)
		b = append(b, `{"key":`...)
		b = appendJSONString(b, e.Key)
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, e.Start.UnixMilli(), 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, e.End.UnixMilli(), 10)
		b = append(b, `,"retracted":true}`...)
		t.out.Emit(pipeline.Output{Key: []byte(e.Key), Value: b, Timestamp: e.End})
	}
}

// emit writes a window's result:
// {"key":..,"start":ms,"end":ms,<aggregations>...,"final":bool}. A time
// window's end is exclusive; a session's is its last record's time.
func (t *Aggregate) emit(out pipeline.Emitter, group string, start, end int64, acc []byte, final bool) {
	b := make([]byte, 0, 64+24*len(t.aggs))
	b = append(b, `{"key":`...)
	b = appendJSONString(b, group)
	b = append(b, `,"start":`...)
	b = strconv.AppendInt(b, start, 10)
	b = append(b, `,"end":`...)
	b = strconv.AppendInt(b, end, 10)
	count := int64(binary.BigEndian.Uint64(acc))
	for i, a := range t.aggs {
		o := 8 + 24*i
		b = append(b, ',')
		b = appendJSONString(b, a.name)
		b = append(b, ':')
		var v float64
		switch a.op {
		case "count":
			b = strconv.AppendInt(b, count, 10)
			continue
		case "sum":
			v = math.Float64frombits(binary.BigEndian.Uint64(acc[o:]))
		case "avg":
			v = math.Float64frombits(binary.BigEndian.Uint64(acc[o:])) / float64(count)
		case "min":
			v = math.Float64frombits(binary.BigEndian.Uint64(acc[o+8:]))
		case "max":
			v = math.Float64frombits(binary.BigEndian.Uint64(acc[o+16:]))
		}
		b = appendFloat(b, v)
	}
	b = append(b, `,"final":`...)
	b = strconv.AppendBool(b, final)
	b = append(b, '}')
	out.Emit(pipeline.Output{Key: []byte(group), Value: b, Timestamp: time.UnixMilli(end)})
}
