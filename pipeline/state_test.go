package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// counter counts records per key in the store "counts" and emits the new
// count; a record whose value is "bad" is dead-lettered after it has already
// changed the state and emitted, which the worker must undo.
type counter struct {
	failAt  atomic.Int64 // a plain error (a crash) when this many records were processed; 0: never
	handled atomic.Int64
}

func (c *counter) Declare() Declaration { return Declaration{Stores: []string{"counts"}} }

func (c *counter) Process(_ context.Context, in *Record, out Emitter) error {
	if n := c.handled.Add(1); n == c.failAt.Load() {
		return errors.New("simulated crash")
	}
	st := in.Store("counts")
	k := string(in.Key)
	n := 0
	if v, ok := st.Get(k); ok {
		n, _ = strconv.Atoi(string(v))
	}
	n++
	v := []byte(strconv.Itoa(n))
	st.Put(k, v)
	out.Emit(Output{Key: in.Key, Value: v})
	if string(in.Value) == "bad" {
		st.Put("poisoned", []byte("yes"))
		return DeadLetter("bad-value", fmt.Errorf("value %q", in.Value))
	}
	return nil
}

type stateEnv struct {
	t      *testing.T
	b      *broker.Broker
	faults *broker.Faults
	opts   []kgo.Opt
	cl     *kgo.Client
	ctx    context.Context
}

func newStateEnv(t *testing.T) *stateEnv {
	t.Helper()
	f := &broker.Faults{}
	b := testbroker.Embedded(t, broker.Config{Faults: f, MinSessionTimeout: time.Second})
	conn := testbroker.Connect(t, b, 2*time.Minute)
	return &stateEnv{t: t, b: b, faults: f, opts: conn.Opts, cl: conn.Client, ctx: conn.Ctx}
}

// produce writes records with the given keys and values to a new topic, in
// order, in chunks of 100 every 5ms so that workers running meanwhile see a
// stream, and returns a channel that yields, once everything is written, the
// partition each key went to.
func (e *stateEnv) produce(topic string, parts int32, keys, values []string) <-chan map[string]int32 {
	e.t.Helper()
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, topic, parts, nil); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan map[string]int32, 1)
	go func() {
		where := map[string]int32{}
		for i := 0; i < len(keys); i += 100 {
			var rs []*kgo.Record
			for j := i; j < min(i+100, len(keys)); j++ {
				rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(keys[j]), Value: []byte(values[j])})
			}
			if err := e.cl.ProduceSync(e.ctx, rs...).FirstErr(); err != nil {
				e.t.Error(err)
				break
			}
			for _, r := range rs {
				where[string(r.Key)] = r.Partition
			}
			time.Sleep(5 * time.Millisecond)
		}
		done <- where
	}()
	return done
}

func (e *stateEnv) worker(tr Transform, mod func(*Config)) *Worker {
	e.t.Helper()
	cfg := Config{App: "st", Instance: "0", Inputs: []string{"st-in"}, Output: "st-out", Topology: "counter",
		CommitInterval: 20 * time.Millisecond, MaxTxnRecords: 500, SessionTimeout: 4 * time.Second, ClientOpts: e.opts}
	if mod != nil {
		mod(&cfg)
	}
	w, err := New(cfg, tr)
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

// keyed returns n keys and values for produce: key k(i mod keys) and
// value v(i), so that each of keys keys gets about n/keys records.
func keyed(n, keys int) (ks, vs []string) {
	for i := range n {
		ks = append(ks, "k"+strconv.Itoa(i%keys))
		vs = append(vs, "v"+strconv.Itoa(i))
	}
	return ks, vs
}

// written returns a done function for run that turns true once produce's
// channel has yielded (everything is written), and stays true.
func written(produced <-chan map[string]int32) func() bool {
	done := false
	return func() bool {
		if !done {
			select {
			case <-produced:
				done = true
			default:
			}
		}
		return done
	}
}

// run runs w until its group has consumed everything and done is true, or
// until it fails.
func (e *stateEnv) run(w *Worker, done func() bool) error {
	ctx, cancel := context.WithCancel(e.ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	defer cancel()
	for {
		select {
		case err := <-stopped:
			return err
		case <-time.After(20 * time.Millisecond):
		}
		if lag, err := inspect.Lag(e.ctx, kadm.NewClient(e.cl), w.cfg.App, w.lay.consume...); err == nil && lag.TotalLag == 0 && done() {
			cancel()
			return <-stopped
		}
	}
}

// lastCommitted records, on the worker's goroutine, the state after each
// commit.
type lastCommitted struct {
	mu sync.Mutex
	w  *Worker
	s  map[int32]map[string]string
}

func (l *lastCommitted) hook(ev Event) {
	if ev.Kind != EventCommitted {
		return
	}
	s := l.w.state.snapshot("counts", l.w.state.published())
	l.mu.Lock()
	l.s = s
	l.mu.Unlock()
}

func (l *lastCommitted) get() map[int32]map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s
}

// restoredState captures the state the first restore of each partition of w
// publishes.
func restoredState(w *Worker) func() map[int32]map[string]string {
	var mu sync.Mutex
	got := map[int32]map[string]string{}
	w.test = &testHooks{onRestored: func(ps map[int32]*partitionState) {
		s := w.state.snapshot("counts", ps)
		mu.Lock()
		for p, m := range s {
			if _, ok := got[p]; !ok {
				got[p] = m
			}
		}
		mu.Unlock()
	}}
	return func() map[int32]map[string]string {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(got)
	}
}

func sameState(a, b map[int32]map[string]string) bool {
	return maps.EqualFunc(a, b, func(x, y map[string]string) bool { return maps.Equal(x, y) })
}

// Keyed state is exactly-once through a crash mid-transaction, aborted
// transactions, EndTxn responses lost after the broker committed (the worker
// re-initialises and restores), and dead letters that had already changed
// the state: every key's emitted counts, read with read_committed, are
// exactly 1, 2, ..., n in order; the restored state equals the state last
// committed before each stop; every changelog record sits in the partition
// of its key's input partition; each bad record is in the dead-letter topic
// once, with its headers.
func TestKeyedStateIsExactlyOnceThroughCrashesAbortsAndLostCommits(t *testing.T) {
	const n, keys = 30_000, 40
	e := newStateEnv(t)
	var ks, vs []string
	want := map[string][]int{}
	bad := map[int]bool{}
	for i := range n {
		k := "k" + strconv.Itoa(i*7%keys)
		ks = append(ks, k)
		if i%211 == 5 {
			vs = append(vs, "bad")
			bad[i] = true
			continue
		}
		vs = append(vs, "v"+strconv.Itoa(i))
		want[k] = append(want[k], len(want[k])+1)
	}
	produced := e.produce("st-in", 3, ks, vs)

	// 1: a crash (a plain Transform error) two thirds of the way in.
	c := &counter{}
	c.failAt.Store(n / 3)
	a := e.worker(c, nil)
	la := &lastCommitted{w: a}
	a.cfg.OnEvent = la.hook
	if err := e.run(a, func() bool { return false }); err == nil || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("the first worker should have stopped on the simulated crash, got %v", err)
	}
	if a.stats.Committed.Load() == 0 {
		t.Fatal("the first worker committed nothing before the crash")
	}

	// 2: restart; aborts on purpose, and three EndTxn responses lost.
	c.failAt.Store(0)
	b := e.worker(c, nil)
	b.test = &testHooks{abortFraction: 0.2}
	lb := &lastCommitted{w: b}
	b.cfg.OnEvent = lb.hook
	restoredB := restoredState(b)
	var where map[string]int32
	go func() {
		for range 3 {
			time.Sleep(150 * time.Millisecond)
			e.faults.DropResponses(kmsg.EndTxn.Int16(), 1)
		}
	}()
	if err := e.run(b, func() bool {
		if where == nil {
			select {
			case where = <-produced:
			default:
			}
		}
		return where != nil && e.faults.Dropped(kmsg.EndTxn.Int16()) == 3
	}); err != nil {
		t.Fatal(err)
	}
	// kgo retries some lost EndTxn responses by itself; at least one
	// must have left the outcome unknown and made the worker reopen.
	if got := e.faults.Dropped(kmsg.EndTxn.Int16()); got != 3 || b.stats.Reinits.Load() < 1 {
		t.Fatalf("%d EndTxn responses dropped and %d re-initialisations, want 3 and at least 1", got, b.stats.Reinits.Load())
	}
	if !sameState(restoredB(), la.get()) {
		t.Fatalf("state restored after the crash differs from the state last committed before it:\nrestored  %v\ncommitted %v", restoredB(), la.get())
	}

	// 3: restart once more; the restored state is the final one.
	cw := e.worker(c, nil)
	restoredC := restoredState(cw)
	if err := e.run(cw, func() bool { return len(restoredC()) == 3 }); err != nil {
		t.Fatal(err)
	}
	final := lb.get()
	if !sameState(restoredC(), final) {
		t.Fatalf("state restored after a clean stop differs from the state last committed:\nrestored  %v\ncommitted %v", restoredC(), final)
	}
	for k, counts := range want {
		if got := final[where[k]][k]; got != strconv.Itoa(len(counts)) {
			t.Fatalf("final state of %s is %q, want %d", k, got, len(counts))
		}
	}
	for p, m := range final {
		if _, ok := m["poisoned"]; ok {
			t.Fatalf("a dead-lettered record's state change survived in partition %d", p)
		}
	}

	out, err := committed.Read(e.ctx, e.opts, "st-out")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int{}
	for _, r := range committed.Flatten(out) {
		v, _ := strconv.Atoi(string(r.Value))
		got[string(r.Key)] = append(got[string(r.Key)], v)
	}
	for k, w := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Fatalf("counts emitted for %s: %v, want 1..%d exactly once each", k, got[k], len(w))
		}
	}

	cl, err := committed.Read(e.ctx, e.opts, "st-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	for p, rs := range cl {
		for _, r := range rs {
			if string(r.Key) == "poisoned" {
				// A dead letter's change is undone but its key stays
				// dirty: at most a tombstone may reach the changelog.
				if r.Value != nil {
					t.Fatalf("a dead-lettered record's state change reached the changelog: %q", r.Value)
				}
				continue
			}
			if where[string(r.Key)] != p {
				t.Fatalf("changelog record for %s is in partition %d, its input partition is %d", r.Key, p, where[string(r.Key)])
			}
		}
	}

	dlq, err := committed.Read(e.ctx, e.opts, "st-dlq")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range committed.Flatten(dlq) {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if h[DeadLetterReasonHeader] != "bad-value" || h[DeadLetterTopicHeader] != "st-in" || h[DeadLetterTopologyHeader] != "counter" ||
			h[DeadLetterErrorHeader] != `value "bad"` || string(r.Value) != "bad" {
			t.Fatalf("dead letter with headers %v and value %q", h, r.Value)
		}
		seen[h[DeadLetterPartitionHeader]+"/"+h[DeadLetterOffsetHeader]]++
	}
	if len(seen) != len(bad) {
		t.Fatalf("%d distinct dead letters, want %d", len(seen), len(bad))
	}
	for src, cnt := range seen {
		if cnt != 1 {
			t.Fatalf("dead letter of %s written %d times", src, cnt)
		}
	}
	t.Logf("%d records, %d keys, %d dead letters; second worker: %d commits, %d aborts, %d re-initialisations, %d changelog records restored",
		n, keys, len(bad), b.stats.Committed.Load(), b.stats.Aborted.Load(), b.stats.Reinits.Load(), b.stats.Restored.Load())
}

func TestDeclarationErrors(t *testing.T) {
	base := Config{App: "a", Instance: "0", Inputs: []string{"in"}, Output: "out"}
	for name, tc := range map[string]struct {
		mod func(*Config)
		d   Declaration
	}{
		"stores with two inputs":  {func(c *Config) { c.Inputs = []string{"in", "in2"} }, Declaration{Stores: []string{"s"}}},
		"store declared twice":    {nil, Declaration{Stores: []string{"s", "s"}}},
		"bad store name":          {nil, Declaration{Stores: []string{"a/b"}}},
		"dlq is the input":        {func(c *Config) { c.DLQ = "in" }, Declaration{}},
		"output is the input":     {nil, Declaration{Outputs: map[string]string{"x": "in"}}},
		"output mapped twice":     {func(c *Config) { c.Outputs = map[string]string{"x": "t1"} }, Declaration{Outputs: map[string]string{"x": "t2"}}},
		"repartition name in use": {nil, Declaration{Repartition: "x", Outputs: map[string]string{"x": "t"}}},
		"changelog is the output": {func(c *Config) { c.Output = "a-s-changelog" }, Declaration{Stores: []string{"s"}}},
	} {
		cfg := base
		if tc.mod != nil {
			tc.mod(&cfg)
		}
		if _, err := New(cfg, declared{tc.d}); !errors.As(err, new(*eos.ConfigError)) {
			t.Errorf("%s: got %v, want an *eos.ConfigError", name, err)
		}
	}
	w, err := New(base, declared{Declaration{Stores: []string{"s"}, Repartition: "by-user", Outputs: map[string]string{"alerts": "al", "copy": "out"}}})
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.DLQ != "a-dlq" || w.lay.repartition != "a-by-user-repartition" || w.state.topic != "a-by-user-repartition" ||
		w.lay.changelogs[0] != "a-s-changelog" || w.lay.outputs["by-user"] != "a-by-user-repartition" || len(w.lay.consume) != 2 {
		t.Fatalf("layout %+v, dlq %s", w.lay, w.cfg.DLQ)
	}
}

type declared struct{ d Declaration }

func (d declared) Declare() Declaration                          { return d.d }
func (declared) Process(context.Context, *Record, Emitter) error { return nil }
