package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/seed"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The dedup topology under faults: an input of distinct event ids, each
// sent one to three times at random places (keyed by the id, so every copy
// is in one partition, but in different transactions of the workers),
// through `eosctl run dedup` workers SIGKILLed mid-transaction at random
// points (each restart restores the seen keys from the changelog), scaled
// 1 → 2 → 1 while records flow. Judged against the input, read with
// read_committed: every event id in the output exactly once, every other
// copy in the audit topic exactly once, no record in both, none lost.
func TestDedupPassesEveryEventIDOnceThroughKillsRestoresAndRebalances(t *testing.T) {
	testenv.Long(t)
	const distinct = 12_000
	e := newEnv(t, broker.Config{})
	cfg := filepath.Join(t.TempDir(), "dedup.yaml")
	body := "topology: dedup\nkey: event_id\nretention: 24h\nrepeats:\n  audit: dd-repeats\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, "dd-in", 6, nil); err != nil {
		t.Fatal(err)
	}
	rng := seed.Rand(t)
	var ids []int
	for i := range distinct {
		for range 1 + rng.IntN(3) {
			ids = append(ids, i)
		}
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	produced := make(chan error, 1)
	go func() { produced <- produceEvents(e, "dd-in", ids) }()

	run := func(i int) *supervise.Proc {
		return e.topologyWorker("dedup", "dd", i, "dd-in", "dd-out", "--config", cfg)
	}
	procs := map[int]*supervise.Proc{0: run(0)}
	kills := 0
	// kill SIGKILLs instance i, mid-transaction if it has one open, once
	// it has restored its state (on Apache Kafka a restart takes seconds,
	// and a kill before the restore would test nothing), and starts it
	// again.
	kill := func(i int) {
		for deadline := time.Now().Add(time.Minute); procs[i].Count(pipeline.EventRestored) == 0; {
			if time.Now().After(deadline) {
				t.Fatalf("instance %d did not restore its state within a minute", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		admin.WaitOngoing(e.ctx, e.cl, "dd-"+strconv.Itoa(i), 2*time.Second) // mid-transaction
		procs[i].Kill()
		kills++
		procs[i] = run(i)
	}
	time.Sleep(time.Second)
	kill(0)
	kill(0)
	procs[1] = run(1) // scale out: partitions and their state move
	time.Sleep(time.Second)
	kill(1)
	kill(0)
	_ = procs[1].Signal(syscall.SIGTERM) // scale in: instance 0 restores what 1 had
	if code := procs[1].Wait(); code != 0 {
		t.Fatalf("instance 1 exited %d after SIGTERM, want 0", code)
	}
	kill(0)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// The last restart must have restored its state, so that its SIGTERM
	// below finds a started worker (and its seen keys are those a next
	// record would be judged by).
	for deadline := time.Now().Add(time.Minute); procs[0].Count(pipeline.EventRestored) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the last restart did not restore its state within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := committed.WaitCaughtUp(e.ctx, e.opts, committed.Wait{Group: "dd", Topics: []string{"dd-in"}, Outputs: []string{"dd-out", "dd-repeats"}, Within: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e.stop()

	// The reference, from the input alone: how many copies of each id.
	copies := map[int]int{}
	for _, id := range ids {
		copies[id]++
	}
	read := func(topic string) map[int]int {
		rs, err := committed.Read(e.ctx, e.opts, topic)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]int{}
		seqs := map[string]bool{}
		for _, r := range committed.Flatten(rs) {
			id, err := strconv.Atoi(string(r.Key))
			if err != nil {
				t.Fatalf("%s: record with key %q", topic, r.Key)
			}
			if seqs[string(r.Value)] {
				t.Fatalf("%s: input record %s is there twice", topic, r.Value)
			}
			seqs[string(r.Value)] = true
			out[id]++
		}
		return out
	}
	out, repeats := read("dd-out"), read("dd-repeats")
	for id, n := range copies {
		if out[id] != 1 || repeats[id] != n-1 {
			t.Fatalf("event %d: %d copies in the input, %d in the output (want 1), %d in the audit topic (want %d)", id, n, out[id], repeats[id], n-1)
		}
	}
	if len(out) != distinct || len(repeats) > distinct {
		t.Fatalf("%d ids in the output, %d in the audit topic; the input has %d", len(out), len(repeats), distinct)
	}
	// A restart killed again before its restore finished reports none
	// (on Apache Kafka a restart takes longer): count the restores that
	// read seen keys back from the changelog.
	restores := 0
	for _, ev := range e.Events() {
		if ev.Kind == pipeline.EventRestored && ev.Records > 0 {
			restores++
		}
	}
	if kills < 5 || restores < 2 {
		t.Fatalf("%d SIGKILLs, %d restores of seen keys: want at least 5 and 2", kills, restores)
	}
	t.Logf("%d records, %d distinct ids: each once, %d repeats audited once; %d SIGKILLs, %d restores", len(ids), distinct, len(ids)-distinct, kills, restores)
}

// produceEvents writes one record per element of ids, keyed by the event id
// and with value {"event_id":"ID","seq":i}, in chunks of 200 every 25ms.
func produceEvents(e *env, topic string, ids []int) error {
	for i := 0; i < len(ids); i += 200 {
		var rs []*kgo.Record
		for j := i; j < min(i+200, len(ids)); j++ {
			id := strconv.Itoa(ids[j])
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(id), Value: fmt.Appendf(nil, `{"event_id":%q,"seq":%d}`, id, j)})
		}
		if err := e.cl.ProduceSync(e.ctx, rs...).FirstErr(); err != nil {
			return err
		}
		time.Sleep(25 * time.Millisecond)
	}
	return nil
}
