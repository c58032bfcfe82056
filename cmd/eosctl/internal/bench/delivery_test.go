package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTransactionDelivery measures how long a committed transaction of
// n 1 KiB records takes to reach a read_committed consumer that is already
// waiting for it: from EndTxn returning to the consumer's poll holding the
// last record. It is the delivery term of eos end-to-end latency that grows
// with the transaction (BENCHMARKS.md). One op is one transaction.
//
//	go test ./bench -run '^$' -bench TransactionDelivery -benchtime 10x
func BenchmarkTransactionDelivery(b *testing.B) {
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("rtt=%s/records=%d", rtt, n), func(b *testing.B) { benchDelivery(b, rtt, n) })
		}
	}
}

func benchDelivery(b *testing.B, rtt time.Duration, n int) {
	br, err := broker.Start(broker.Config{RTT: rtt})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	ctx := context.Background()
	opts := []kgo.Opt{kgo.SeedBrokers(br.Addrs()...)}
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, 6, -1, nil, "delivery"); err != nil {
		b.Fatal(err)
	}
	p, err := kgo.NewClient(append(opts, kgo.TransactionalID("delivery"), kgo.DefaultProduceTopic("delivery"))...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	c, err := kgo.NewClient(append(opts, kgo.ConsumeTopics("delivery"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	seen := make(chan time.Time, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		total := 0
		for cctx.Err() == nil {
			fs := c.PollFetches(cctx)
			if got := fs.NumRecords(); got > 0 {
				if total += got; total%n == 0 {
					seen <- time.Now()
				}
			}
		}
	}()
	var took time.Duration
	for i := 0; i < b.N; i++ {
		if err := p.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for j := range n {
			p.Produce(ctx, &kgo.Record{Value: datagen.Value(int64(j), time.Now(), 1024)}, nil)
		}
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let the consumer's fetch wait at the LSO
		if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		ended := time.Now()
		took += (<-seen).Sub(ended)
	}
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms-after-EndTxn")
}
