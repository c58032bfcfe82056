package metrics

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/internal/testhook"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The dedup topology's metrics count committed transactions only: over an
// input written twice, through a worker that aborts a fifth of its
// transactions, eos_dedup_passed_total is the number of distinct keys,
// eos_dedup_repeats_total the number of second copies, and
// eos_dedup_keys_held the keys held after the last commit.
func TestDedupMetricsCountCommittedRecordsOnly(t *testing.T) {
	e := newEnv(t)
	const n = 3000
	for i := range 2 { // every seq twice, as a producer re-sending everything
		if _, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: "dd-in", Count: n, Size: 100, Partitions: 3, Again: i == 1}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "dedup.yaml")
	if err := os.WriteFile(cfg, []byte("topology: dedup\nkey: seq\nretention: 24h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := topologies.NewDedup(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mw := NewWorker(WorkerConfig{App: "dd", Instance: "0", Inputs: []string{"dd-in"}, Output: "dd-out", ClientOpts: e.opts})
	mw.WatchDedup(func() DedupStats { return DedupStats(tr.Stats()) })
	w, err := pipeline.New(pipeline.Config{App: "dd", Instance: "0", Inputs: []string{"dd-in"}, Output: "dd-out", Topology: "dedup",
		ClientOpts: e.opts, OnEvent: pipeline.Chain(tr.OnEvent, mw.OnEvent), SessionTimeout: 6 * time.Second, MaxTxnRecords: 200}, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(testhook.WithAbortFraction(e.ctx, 0.2))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testenv.Eventually(t, 30*time.Second, "group caught up", func() (bool, string) {
		lag, err := inspect.Lag(e.ctx, kadm.NewClient(e.cl), "dd", "dd-in")
		return err == nil && lag.TotalLag == 0, fmt.Sprint(lag, err)
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.Stats().Aborted.Load() == 0 {
		t.Fatal("no transaction aborted: the test proves nothing about aborted counts")
	}
	s, err := testenv.Scrape(e.ctx, serve(t, mw.Handler())+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if s.Sum(DedupPassed) != n || s.Sum(DedupRepeats) != n || s.Sum(DedupKeysHeld) != n {
		t.Fatalf("passed %v, repeats %v, keys held %v; want %d each", s.Sum(DedupPassed), s.Sum(DedupRepeats), s.Sum(DedupKeysHeld), n)
	}
	if got := countCommitted(t, e, "dd-out"); got != n {
		t.Fatalf("%d records in the output, want %d", got, n)
	}
}
