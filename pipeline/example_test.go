package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A worker that upper-cases every record, on an embedded broker: what a
// program built on eos does, from start to the output a read_committed
// consumer sees.
func Example() {
	b, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	ctx := context.Background()
	produce(ctx, opts, "words", "exactly", "once")

	upper := pipeline.TransformFunc(func(ctx context.Context, in *pipeline.Record, out pipeline.Emitter) error {
		out.Emit(pipeline.Output{Key: in.Key, Value: []byte(strings.ToUpper(string(in.Value)))})
		return nil
	})
	var consumed atomic.Int64
	caughtUp := make(chan struct{})
	w, err := pipeline.New(pipeline.Config{
		App: "upper", Instance: "0", // transactional.id "upper-0", fixed per instance
		Inputs: []string{"words"}, Output: "shouted",
		CommitInterval: 20 * time.Millisecond, SessionTimeout: time.Second,
		ClientOpts: opts,
		OnEvent: func(ev pipeline.Event) {
			if ev.Kind == pipeline.EventCommitted && consumed.Add(int64(ev.Consumed)) == 2 {
				close(caughtUp)
			}
		},
	}, upper)
	if err != nil {
		log.Fatal(err) // an *eos.ConfigError: nothing has started
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	<-caughtUp
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println(readCommitted(ctx, opts, "shouted", 2))
	// Output: [EXACTLY ONCE]
}

// counter counts the records of each key in a keyed state store. The
// store's changes commit in the same transaction as the outputs and the
// consumed offsets, so a count is never lost or counted twice across
// crashes and rebalances.
type counter struct{}

// Declare names the store; the worker creates its compacted changelog.
func (counter) Declare() pipeline.Declaration {
	return pipeline.Declaration{Stores: []string{"counts"}}
}

func (counter) Process(ctx context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	s := in.Store("counts")
	v, _ := s.Get(string(in.Key))
	n, _ := strconv.Atoi(string(v))
	n++
	s.Put(string(in.Key), []byte(strconv.Itoa(n)))
	out.Emit(pipeline.Output{Key: in.Key, Value: fmt.Appendf(nil, "%s=%d", in.Key, n)})
	return nil
}

// A stateful Transform: a running count per key.
func Example_stateful() {
	// copyThrough runs the Transform as Example does (see example_test.go).
	fmt.Println(copyThrough(counter{}, "a", "b", "a"))
	// Output: [a=1 b=1 a=2]
}

// summer holds a running sum back across the records of a transaction and
// emits it once, just before the commit: a combiner. Discard forgets what
// was held when the transaction will not commit, since those records are
// processed again.
type summer struct{ sum int }

func (s *summer) Process(ctx context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	n, err := strconv.Atoi(string(in.Value))
	if err != nil {
		return pipeline.DeadLetter("not-a-number", err) // to the dead-letter topic, once
	}
	s.sum += n
	return nil
}

func (s *summer) Flush(ctx context.Context, out pipeline.Emitter) error {
	if s.sum != 0 {
		out.Emit(pipeline.Output{Value: []byte(strconv.Itoa(s.sum))})
	}
	s.sum = 0
	return nil
}

func (s *summer) Discard() { s.sum = 0 }

// A Flusher: one output per transaction, the sum of its records. How many
// transactions there are depends on timing; the sums always add up to the
// input's total, once.
func Example_flusher() {
	total := 0
	for _, v := range copyThrough(&summer{}, "1", "2", "3", "4") {
		n, _ := strconv.Atoi(v)
		total += n
	}
	fmt.Println(total)
	// Output: 10
}

// toCelsius converts Fahrenheit readings. Its Process depends on the
// record alone, so it is a Forker: each fork gets its own scratch buffer,
// and the worker processes large polls on several goroutines.
type toCelsius struct{ buf []byte }

func (t *toCelsius) Fork() pipeline.Transform { return &toCelsius{} }

func (t *toCelsius) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	f, err := strconv.ParseFloat(string(in.Value), 64)
	if err != nil {
		return pipeline.DeadLetter("not-a-number", err)
	}
	t.buf = strconv.AppendFloat(t.buf[:0], (f-32)*5/9, 'f', 1, 64)
	out.Emit(pipeline.Output{Key: in.Key, Value: append([]byte(nil), t.buf...)})
	return nil
}

// A Forker's outputs come out in offset order, whichever goroutine
// processed each record.
func Example_forker() {
	var in []string
	for f := range 1000 {
		in = append(in, strconv.Itoa(f))
	}
	out := copyThrough(&toCelsius{}, in...)
	fmt.Println(len(out), out[32], out[212], out[999])
	// Output: 1000 0.0 100.0 537.2
}

// copyThrough runs tr over values (keyed by themselves, one partition) on
// an embedded broker until they are all committed, and returns the output
// as a read_committed consumer sees it.
func copyThrough(tr pipeline.Transform, values ...string) []string {
	b, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	ctx := context.Background()
	produce(ctx, opts, "in", values...)
	var consumed atomic.Int64
	caughtUp := make(chan struct{})
	w, err := pipeline.New(pipeline.Config{App: "ex", Instance: "0", Inputs: []string{"in"}, Output: "out",
		CommitInterval: 20 * time.Millisecond, SessionTimeout: time.Second, ClientOpts: opts,
		OnEvent: func(ev pipeline.Event) {
			if ev.Kind == pipeline.EventCommitted && consumed.Add(int64(ev.Consumed)) == int64(len(values)) {
				close(caughtUp)
			}
		}}, tr)
	if err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	<-caughtUp
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// A Flusher's outputs are fewer than its inputs: read what is there.
	return readCommitted(ctx, opts, "out", 0)
}

// produce creates topic with one partition and writes values to it, each
// keyed by itself.
func produce(ctx context.Context, opts []kgo.Opt, topic string, values ...string) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		log.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}
}

// readCommitted returns the values of topic as a read_committed consumer
// sees them: at least want of them (0: whatever is committed), in order.
func readCommitted(ctx context.Context, opts []kgo.Opt, topic string, want int) []string {
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	end, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		log.Fatal(err)
	}
	var last int64
	end.Each(func(o kadm.ListedOffset) { last = o.Offset })
	var got []string
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			log.Fatalf("reading %s: %d records after 10s", topic, len(got))
		}
		var at int64
		fs.EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			at = r.Offset + 1
		})
		// The end offset counts the commit markers too: stop at the last
		// record before it, or when a wanted count is reached.
		if want > 0 && len(got) >= want || want == 0 && at >= last-1 {
			return got
		}
	}
}

// Validate checks settings before there is a Transform to run, and its error
// names the setting in the library's terms, which a program maps to its own
// (a flag, a file's key).
func ExampleConfig_Validate() {
	cfg := pipeline.Config{App: "orders", Instance: "pod/1", Inputs: []string{"orders"}, Output: "orders-clean"}
	err := cfg.Validate()
	var ce *eos.ConfigError
	fmt.Println(errors.Is(err, eos.ErrConfig), errors.As(err, &ce) && ce.Setting == "pipeline.Config.Instance")
	// Output: true true
}
