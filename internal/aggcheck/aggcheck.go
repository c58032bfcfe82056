// Package aggcheck is the aggregate topology's test fixture and its judge:
// an input of regular, late and poison records whose answer is known
// ([Input], made for the topology configuration [Config]), a reference
// computed from the input in memory, and [Judge], which reads a run's
// results and dead letters with read_committed and compares them with the
// reference, window by window. The chaos drills, the e2e and topologies
// tests and eosctl bench judge every aggregate run with it. It is internal:
// it knows one configuration, where package verify's judge of copies works
// on any topic.
package aggcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is the configuration of the aggregate topology that an
// [Input] is made for: it groups by user through the repartition
// topic, into tumbling 5s windows of the records' ts field. The grace period
// (10 minutes) is longer than the event time any input of up to
// [MaxRecords] spans, so that no regular record is late however the
// input partitions interleave on their way through the repartition topic;
// windows close when [Input.Heartbeats] move stream time past them.
const Config = `topology: aggregate
group_by: user
time: ts
window:
  size: 5s
  grace: 10m
` + aggregations

// aggregations are the aggregations of Config and SessionConfig, the fields
// of a [Window].
const aggregations = `aggregations:
  orders: count()
  total: sum(amount)
  smallest: min(amount)
  biggest: max(amount)
  mean: avg(amount)
`

// The input's shape, which the reference relies on.
const (
	aggregateWindow    = 5000                       // ms, window.size of Config
	aggregateBase      = int64(1_700_000_000_000)   // event time of the first regular record, a multiple of the window
	aggregateLateTime  = aggregateBase - 3_600_000  // event time of late records: an hour before everything else
	aggregateHeartbeat = aggregateBase + 36_000_000 // event time of heartbeats: ten hours after the first record
	aggregateGroups    = 400                        // users
	aggregateLateEvery = 1000                       // a late record after every 1000th regular one
	aggregatePoison    = 997                        // a poison pill after every 997th (offset by 500)
	heartbeatPrefix    = "zz-heartbeat-"            // the heartbeats' groups
	produceBatch       = 200                        // records per produce request
)

// MaxRecords is the most regular records an [Input] can
// have: 1ms of event time apart, more would span the grace period of
// [Config], and regular records could be late.
const MaxRecords = 600_000

// Input is an input for the aggregate topology run with
// [Config] whose exact answer is known: regular records with
// random users and amounts, one millisecond of event time apart; after every
// 1000th a late record an hour older, keyed like its regular predecessor so
// that it reaches its repartition partition after it and is late however the
// run goes; after every 997th (offset by 500) a poison pill, malformed JSON.
// Regular records are keyed by sequence number, not by user, so the
// topology must re-key them.
//
// Late records carry "late": true, so that a reference can be computed from
// the input topic alone ([ReadReference]) without simulating stream
// time; the topology ignores the field.
type Input struct {
	Topic   string
	Records []*kgo.Record // in the order Produce writes them
	// Encode, if set, turns each value into what is written (Avro, say);
	// Records keep the JSON, with the partitions and offsets written.
	Encode func([]byte) ([]byte, error)
}

// NewInput returns n regular records (at most
// [MaxRecords]) and their late records and poison pills for topic,
// the same for the same seed.
func NewInput(topic string, n int, seed uint64) *Input {
	rng := rand.New(rand.NewPCG(seed, seed))
	in := &Input{Topic: topic}
	add := func(key string, value []byte) {
		in.Records = append(in.Records, &kgo.Record{Topic: topic, Key: []byte(key), Value: value})
	}
	for i := range n {
		u, amt := fmt.Sprintf("user-%03d", rng.IntN(aggregateGroups)), rng.IntN(10_000)-1_000
		key := "n" + strconv.Itoa(i)
		late := i%aggregateLateEvery == aggregateLateEvery-1
		if late {
			key = "late-" + strconv.Itoa(i)
		}
		add(key, fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":%d}`, u, aggregateBase+int64(i), amt))
		switch {
		case late:
			add(key, fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":1,"late":true}`, u, aggregateLateTime))
		case i%aggregatePoison == 500:
			add("p"+strconv.Itoa(i), []byte(`{"user":"x","ts":`)) // truncated JSON
		}
	}
	return in
}

// Produce writes the records to cl in batches, at about rate records per
// second (0: as fast as the broker takes them).
func (in *Input) Produce(ctx context.Context, cl *kgo.Client, rate int) error {
	return produceBatches(ctx, cl, in.Records, rate, in.Encode)
}

// Heartbeats returns one record for each of the repartition topic's
// partitions, with an event time far past every regular record's windows,
// so that every window closes and emits its result. The topology re-keys by
// user with kgo's default partitioner, which the heartbeats' groups are
// chosen by. Their own windows never close, so they emit nothing.
func (in *Input) Heartbeats(partitions int) []*kgo.Record {
	part := kgo.StickyKeyPartitioner(nil).ForTopic("repartition")
	covered := map[int]bool{}
	var out []*kgo.Record
	for k := 0; len(covered) < partitions; k++ {
		g := heartbeatPrefix + strconv.Itoa(k)
		if p := part.Partition(&kgo.Record{Key: []byte(g)}, partitions); !covered[p] {
			covered[p] = true
			out = append(out, &kgo.Record{Topic: in.Topic, Key: []byte(g), Value: fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":0}`, g, aggregateHeartbeat)})
		}
	}
	return out
}

// ProduceHeartbeats writes [Input.Heartbeats].
func (in *Input) ProduceHeartbeats(ctx context.Context, cl *kgo.Client, partitions int) error {
	return produceBatches(ctx, cl, in.Heartbeats(partitions), 0, in.Encode)
}

func produceBatches(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, rate int, encode func([]byte) ([]byte, error)) error {
	start := time.Now()
	for i := 0; i < len(recs); i += produceBatch {
		end := min(i+produceBatch, len(recs))
		batch, err := encoded(recs[i:end], encode)
		if err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			return fmt.Errorf("aggcheck: producing records %d..%d of %d to %s: %w", i, end, len(recs), recs[i].Topic, err)
		}
		for j, r := range batch {
			recs[i+j].Partition, recs[i+j].Offset = r.Partition, r.Offset
		}
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(end) * time.Second / time.Duration(rate))); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
	}
	return nil
}

// encoded returns recs, or copies of them with their values encoded.
func encoded(recs []*kgo.Record, encode func([]byte) ([]byte, error)) ([]*kgo.Record, error) {
	if encode == nil {
		return recs, nil
	}
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		v, err := encode(r.Value)
		if err != nil {
			return nil, fmt.Errorf("aggcheck: encoding %s: %w", r.Value, err)
		}
		out[i] = &kgo.Record{Topic: r.Topic, Key: r.Key, Value: v}
	}
	return out, nil
}

// Window is one window's final result, as the aggregate topology
// emits it under [Config].
type Window struct {
	Key      string  `json:"key"`
	Start    int64   `json:"start"`
	End      int64   `json:"end"`
	Orders   int64   `json:"orders"`
	Total    float64 `json:"total"`
	Smallest float64 `json:"smallest"`
	Biggest  float64 `json:"biggest"`
	Mean     float64 `json:"mean"`
	Final    bool    `json:"final"`
}

// ID names the window: "<group>/<start>".
func (w Window) ID() string { return w.Key + "/" + strconv.FormatInt(w.Start, 10) }

// WindowID is the identity of an aggregate result record, for
// [NewTailBy]: its window, or the whole value if it is not a window result
// (so that only a repeated value counts twice).
func WindowID(r *kgo.Record) []byte {
	var w Window
	if err := json.Unmarshal(r.Value, &w); err != nil {
		return r.Value
	}
	return []byte(w.ID())
}

// DeadLetterSourceID is the identity of a dead letter, for [NewTailBy]: the
// input record it names, "<topic>/<partition>/<offset>", or "" without the
// headers.
func DeadLetterSourceID(r *kgo.Record) []byte {
	h := headers(r)
	if h[pipeline.DeadLetterTopicHeader] == "" {
		return nil
	}
	return []byte(h[pipeline.DeadLetterTopicHeader] + "/" + h[pipeline.DeadLetterPartitionHeader] + "/" + h[pipeline.DeadLetterOffsetHeader])
}

func headers(r *kgo.Record) map[string]string {
	h := make(map[string]string, len(r.Headers))
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}

// Reference is what the aggregate topology must write for an
// input: every window's final result, and every dead letter with its
// reason.
type Reference struct {
	Input       string
	Records     int64 // regular, late and poison records (heartbeats not counted)
	Heartbeats  int64
	windows     map[string]Window
	deadLetters map[string]expectedDeadLetter // by DeadLetterSourceID
}

type expectedDeadLetter struct {
	reason string
	value  []byte
}

// NewReference computes the reference from the input records as
// they are stored, with topics, partitions and offsets: a record that is
// not JSON is a dead letter "malformed-json", one marked late a dead letter
// "late-record", a heartbeat nothing, and any other record is folded into
// its window, in memory.
func NewReference(input string, recs []*kgo.Record) *Reference {
	return newReference(input, recs, tumbling)
}

// newReference sorts the input records into dead letters and regular
// events, and gives the events to windows for the reference's windows.
func newReference(input string, recs []*kgo.Record, windows func([]Event) map[string]Window) *Reference {
	ref := &Reference{Input: input, deadLetters: map[string]expectedDeadLetter{}}
	var evs []Event
	for _, r := range recs {
		src := fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
		var v struct {
			User   string
			TS     int64
			Amount float64
			Late   bool
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			ref.Records++
			ref.deadLetters[src] = expectedDeadLetter{"malformed-json", r.Value}
			continue
		}
		switch {
		case strings.HasPrefix(v.User, heartbeatPrefix):
			ref.Heartbeats++
			continue
		case v.Late:
			ref.Records++
			ref.deadLetters[src] = expectedDeadLetter{"late-record", r.Value}
			continue
		}
		ref.Records++
		evs = append(evs, Event{Group: v.User, TS: v.TS, Amount: v.Amount})
	}
	ref.windows = windows(evs)
	return ref
}

// ReadReference reads input with read_committed up to its last
// stable offset and computes the reference from it.
func ReadReference(ctx context.Context, opts []kgo.Opt, input string) (*Reference, error) {
	recs, err := readTopic(ctx, opts, input, false)
	if err != nil {
		return nil, err
	}
	return NewReference(input, recs), nil
}

// readTopic reads topic with read_committed up to the last stable offsets
// listed first. A topic that does not exist is an error unless mayBeMissing,
// when it reads as empty: a topology that never dead-lettered anything may
// never have created its dead-letter topic.
func readTopic(ctx context.Context, opts []kgo.Opt, topic string, mayBeMissing bool) ([]*kgo.Record, error) {
	byPartition, err := committed.Read(ctx, opts, topic)
	if mayBeMissing && errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return committed.Flatten(byPartition), nil
}

// note keeps the first ten examples of what was not exact.
func note(examples *[]string, s string) {
	if len(*examples) < 10 {
		*examples = append(*examples, s)
	}
}

// shown is a record's key or value as an example quotes it: at most 64
// bytes.
func shown(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	return string(b[:min(len(b), 64)])
}

// Report is the judgment of an aggregate topology's output against
// an [Reference]. Examples holds at most 10 descriptions of what
// was not exact, in the order found.
type Report struct {
	Input           string `json:"input"`
	Output          string `json:"output"`
	DeadLetterTopic string `json:"dead_letter_topic"`
	InputRecords    int64  `json:"input_records"` // regular, late and poison, not heartbeats

	// Windows compares the window results with the reference's windows,
	// by window; a wrong one differs in count, sum, min, max, avg, end,
	// finality or record key: a record counted twice or lost inside it.
	Windows Tally `json:"windows"`
	// DeadLetters compares the dead letters with the reference's, by the
	// input record they name; a wrong one has the wrong reason, topology
	// or value.
	DeadLetters Tally `json:"dead_letters"`

	Examples []string `json:"examples,omitempty"`
}

// Tally is how the records of one kind compare with the reference's items,
// each of which must be read once and be exactly right.
type Tally struct {
	Reference  int64 `json:"reference"`  // items in the reference
	Read       int64 `json:"read"`       // records read
	Exact      int64 `json:"exact"`      // items read once and exactly right
	Twice      int64 `json:"twice"`      // records of an item read before: a reader counts it twice
	Missing    int64 `json:"missing"`    // items never read
	Wrong      int64 `json:"wrong"`      // items whose record differs from the reference
	Unexpected int64 `json:"unexpected"` // records of no item in the reference
}

// OK reports whether every item was read once and exactly right.
func (t Tally) OK() bool {
	return t.Exact == t.Reference && t.Twice+t.Missing+t.Wrong+t.Unexpected == 0
}

// String is the tally on one line, every count named.
func (t Tally) String() string {
	return fmt.Sprintf("%d in the reference, %d read, %d exact, %d twice, %d missing, %d wrong, %d unexpected",
		t.Reference, t.Read, t.Exact, t.Twice, t.Missing, t.Wrong, t.Unexpected)
}

// OK reports whether every window and every dead letter is in the output
// exactly once and exactly right. A reference without windows proves
// nothing, so it is not OK either.
func (r *Report) OK() bool {
	return r.Windows.Reference > 0 && r.Windows.OK() && r.DeadLetters.OK()
}

// MarshalJSON adds "ok" to the fields.
func (r *Report) MarshalJSON() ([]byte, error) {
	type report Report
	return json.Marshal(struct {
		OK bool `json:"ok"`
		*report
	}{r.OK(), (*report)(r)})
}

// String is Summary.
func (r *Report) String() string { return r.Summary() }

// Summary renders the report as one paragraph for people.
func (r *Report) Summary() string {
	verdict := "OK"
	if !r.OK() {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("aggregate %s -> %s, %s: %s: %d input records; windows: %s; dead letters: %s",
		r.Input, r.Output, r.DeadLetterTopic, verdict, r.InputRecords, r.Windows, r.DeadLetters)
	if len(r.Examples) > 0 {
		s += " (e.g. " + strings.Join(r.Examples, "; ") + ")"
	}
	return s
}

// Judge compares window results and dead letters, as read with
// read_committed, with the reference.
func (ref *Reference) Judge(results, deadLetters []*kgo.Record) *Report {
	rep := &Report{Input: ref.Input, InputRecords: ref.Records}
	rep.Windows = tally(ref.windows, results, "window", &rep.Examples, windowDiff)
	rep.DeadLetters = tally(ref.deadLetters, deadLetters, "dead letter of", &rep.Examples, deadLetterDiff)
	return rep
}

// tally compares records with the items of want, matched by the id diff
// gives each record: a record is exact, of an item read before, wrong
// (diff says how) or unexpected (no item, or no id: diff's error). Items
// no record matched are missing.
func tally[W any](want map[string]W, recs []*kgo.Record, what string, examples *[]string, diff func(*kgo.Record) (id string, wrong func(W) string, err error)) Tally {
	t := Tally{Reference: int64(len(want))}
	seen := map[string]bool{}
	for _, r := range recs {
		t.Read++
		id, wrong, err := diff(r)
		if err != nil {
			t.Unexpected++
			note(examples, err.Error())
			continue
		}
		w, ok := want[id]
		switch {
		case !ok:
			t.Unexpected++
			note(examples, what+" "+id+" is not in the reference")
		case seen[id]:
			t.Twice++
			note(examples, what+" "+id+" read twice")
		default:
			if d := wrong(w); d != "" {
				t.Wrong++
				note(examples, what+" "+id+": "+d)
			} else {
				t.Exact++
			}
		}
		seen[id] = true
	}
	for id := range want {
		if !seen[id] {
			t.Missing++
			note(examples, what+" "+id+" missing")
		}
	}
	return t
}

// windowDiff identifies a window result and says how it differs from the
// reference's window.
func windowDiff(r *kgo.Record) (string, func(Window) string, error) {
	var got Window
	if err := json.Unmarshal(r.Value, &got); err != nil {
		return "", nil, fmt.Errorf("result %q is not a window: %w", shown(r.Value), err)
	}
	return got.ID(), func(want Window) string {
		if got == want && string(r.Key) == want.Key {
			return ""
		}
		return fmt.Sprintf("%+v with key %q, the reference %+v", got, shown(r.Key), want)
	}, nil
}

// deadLetterDiff identifies a dead letter by the input record it names and
// says how it differs from the reference's.
func deadLetterDiff(r *kgo.Record) (string, func(expectedDeadLetter) string, error) {
	id := DeadLetterSourceID(r)
	if id == nil {
		return "", nil, fmt.Errorf("dead letter %q names no input record", shown(r.Value))
	}
	h := headers(r)
	return string(id), func(want expectedDeadLetter) string {
		reason, topology := h[pipeline.DeadLetterReasonHeader], h[pipeline.DeadLetterTopologyHeader]
		if reason == want.reason && topology == "aggregate" && string(r.Value) == string(want.value) {
			return ""
		}
		return fmt.Sprintf("reason %q, topology %q, value %q; want %q, %q, %q", reason, topology, shown(r.Value), want.reason, "aggregate", shown(want.value))
	}, nil
}

// Topics names what [Judge] reads.
type Topics struct {
	Input, Output, DeadLetters string
	// Timeout bounds the whole judgment; zero means verify.DefaultTimeout.
	Timeout time.Duration
}

// Judge reads the input, the window results and the dead letters
// with read_committed, each up to the last stable offset listed when its
// read begins, computes the reference from the input and judges. Call it
// once the workers have caught up (and the input has closed every window).
// As with [Run], an error means no judgment could be made; a bad verdict is
// a report whose OK is false.
func Judge(ctx context.Context, opts []kgo.Opt, t Topics) (*Report, error) {
	return judge(ctx, opts, t, NewReference)
}

func judge(ctx context.Context, opts []kgo.Opt, t Topics, reference func(string, []*kgo.Record) *Reference) (*Report, error) {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = verify.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	recs, err := readTopic(ctx, opts, t.Input, false)
	if err != nil {
		return nil, err
	}
	ref := reference(t.Input, recs)
	results, err := readTopic(ctx, opts, t.Output, true)
	if err != nil {
		return nil, err
	}
	dls, err := readTopic(ctx, opts, t.DeadLetters, true)
	if err != nil {
		return nil, err
	}
	rep := ref.Judge(results, dls)
	rep.Output, rep.DeadLetterTopic = t.Output, t.DeadLetters
	return rep, nil
}
