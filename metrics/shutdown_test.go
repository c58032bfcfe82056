package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
)

// A passthrough worker stopped (as SIGINT stops eosctl run) with all of
// its input in the transaction it commits on the way out exports as many
// records consumed as produced: eos_records_consumed_total once stayed at
// the earlier commits' count, since that last commit's event had no
// consumed count (issue 13, defect 5). internal/e2e's
// TestPassthroughCountsAgreeAfterSIGINT checks the events and the log line
// of the real process.
func TestCountsAgreeAfterTheShutdownCommit(t *testing.T) {
	e := newEnv(t)
	const n = 5000
	if _, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: "sd-in", Count: n, Size: 100, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	mw := NewWorker(WorkerConfig{App: "sd", Instance: "0", Inputs: []string{"sd-in"}, Output: "sd-out", ClientOpts: e.opts})
	url := serve(t, mw.Handler())
	topo, _ := topologies.Lookup("passthrough")
	tr, _ := topo.New(topologies.Options{})
	// An hour's interval: the only commit is the one on the way out.
	w, err := pipeline.New(pipeline.Config{App: "sd", Instance: "0", Inputs: []string{"sd-in"}, Output: "sd-out",
		ClientOpts: e.opts, OnEvent: mw.OnEvent, CommitInterval: time.Hour, SessionTimeout: 10 * time.Second}, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testenv.Eventually(t, 30*time.Second, "every record written in the open transaction", func() (bool, string) {
		m, err := admin.EndOffsetSum(e.ctx, e.cl, "sd-out")
		return err == nil && m >= n, fmt.Sprint(m, err)
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, err := testenv.Scrape(e.ctx, url+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	committed, consumed, produced := s.Sum(Transactions, "result", "committed"), s.Sum(RecordsConsumed), s.Sum(RecordsProduced)
	if committed != 1 || consumed != n || produced != n {
		t.Fatalf("after the shutdown commit: %v committed, %s = %v, %s = %v; want 1, %d and %d", committed, RecordsConsumed, consumed, RecordsProduced, produced, n, n)
	}
}
