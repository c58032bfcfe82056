package topologies

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
)

// discard is an Emitter that keeps only the last output.
type discard struct{ last pipeline.Output }

func (d *discard) Emit(o pipeline.Output) { d.last = o }

// BenchmarkAggregateStageOne is the per-record CPU cost of the aggregate's
// first stage on a datagen record: parse the JSON, evaluate group_by, time
// and the aggregations, and fold the values into the transaction's partial
// result of the record's group and pane, flushed every 10,000 records as a
// commit would. The second stage needs a worker's state and is measured by
// BenchmarkTopologyThroughput.
//
//	go test ./topologies -run '^$' -bench AggregateStageOne -benchmem
func BenchmarkAggregateStageOne(b *testing.B) {
	cfg := filepath.Join(b.TempDir(), "agg.yaml")
	body := "group_by: user\ntime: ts\nwindow: {size: 1s, grace: 5s}\naggregations: {orders: count(), total: sum(amount), biggest: max(amount)}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	t, err := NewAggregate(cfg)
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]pipeline.Record, 1024)
	for i := range recs {
		recs[i] = pipeline.Record{Topic: "in", Offset: int64(i), Value: datagen.Value(int64(i), time.UnixMilli(1_700_000_000_000+int64(i)), 100)}
	}
	var out discard
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := t.Process(ctx, &recs[i%len(recs)], &out); err != nil {
			b.Fatal(err)
		}
		if i%10_000 == 9_999 {
			if err := t.Flush(ctx, &out); err != nil {
				b.Fatal(err)
			}
		}
	}
}
