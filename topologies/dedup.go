package topologies

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// dedupKeys are the keys of a dedup configuration.
var dedupKeys = []string{"topology", "key", "retention", "clock", "time", "repeats", "repartition", "store", "format"}

// RepeatsOutput is the named output the dedup topology sends repeats to
// when its configuration says repeats: {audit: TOPIC}.
const RepeatsOutput = "repeats"

// Dedup is the de-duplication topology: it lets each record through once
// per key (an event id the producer chose) within a retention window, and
// drops every repeat or sends it to an audit topic. It is a Gate behind a
// YAML configuration:
//
//	key: event_id                        # an expression over the JSON value, as in etl
//	# key: {header: eos-idempotency-key} # or the value of a header (the value need not be JSON)
//	retention: 24h                       # how long a key is held after it passed
//	clock: event                         # event (default) or processing
//	time: ts                             # event time: Unix ms or RFC 3339; omit for the record timestamp
//	repeats: drop                        # (default) or {audit: TOPIC}: each repeat, unchanged, to TOPIC
//	repartition: false                   # true: re-key by key first, when the input is not keyed by it
//	format: {input: avro}                # or protobuf, json-schema: the expressions read the decoded record
//
// A record whose key cannot be computed (a value that is not JSON for a
// field expression, a missing field or header, an empty key, a failing
// expression) is dead-lettered with the reason; so is one whose event time
// cannot be read. Passed records go to the output unchanged (key, value,
// headers, timestamp), in input order per partition: on a wire-format
// input, in the record's own bytes (format.go's unchangedPasser).
//
// State lives per partition (see Gate): the records of one key must reach
// one partition. Either the input's Kafka key is the dedup key (kgo's and
// Kafka's default partitioners then send them together), or set
// repartition: true, which re-keys every record by its dedup key through
// the internal topic <app>-<store>-repartition first, as the aggregate
// topology does, and restores the original Kafka key on output.
type Dedup struct {
	keyExpr     *expression
	keyHeader   string
	processing  bool
	time        *expression
	audit       string // repeats topic, "" to drop
	repartition bool
	gate        *Gate
	env         *env
	needEnv     bool // a key or time expression needs the value decoded
	// fieldKey is set when the key is a field of the value as it is
	// (key: FIELD): it is read from the raw JSON without decoding it.
	fieldKey string

	// Counts of the open transaction, and of what was flushed for the
	// commit under way; promoted to stats when it commits (OnEvent).
	open, flushed dedupCounts
	flushedHeld   int64
	mu            sync.Mutex
	stats         DedupStats
}

type dedupCounts struct{ passed, repeats int64 }

// DedupStats are the dedup topology's counts over committed transactions.
type DedupStats struct {
	Passed   int64 // records let through
	Repeats  int64 // repeats dropped or sent to the audit output
	KeysHeld int64 // keys held in this worker's partitions after its last commit
}

// origKeyHeader carries a record's original Kafka key across the
// repartition topic (which is keyed by the dedup key); absent if the
// record had no key.
const origKeyHeader = "eos-dedup-orig-key"

// NewDedup reads the dedup configuration at path.
func NewDedup(path string) (*Dedup, error) {
	return newDedup(Options{Config: path})
}

func newDedup(o Options) (*Dedup, error) {
	d, err := readDoc(o.Config)
	if err != nil {
		return nil, err
	}
	d.warn = o.Warn
	return parseDedup(d)
}

func parseDedup(d *doc) (*Dedup, error) {
	if err := d.topologyKey("dedup"); err != nil {
		return nil, err
	}
	fs, err := d.fields(d.root, "", dedupKeys)
	if err != nil {
		return nil, err
	}
	t := &Dedup{}
	store := "seen"
	var retention time.Duration
	var timeField, clockField *field
	haveKey := false
	for _, f := range fs {
		switch f.name {
		case "key":
			haveKey = true
			err = t.parseKey(d, f)
		case "retention":
			if retention, err = d.duration(f, false); err == nil && retention < time.Millisecond {
				err = d.errAt(f.value, f.key, "want at least 1ms, got %s", retention)
			}
		case "clock":
			clockField = &f
			var s string
			if s, err = d.str(f); err == nil {
				switch s {
				case "event", "processing":
					t.processing = s == "processing"
				default:
					err = d.errAt(f.value, f.key, "want event (the record's event time: time, or its timestamp) or processing (the worker's clock), got %q", s)
				}
			}
		case "time":
			timeField = &f
			t.time, err = d.expression(f, anyValue)
		case "repeats":
			err = t.parseRepeats(d, f)
		case "repartition":
			t.repartition, err = d.boolean(f)
		case "store":
			store, err = d.str(f)
			if err == nil {
				err = fencing.ValidateName("store", store)
				if err != nil {
					err = d.errAt(f.value, f.key, "%v", err)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if !haveKey {
		return nil, d.errAt(d.root, "key", "missing: want the event id, an expression such as event_id or {header: eos-idempotency-key}")
	}
	if retention == 0 {
		return nil, d.errAt(d.root, "retention", "missing: want how long a key is held after it passed, such as 24h")
	}
	if t.processing && timeField != nil {
		return nil, d.errAt(timeField.line, "time", "time reads event time, but clock is processing (line %d): drop one", clockField.line.Line)
	}
	if t.gate, err = NewGate(store, retention); err != nil {
		return nil, d.errAt(d.root, "store", "%v", err)
	}
	t.env = newEnv(t.keyExpr, t.time)
	if t.keyExpr != nil && t.keyExpr.ident != "" {
		t.fieldKey = t.keyExpr.ident
	}
	t.needEnv = t.time != nil || (t.keyExpr != nil && t.fieldKey == "")
	return t, nil
}

// parseKey reads key: an expression, or {header: NAME}.
func (t *Dedup) parseKey(d *doc, f field) error {
	if f.value.Kind != yaml.MappingNode {
		var err error
		t.keyExpr, err = d.expression(f, anyValue)
		return err
	}
	fs, err := d.fields(f.value, f.key, []string{"header"})
	if err != nil {
		return err
	}
	for _, x := range fs {
		if t.keyHeader, err = d.str(x); err != nil {
			return err
		}
		if t.keyHeader == "" {
			return d.errAt(x.value, x.key, "want a header name, such as eos-idempotency-key")
		}
	}
	if t.keyHeader == "" {
		return d.errAt(f.value, f.key+".header", "missing: want {header: NAME}, or an expression instead of the mapping")
	}
	return nil
}

// parseRepeats reads repeats: drop, or {audit: TOPIC}.
func (t *Dedup) parseRepeats(d *doc, f field) error {
	const want = "want drop, or {audit: TOPIC} to send every repeat to TOPIC"
	if f.value.Kind == yaml.ScalarNode {
		if f.value.Value != "drop" {
			return d.errAt(f.value, f.key, "%s, got %q", want, f.value.Value)
		}
		return nil
	}
	fs, err := d.fields(f.value, f.key, []string{"audit"})
	if err != nil {
		return err
	}
	for _, x := range fs {
		topic, err := d.str(x)
		if err != nil {
			return err
		}
		if err := fencing.ValidateName("topic", topic); err != nil {
			return d.errAt(x.value, x.key, "%v", err)
		}
		t.audit = topic
	}
	if t.audit == "" {
		return d.errAt(f.value, f.key, "%s", want)
	}
	return nil
}

// passesUnchanged marks the dedup topology as one whose outputs are its
// input records as they came: around a format, they keep their bytes.
func (t *Dedup) passesUnchanged() {}

// Declare implements pipeline.Declarer.
func (t *Dedup) Declare() pipeline.Declaration {
	d := pipeline.Declaration{Stores: []string{t.gate.Store()}, DeadLetters: true}
	if t.audit != "" {
		d.Outputs = map[string]string{RepeatsOutput: t.audit}
	}
	if t.repartition {
		d.Repartition = t.gate.Store()
	}
	return d
}

// Process implements pipeline.Transform.
func (t *Dedup) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	if t.repartition && !in.Repartitioned {
		return t.stageOne(in, out)
	}
	origKey := in.Key
	var key []byte
	if in.Repartitioned {
		key, origKey = in.Key, nil
		for _, h := range in.Headers {
			if h.Key == origKeyHeader {
				origKey = h.Value
			}
		}
	}
	if t.needEnv {
		if err := t.env.load(in); err != nil {
			return err
		}
	}
	if !in.Repartitioned {
		var err error
		if key, err = t.key(in); err != nil {
			return err
		}
	}
	ms, err := t.at(in)
	if err != nil {
		return err
	}
	pass, err := t.gate.admit(in, key, ms)
	if err != nil {
		return err
	}
	o := pipeline.Output{Key: origKey, Value: in.Value, Headers: in.Headers, Timestamp: in.Timestamp}
	if in.Repartitioned {
		o.Headers = withoutHeader(in.Headers, origKeyHeader)
	}
	if pass {
		t.open.passed++
		out.Emit(o)
		return nil
	}
	t.open.repeats++
	if t.audit != "" {
		o.To = RepeatsOutput
		out.Emit(o)
	}
	return nil
}

// Prefetch implements pipeline.Prefetcher: with the key in a header (or,
// with repartition, the Kafka key), it reads each record's slot in the
// gate's table ahead of Process, so that the memory misses of a table of
// millions of keys overlap. A key in the value is not read ahead: parsing
// every value twice would cost more than the miss.
func (t *Dedup) Prefetch(records []*kgo.Record) {
	if !t.repartition && t.keyHeader == "" {
		return
	}
	for _, r := range records {
		if t.repartition {
			t.gate.prefetch(r.Partition, r.Key) // a repartitioned record's key
			continue
		}
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if r.Headers[i].Key == t.keyHeader {
				t.gate.prefetch(r.Partition, r.Headers[i].Value)
				break
			}
		}
	}
	t.gate.prefetchRead()
}

// stageOne re-keys the record by its dedup key onto the repartition
// topic, keeping its original key in a header. A record without a key is
// dead-lettered here, naming the input record.
func (t *Dedup) stageOne(in *pipeline.Record, out pipeline.Emitter) error {
	if t.keyExpr != nil && t.needEnv {
		if err := t.env.load(in); err != nil {
			return err
		}
	}
	key, err := t.key(in)
	if err != nil {
		return err
	}
	hs := withoutHeader(in.Headers, origKeyHeader)
	if in.Key != nil {
		hs = append(hs, kgo.RecordHeader{Key: origKeyHeader, Value: in.Key})
	}
	out.Emit(pipeline.Output{To: t.gate.Store(), Key: bytes.Clone(key), Value: in.Value, Headers: hs, Timestamp: in.Timestamp})
	return nil
}

// key computes the record's dedup key. The bytes may alias the record or
// a buffer of t's: they are valid until the next call.
func (t *Dedup) key(in *pipeline.Record) ([]byte, error) {
	if t.keyHeader != "" {
		for i := len(in.Headers) - 1; i >= 0; i-- {
			if h := in.Headers[i]; h.Key == t.keyHeader {
				if len(h.Value) == 0 {
					return nil, pipeline.DeadLetter("dedup-key", fmt.Errorf("header %s is empty", t.keyHeader))
				}
				return h.Value, nil
			}
		}
		return nil, pipeline.DeadLetter("dedup-key", fmt.Errorf("header %s is missing", t.keyHeader))
	}
	var v any
	if t.fieldKey != "" {
		if k, ok, err := t.rawFieldKey(in); ok || err != nil {
			return k, err
		}
		raw, _ := t.env.obj.get(t.fieldKey)
		var err error
		if v, err = decodeJSON(raw); err != nil {
			return nil, pipeline.DeadLetter("malformed-json", fmt.Errorf("field %q: %w", t.fieldKey, err))
		}
	} else {
		var err error
		if v, err = t.keyExpr.eval(t.env.m); err != nil {
			return nil, err
		}
	}
	k, err := keyBytes(v)
	if err != nil || len(k) == 0 {
		return nil, pipeline.DeadLetter("dedup-key", fmt.Errorf("%s: key gave %v, want a non-empty string or a number", t.keyExpr.where, v))
	}
	return k, nil
}

// rawFieldKey reads key: FIELD from the raw JSON of the value, as the
// expression would give it, without decoding the value: a string without
// escapes is its bytes, an integer its digits (keyBytes's text for them).
// It reports false, with no error, for any other value of the field, which
// key then decodes.
func (t *Dedup) rawFieldKey(in *pipeline.Record) ([]byte, bool, error) {
	if !t.needEnv { // else env.load parsed it
		if err := t.env.obj.parse(in.Value); err != nil {
			return nil, false, pipeline.DeadLetter("malformed-json", err)
		}
	}
	raw, ok := t.env.obj.get(t.fieldKey)
	if !ok {
		return nil, false, pipeline.DeadLetter("missing-field", fmt.Errorf("field %q is missing (for a field that may be absent write $env.%s ?? DEFAULT, e.g. $env.%s ?? 0)", t.fieldKey, t.fieldKey, t.fieldKey))
	}
	switch c := raw[0]; {
	case c == '"':
		body := raw[1 : len(raw)-1]
		if len(body) > 0 && bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
			return body, true, nil
		}
	case '0' <= c && c <= '9' && len(raw) <= 18 && bytes.IndexAny(raw, ".eE") < 0:
		return raw, true, nil
	}
	return nil, false, nil
}

// at is the record's time on the configured clock, in Unix ms.
func (t *Dedup) at(in *pipeline.Record) (int64, error) {
	switch {
	case t.processing:
		return time.Now().UnixMilli(), nil
	case t.time == nil:
		return in.Timestamp.UnixMilli(), nil
	}
	return evalEventTime(t.time, t.env)
}

// Flush implements pipeline.Flusher: it emits nothing, has the Gate write
// the transaction's keys to its store, and sets aside the counts of the transaction about to commit (OnEvent promotes them).
func (t *Dedup) Flush(context.Context, pipeline.Emitter) error {
	t.gate.Flush()
	t.flushed = t.open
	t.open = dedupCounts{}
	t.flushedHeld = int64(t.gate.Held())
	return nil
}

// Discard implements pipeline.Flusher: the transaction will not commit, so
// its counts go, and the Gate rebuilds its queues from the rolled-back
// store.
func (t *Dedup) Discard() {
	t.open, t.flushed = dedupCounts{}, dedupCounts{}
	t.gate.Discard()
}

// OnEvent counts a committed transaction's records in Stats; chain it into
// pipeline.Config.OnEvent before any reader of Stats.
func (t *Dedup) OnEvent(e pipeline.Event) {
	if e.Kind != pipeline.EventCommitted {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats.Passed += t.flushed.passed
	t.stats.Repeats += t.flushed.repeats
	t.stats.KeysHeld = t.flushedHeld
	t.flushed = dedupCounts{}
}

// Stats returns the counts over committed transactions. It is safe for
// concurrent use.
func (t *Dedup) Stats() DedupStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// evalEventTime evaluates an event-time expression over env: Unix
// milliseconds (a number) or RFC 3339 text; anything else is a dead letter.
func evalEventTime(e *expression, env *env) (int64, error) {
	v, err := e.eval(env.m)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case float64:
		return int64(x), nil
	case time.Time:
		return x.UnixMilli(), nil
	case string:
		if ts, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return ts.UnixMilli(), nil
		}
	}
	return 0, pipeline.DeadLetter("expression-error", fmt.Errorf("%s: time gave %v (%T), want Unix milliseconds or RFC 3339 text", e.where, v, v))
}

// withoutHeader copies hs without the headers named name; nil if none
// remain.
func withoutHeader(hs []kgo.RecordHeader, name string) []kgo.RecordHeader {
	var out []kgo.RecordHeader
	for _, h := range hs {
		if h.Key != name {
			out = append(out, h)
		}
	}
	return out
}
