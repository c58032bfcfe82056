package topologies_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// withName is a custom processor that appends its customer's name to each
// order, keyed by customer id: it embeds a Table, which makes it a
// pipeline.Starter the worker keeps in step with its assignment, and looks
// each record's key up in Process.
type withName struct{ *topologies.Table }

func (w withName) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	row, ok, err := w.Get(string(in.Key)) // a key of a partition not held: a dead letter
	if err != nil {
		return err
	}
	if !ok {
		return pipeline.DeadLetter("join-missing", fmt.Errorf("no customer %s", in.Key))
	}
	out.Emit(pipeline.Output{Key: in.Key, Value: fmt.Appendf(nil, "%s by %s", in.Value, row)})
	return nil
}

// A Table in a custom Transform, on an embedded broker: the customers
// topic is read to its end before the first order is processed, and each
// order gets the row its customer has then.
func ExampleTable() {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics("orders-named"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	// Co-partitioned: the same partition count, both keyed by customer id.
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, "customers", "orders"); err != nil {
		log.Fatal(err)
	}
	rec := func(topic, k, v string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v)}
	}
	err = cl.ProduceSync(ctx, rec("customers", "c1", "Ada"), rec("customers", "c2", "Bob"), rec("customers", "c1", "Ada L."),
		rec("orders", "c1", "3 apples"), rec("orders", "c2", "1 pear")).FirstErr()
	if err != nil {
		log.Fatal(err)
	}

	table, err := topologies.NewTable("customers", "")
	if err != nil {
		log.Fatal(err)
	}
	w, err := pipeline.New(pipeline.Config{App: "named", Instance: "0", Inputs: []string{"orders"}, Output: "orders-named", ClientOpts: opts}, withName{table})
	if err != nil {
		log.Fatal(err)
	}
	wctx, stop := context.WithTimeout(ctx, time.Minute)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var got []string
	for len(got) < 2 {
		cl.PollFetches(wctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	sort.Strings(got)
	fmt.Println(got[0])
	fmt.Println(got[1])
	// Output:
	// 1 pear by Bob
	// 3 apples by Ada L.
}
