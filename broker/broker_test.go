package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStatePersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addrs()[0]
	ctx := context.Background()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t"), kgo.AllowAutoTopicCreation())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b, err = Start(Config{DataDir: dir, Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, _ = kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("t"))
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs := cl.PollFetches(pctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("after restart got %d records, want the one written before", len(recs))
	}
}

func TestRTTHoldsBackEveryResponse(t *testing.T) {
	const rtt = 40 * time.Millisecond
	b, err := Start(Config{RTT: rtt})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, _ := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil { // warm the connection
		t.Fatal(err)
	}
	for range 3 {
		start := time.Now()
		if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < rtt {
			t.Fatalf("a metadata round trip took %s, less than the injected %s", d, rtt)
		}
	}
}

// The lost response must be lost after the broker applied the request: a
// transaction whose EndTxn response is dropped is committed nonetheless.
func TestDroppedEndTxnResponseIsAppliedButLost(t *testing.T) {
	faults := &Faults{}
	b, err := Start(Config{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	adm, _ := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 1, -1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	p, _ := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.TransactionalID("x"), kgo.DefaultProduceTopic("t"), kgo.RequestRetries(0))
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte("committed")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	faults.DropResponses(kmsg.EndTxn.Int16(), 1)
	endErr := p.EndTransaction(ctx, kgo.TryCommit)
	if faults.Dropped(kmsg.EndTxn.Int16()) != 1 {
		t.Fatalf("dropped %d EndTxn responses, want 1 (EndTransaction returned %v)", faults.Dropped(kmsg.EndTxn.Int16()), endErr)
	}
	c, _ := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("t"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs := c.PollFetches(pctx)
	if err := fs.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if n := len(fs.Records()); n != 1 {
		t.Fatalf("read_committed sees %d records after the lost EndTxn response, want 1: the broker must have applied the commit", n)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{{Listen: "nonsense"}, {Listen: "127.0.0.1:99999"}, {Nodes: -1}, {RTT: -time.Second}} {
		if b, err := Start(cfg); err == nil {
			b.Close()
			t.Errorf("Start(%+v) succeeded, want an error", cfg)
		}
	}
}
