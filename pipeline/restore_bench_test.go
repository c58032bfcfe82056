package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRestore measures how fast a worker restores keyed state: one op
// is one changelog record read and applied. The changelog is written the
// way workers write it (transactions of 5000 records, so the log holds
// commit markers too), b.N records over 6 partitions, keys of 20 bytes
// (1/4 of them distinct, so most records overwrite a key as they do in a
// real changelog), values of 32 bytes; the embedded broker runs in the same
// process, so the rate includes its share of the CPU.
//
//	go test ./pipeline -run '^$' -bench Restore -benchtime 2000000x -count 5
func BenchmarkRestore(b *testing.B) {
	br, err := broker.Start(broker.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	ctx := context.Background()
	opts := []kgo.Opt{kgo.SeedBrokers(br.Addrs()...)}
	const parts = 6
	cfg := Config{App: "rb", Instance: "0", Inputs: []string{"rb-in"}, Output: "rb-out", ClientOpts: opts}
	w, err := New(cfg, &counter{})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := admin.Connect(ctx, 10*time.Second, append(opts, kgo.TransactionalID("rb-writer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	topic := w.state.changelogs[0]
	if _, _, err := admin.EnsureTopic(ctx, cl, topic, parts, nil); err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 32)
	distinct := max(b.N/4, 1)
	for i := 0; i < b.N; {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for end := min(i+5000, b.N); i < end; i++ {
			k := i % distinct
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(k % parts), Key: fmt.Appendf(nil, "key-%015d", k), Value: value}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	states, n, err := w.readChangelogs(ctx, []int32{0, 1, 2, 3, 4, 5}, func(int64) {})
	d := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	keys := 0
	for _, ps := range states {
		keys += ps.stores[0].Len()
	}
	if n != int64(b.N) || keys != distinct {
		b.Fatalf("restored %d records and %d keys, want %d and %d", n, keys, b.N, distinct)
	}
	b.ReportMetric(float64(n)/d.Seconds(), "records/s")
}
