package topologies

import (
	"cmp"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/internal/testhook"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tenv is one test's embedded broker, with workers running in-process: the
// real worker and a real Kafka-protocol broker over TCP, without the cost of
// child processes (the e2e package runs the binary).
type tenv struct {
	// abortFraction of the transactions of the workers run aborts on
	// purpose (internal/testhook).
	abortFraction float64
	t             *testing.T
	b             testbroker.Cluster
	opts          []kgo.Opt
	cl            *kgo.Client
	ctx           context.Context
	// wire, if set, makes runAggregate write its events in a wire format
	// with this writer (Avro or JSON Schema; poison pills as they are,
	// which is not the wire format) and run the aggregate with its format
	// key against registry.
	wire     wireWriter
	registry SchemaRegistry
}

func newTEnv(t *testing.T) *tenv {
	t.Helper()
	return newTEnvWith(t, broker.Config{})
}

// newTEnvWith is newTEnv with a broker configured by cfg.
func newTEnvWith(t *testing.T, cfg broker.Config) *tenv {
	t.Helper()
	cfg.MinSessionTimeout = time.Second
	return newTEnvOn(t, testbroker.Start(t, cfg))
}

// newTEnvOn is newTEnvWith on a cluster the test started itself.
func newTEnvOn(t *testing.T, b testbroker.Cluster) *tenv {
	t.Helper()
	conn := testbroker.Connect(t, b, 5*time.Minute)
	return &tenv{t: t, b: b, opts: conn.Opts, cl: conn.Client, ctx: conn.Ctx}
}

// produce writes rs to topic (created with parts partitions) in order, in
// chunks of 250 records every 5ms so that a worker running meanwhile sees a
// stream and makes many small transactions; on return every record has its
// partition and offset.
func (e *tenv) produce(topic string, parts int32, rs []*kgo.Record) {
	e.t.Helper()
	e.topic(topic, parts)
	for i := 0; i < len(rs); i += 250 {
		chunk := rs[i:min(i+250, len(rs))]
		for _, r := range chunk {
			r.Topic = topic
		}
		if err := e.cl.ProduceSync(e.ctx, chunk...).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// topic creates topic with parts partitions.
func (e *tenv) topic(topic string, parts int32) {
	e.t.Helper()
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, topic, parts, nil); err != nil {
		e.t.Fatal(err)
	}
}

// run runs a worker of tr for app over in, calls feed (which produces the
// input, or nil), and waits until the group has consumed everything in in
// and topics (any repartition topic) twice in a row; then it stops the
// worker cleanly.
func (e *tenv) run(app, topology string, tr pipeline.Transform, in, out string, topics []string, mod func(*pipeline.Config), feed func()) *pipeline.Worker {
	e.t.Helper()
	cfg := pipeline.Config{App: app, Instance: "0", Inputs: []string{in}, Output: out, Topology: topology,
		CommitInterval: 20 * time.Millisecond, SessionTimeout: 4 * time.Second, ClientOpts: e.opts,
		// A topic just created may not be in every broker's metadata yet on
		// Apache Kafka.
		InputWait: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	w, err := pipeline.New(cfg, tr)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testhook.WithAbortFraction(e.ctx, e.abortFraction))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if feed != nil {
		feed()
	}
	// The topics it writes are waited on too, for their last transaction's
	// markers: the test reads them once the worker stops.
	wait := committed.Wait{Group: app, Topics: append([]string{in}, topics...), Outputs: []string{cfg.Output, cmp.Or(cfg.DLQ, app+"-dlq")}}
	for _, topic := range cfg.Outputs {
		wait.Outputs = append(wait.Outputs, topic)
	}
	zeros := 0
	for zeros < 2 {
		select {
		case err := <-done:
			e.t.Fatalf("worker stopped early: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if ok, err := committed.Check(e.ctx, e.opts, wait); err == nil && ok && w.Stats().Committed.Load() > 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	cancel()
	if err := <-done; err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *tenv) read(topic string) []*kgo.Record {
	e.t.Helper()
	rs, err := committed.Read(e.ctx, e.opts, topic)
	if err != nil {
		e.t.Fatal(err)
	}
	return committed.Flatten(rs)
}

func headers(r *kgo.Record) map[string]string {
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return h
}

// deadLetters reads the dead-letter topic and checks that every dead letter
// names topology and is there once; it returns them by "partition/offset"
// of their source, with their reasons.
func (e *tenv) deadLetters(dlq, topology, source string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, r := range e.read(dlq) {
		h := headers(r)
		if h[pipeline.DeadLetterTopologyHeader] != topology || h[pipeline.DeadLetterTopicHeader] != source || h[pipeline.DeadLetterErrorHeader] == "" {
			e.t.Fatalf("dead letter with headers %v", h)
		}
		at := h[pipeline.DeadLetterPartitionHeader] + "/" + h[pipeline.DeadLetterOffsetHeader]
		if _, dup := out[at]; dup {
			e.t.Fatalf("dead letter of %s[%s] written twice", source, at)
		}
		out[at] = h[pipeline.DeadLetterReasonHeader]
	}
	return out
}

func at(r *kgo.Record) string {
	return strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("output %q is not JSON: %v", b, err)
	}
	return m
}

// produceTransactions writes rs to topic (created with parts partitions) in
// transactions of batch records, aborting those for which abort(batch
// number) is true, and returns the indexes of the records committed; every
// record has its partition and offset on return.
func (e *tenv) produceTransactions(topic string, parts int32, rs []*kgo.Record, batch int, abort func(int) bool) []int {
	e.t.Helper()
	e.topic(topic, parts)
	p, err := kgo.NewClient(append(slices.Clip(e.opts), kgo.TransactionalID(topic+"-producer"), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer p.Close()
	var kept []int
	for b := 0; b*batch < len(rs); b++ {
		if err := p.BeginTransaction(); err != nil {
			e.t.Fatal(err)
		}
		from, to := b*batch, min((b+1)*batch, len(rs))
		if err := p.ProduceSync(e.ctx, rs[from:to]...).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
		commit := !abort(b)
		if err := p.EndTransaction(e.ctx, kgo.TransactionEndTry(commit)); err != nil {
			e.t.Fatal(err)
		}
		for i := from; commit && i < to; i++ {
			kept = append(kept, i)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return kept
}

// aborting makes the workers run starts abort fraction f of their
// transactions on purpose; it returns no Config change.
func aborting(e *tenv, f float64) func(*pipeline.Config) {
	e.abortFraction = f
	return nil
}

// wireWriter encodes a record's fields in the Confluent wire format.
type wireWriter interface {
	encode(t *testing.T, v map[string]any) []byte
}

// checkOutputs reads out and checks that each record there (named by the
// source partition/offset in its idempotency key) is there once and keyed
// by its user field, and that the values decode makes of them equal want
// exactly; decode fails the test on a value it cannot read.
func (e *tenv) checkOutputs(out string, want map[string]map[string]any, decode func(k string, r *kgo.Record) map[string]any) {
	e.t.Helper()
	got := map[string]map[string]any{}
	for _, r := range e.read(out) {
		src := strings.Split(headers(r)[pipeline.IdempotencyKeyHeader], "/")
		k := src[1] + "/" + src[2]
		if _, dup := got[k]; dup {
			e.t.Fatalf("output of %s written twice", k)
		}
		v := decode(k, r)
		if string(r.Key) != v["user"] {
			e.t.Fatalf("output of %s has key %q, want its user %v", k, r.Key, v["user"])
		}
		got[k] = v
	}
	if len(got) != len(want) {
		e.t.Fatalf("%d output records, the reference has %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; !reflect.DeepEqual(g, w) {
			e.t.Fatalf("output of %s:\n got  %v\n want %v", k, g, w)
		}
	}
}
