package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// readAll reads topic from the start to its end offsets with read_committed
// and calls fn for each data record.
func readAll(t *testing.T, e *env, topic string, fn func(*kgo.Record)) {
	t.Helper()
	ends, err := kadm.NewClient(e.cl).ListEndOffsets(e.ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	c, err := kgo.NewClient(append(e.opts, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	for len(want) > 0 {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v (left: %v)", topic, ctx.Err(), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				fn(r)
			}
			if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
				delete(want, r.Partition)
			}
		})
	}
}

// Every output record carries an idempotency key that names its source
// record, the same on every attempt: after crashes and aborted
// transactions the key of each output record still points at the input
// record with the same key, at output index 0 for passthrough.
func TestOutputIdempotencyKeysNameTheirSourceRecord(t *testing.T) {
	const n = 30_000
	e := newEnv(t, broker.Config{})
	produced := e.produceAsync("idem-in", n, 3, 15_000)
	for i := range 2 {
		e.worker("idem", i, "idem-in", "idem-out", "--test-abort-fraction", "0.3")
	}
	time.Sleep(800 * time.Millisecond)
	e.Worker("idem-0").Kill()
	e.worker("idem", 0, "idem-in", "idem-out")
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("idem", time.Minute, "idem-in")
	e.stop()

	source := map[string]string{} // "topic/partition/offset" -> key
	readAll(t, e, "idem-in", func(r *kgo.Record) {
		source[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = string(r.Key)
	})
	seen := map[string]bool{}
	readAll(t, e, "idem-out", func(r *kgo.Record) {
		var id string
		for _, h := range r.Headers {
			if h.Key == pipeline.IdempotencyKeyHeader {
				id = string(h.Value)
			}
		}
		cut := strings.LastIndexByte(id, '/')
		if cut < 0 || id[cut+1:] != "0" {
			t.Fatalf("output record %q has idempotency key %q; want <topic>/<partition>/<offset>/0", r.Key, id)
		}
		if got := source[id[:cut]]; got != string(r.Key) {
			t.Fatalf("idempotency key %q names input key %q, but the output record's key is %q", id, got, r.Key)
		}
		if seen[id] {
			t.Fatalf("idempotency key %q twice under read_committed", id)
		}
		seen[id] = true
	})
	if len(seen) != n {
		t.Fatalf("%d distinct idempotency keys, want %d", len(seen), n)
	}
}
