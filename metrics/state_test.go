package metrics

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A stateful worker exports its dead letters and its restores: the dead
// letter counter equals the poison records in the input, and a second
// incarnation's restore counts exactly the changelog records a
// read_committed reader finds, with the remaining gauge back at 0.
func TestWorkerExportsDeadLettersAndRestores(t *testing.T) {
	e := newEnv(t)
	const good, poison = 3000, 17
	cfg := filepath.Join(t.TempDir(), "agg.yaml")
	body := "topology: aggregate\ngroup_by: user\ntime: ts\nwindow: {size: 1h}\naggregations: {n: count()}\nrepartition: false\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, "agg-in", 3, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range good + poison {
		v := fmt.Appendf(nil, `{"user":"u%d","ts":%d}`, i%97, 1_700_000_000_000+int64(i))
		if i%(good/poison) == 0 && i/(good/poison) < poison {
			v = []byte(`{"user":`)
		}
		recs = append(recs, &kgo.Record{Topic: "agg-in", Key: fmt.Appendf(nil, "k%d", i), Value: v})
	}
	if err := e.cl.ProduceSync(e.ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := func(what string) testenv.Scraped {
		t.Helper()
		top, _ := topologies.Lookup("aggregate")
		tr, err := top.New(topologies.Options{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		mw := NewWorker(WorkerConfig{App: "agg", Instance: "0", Inputs: []string{"agg-in"}, Output: "agg-out", ClientOpts: e.opts})
		var restored atomic.Bool
		onEvent := pipeline.Chain(mw.OnEvent, func(ev pipeline.Event) { restored.CompareAndSwap(false, ev.Kind == pipeline.EventRestored) })
		w, err := pipeline.New(pipeline.Config{App: "agg", Instance: "0", Inputs: []string{"agg-in"}, Output: "agg-out", Topology: "aggregate",
			ClientOpts: e.opts, OnEvent: onEvent, SessionTimeout: 6 * time.Second}, tr)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		testenv.Eventually(t, 30*time.Second, what+": group caught up", func() (bool, string) {
			lag, err := inspect.Lag(e.ctx, kadm.NewClient(e.cl), "agg", "agg-in")
			return err == nil && lag.TotalLag == 0 && restored.Load(), fmt.Sprint(lag, err)
		})
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		url := serve(t, mw.Handler())
		s, err := testenv.Scrape(e.ctx, url+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	first := run("first run")
	if got := first.Sum(DeadLetters); got != poison {
		t.Errorf("first run: %s = %v, want %d poison records", DeadLetters, got, poison)
	}
	if first.Sum(StateRestores) != 1 || first.Sum(RestoredRecords) != 0 || first.Sum(RestoreRemaining) != 0 {
		t.Errorf("first run restored from an empty changelog: restores %v records %v remaining %v, want 1, 0, 0",
			first.Sum(StateRestores), first.Sum(RestoredRecords), first.Sum(RestoreRemaining))
	}

	changelog := countCommitted(t, e, "agg-windows-changelog")
	if changelog == 0 {
		t.Fatal("the first run wrote no changelog records")
	}
	second := run("second run")
	if got := second.Sum(RestoredRecords); got != float64(changelog) {
		t.Errorf("second run: %s = %v, want the %d changelog records", RestoredRecords, got, changelog)
	}
	if second.Sum(StateRestores) != 1 || second.Sum(RestoreDuration) != 1 || second.Sum(RestoreRemaining) != 0 {
		t.Errorf("second run: restores %v, duration observations %v, remaining %v; want 1, 1, 0",
			second.Sum(StateRestores), second.Sum(RestoreDuration), second.Sum(RestoreRemaining))
	}
	if got := second.Sum(DeadLetters); got != 0 {
		t.Errorf("second run: %s = %v, want 0 (nothing new to process)", DeadLetters, got)
	}
}

// countCommitted reads topic from the start with read_committed and counts
// its records.
func countCommitted(t *testing.T, e *env, topic string) int {
	t.Helper()
	ends, err := e.adm.ListCommittedOffsets(e.ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(e.opts, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pos := map[int32]int64{}
	n := 0
	caughtUp := func() bool {
		for _, o := range ends[topic] {
			if pos[o.Partition] < o.Offset {
				return false
			}
		}
		return true
	}
	for !caughtUp() {
		fs := cl.PollFetches(e.ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				n++
			}
		})
	}
	return n
}
