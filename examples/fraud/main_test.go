package main

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/testhook"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The example runs for real: on an embedded broker, with aborted
// transactions, every user's scored orders count 1, 2, ..., n with running
// totals that add up, every order is scored once, every alert is justified
// by the orders before it, and the malformed records are dead letters.
func TestScorerIsExactlyOnce(t *testing.T) {
	b, err := broker.Start(broker.Config{MinSessionTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := admin.Connect(ctx, 10*time.Second, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 5000
	if _, err := datagen.Produce(ctx, cl, datagen.Config{Topic: "orders", Count: n, Size: 100, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("garbage")}, &kgo.Record{Topic: "orders", Value: []byte(`{"seq":1}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	w, err := pipeline.New(pipeline.Config{App: "fraud", Instance: "0", Inputs: []string{"orders"}, Output: "scored", Topology: "fraud",
		CommitInterval: 20 * time.Millisecond, MaxTxnRecords: 500, SessionTimeout: 4 * time.Second, ClientOpts: opts}, Scorer{Alerts: "alerts"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(testhook.WithAbortFraction(wctx, 0.2)) }()
	for zeros := 0; zeros < 2; time.Sleep(100 * time.Millisecond) {
		if ok, err := committed.Check(ctx, opts, committed.Wait{Group: "fraud", Topics: []string{"orders", "fraud-by-user-repartition"}, Outputs: []string{"scored", "alerts", "fraud-dlq"}}); err == nil && ok && w.Stats().Committed.Load() > 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	read := func(topic string) []*kgo.Record {
		rs, err := committed.Read(ctx, opts, topic)
		if err != nil {
			t.Fatal(err)
		}
		return committed.Flatten(rs)
	}
	type scored struct {
		Seq    int64
		User   string
		Amount float64
		Orders int64
		Total  float64
	}
	seen := map[int64]bool{}
	history := map[string][]scored{}
	for _, r := range read("scored") {
		var s scored
		if err := json.Unmarshal(r.Value, &s); err != nil {
			t.Fatal(err)
		}
		if seen[s.Seq] {
			t.Fatalf("order %d scored twice", s.Seq)
		}
		seen[s.Seq] = true
		h := history[s.User]
		prev := 0.0
		if len(h) > 0 {
			prev = h[len(h)-1].Total
		}
		if s.Orders != int64(len(h)+1) || math.Abs(s.Total-(prev+s.Amount)) > 1e-6 || s.User != datagen.User(s.Seq) || s.Amount != datagen.Amount(s.Seq) {
			t.Fatalf("user %s: order %+v after %d orders totalling %v", s.User, s, len(h), prev)
		}
		history[s.User] = append(h, s)
	}
	if len(seen) != n {
		t.Fatalf("%d orders scored, want %d", len(seen), n)
	}
	alerts := read("alerts")
	for _, r := range alerts {
		var a struct {
			User    string
			Seq     int64
			Average float64
		}
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Fatal(err)
		}
		h := history[a.User]
		i := 0
		for i < len(h) && h[i].Seq != a.Seq {
			i++
		}
		if i < 5 || i == len(h) || math.Abs(a.Average-h[i-1].Total/float64(i)) > 1e-6 || h[i].Amount <= 1.8*a.Average {
			t.Fatalf("alert %s not justified by the user's orders", r.Value)
		}
	}
	if dl := read("fraud-dlq"); len(dl) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dl))
	}
	t.Logf("%d orders scored exactly once, %d alerts, %d commits, %d aborts", n, len(alerts), w.Stats().Committed.Load(), w.Stats().Aborted.Load())
}
