package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/admin"
	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/committed"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/supervise"
	"github.com/twmb/franz-go/pkg/kgo"
)

// aggFaultConfig groups by user through the repartition topic. The grace
// period is longer than the whole input, so that no regular record is late
// however the input partitions interleave on their way through the
// repartition topic; windows close when the final heartbeat records move
// stream time past them.
const aggFaultConfig = `topology: aggregate
group_by: user
time: ts
window:
  size: 5s
  grace: 10m
aggregations:
  orders: count()
  total: sum(amount)
  smallest: min(amount)
  biggest: max(amount)
  mean: avg(amount)
`

type aggWindow struct {
	Orders                   int
	Total, Smallest, Biggest float64
}

// The windowed aggregate under faults: a worker SIGKILLed at random points
// (at least 5 times, at least twice while it restores its state from the
// changelog), scaled 1 → 2 → 1 instances while records flow. The final
// window results, read with read_committed, equal a reference computed here
// from the input, exactly: every window once, no count twice, none lost.
// Late records and poison pills are in the dead-letter topic exactly once,
// naming their original input record.
func TestAggregateIsExactlyOnceThroughKillsRestoresAndRebalances(t *testing.T) {
	const (
		n      = 100_000
		groups = 400
		rate   = 8_000
		base   = int64(1_700_000_000_000)
	)
	e := newEnv(t, broker.Config{})
	cfg := filepath.Join(t.TempDir(), "agg.yaml")
	if err := os.WriteFile(cfg, []byte(aggFaultConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, "agg-in", 6, nil); err != nil {
		t.Fatal(err)
	}

	// The input: regular records keyed by sequence number (so the
	// aggregate must re-key them), a late record after every 1000th
	// (keyed like the record before it, so it reaches its repartition
	// partition after it: deterministically late), a poison pill every
	// 997th.
	rng := rand.New(rand.NewPCG(7, 7))
	type rec struct {
		r    *kgo.Record
		kind string // "", "late", "poison"
		user string
		ts   int64
		amt  int
	}
	var recs []*rec
	for i := range n {
		u, amt := fmt.Sprintf("user-%03d", rng.IntN(groups)), rng.IntN(10_000)-1_000
		ts := base + int64(i)
		key := "n" + strconv.Itoa(i)
		if i%1000 == 999 {
			key = "late-" + strconv.Itoa(i)
		}
		recs = append(recs, &rec{r: &kgo.Record{Topic: "agg-in", Key: []byte(key), Value: fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":%d}`, u, ts, amt)}, user: u, ts: ts, amt: amt})
		switch {
		case i%1000 == 999:
			recs = append(recs, &rec{r: &kgo.Record{Topic: "agg-in", Key: []byte(key), Value: fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":1}`, u, base-3_600_000)}, kind: "late"})
		case i%997 == 500:
			recs = append(recs, &rec{r: &kgo.Record{Topic: "agg-in", Key: []byte("p" + strconv.Itoa(i)), Value: []byte(`{"user":"x","ts":`)}, kind: "poison"})
		}
	}
	produced := make(chan error, 1)
	go func() {
		start := time.Now()
		for i := 0; i < len(recs); i += 200 {
			var batch []*kgo.Record
			for _, r := range recs[i:min(i+200, len(recs))] {
				batch = append(batch, r.r)
			}
			if err := e.cl.ProduceSync(e.ctx, batch...).FirstErr(); err != nil {
				produced <- err
				return
			}
			if d := time.Until(start.Add(time.Duration(i+200) * time.Second / rate)); d > 0 {
				time.Sleep(d)
			}
		}
		produced <- nil
	}()

	run := func(i int) *supervise.Proc {
		return e.topologyWorker("aggregate", "agg", i, "agg-in", "agg-out", "--config", cfg)
	}
	procs := map[int]*supervise.Proc{0: run(0)}
	kills, duringRestore := 0, 0
	killAtRandom := func(i int) {
		time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
		admin.WaitOngoing(e.ctx, e.cl, "agg-"+strconv.Itoa(i), 2*time.Second)
		procs[i].Kill()
		kills++
		procs[i] = run(i)
	}
	// killDuringRestore restarts instance i after the kill that precedes it
	// and SIGKILLs the new process as soon as it reports that it is
	// restoring state; it counts the kill as during the restore only if
	// the process never reported the restore finished.
	killDuringRestore := func(i int) {
		p := procs[i]
		deadline := time.Now().Add(20 * time.Second)
		for p.Count(pipeline.EventRestoring) == 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Microsecond)
		}
		p.Kill()
		kills++
		if p.Count(pipeline.EventRestoring) > 0 && p.Count(pipeline.EventRestored) == 0 {
			duringRestore++
		}
		procs[i] = run(i)
	}

	time.Sleep(1500 * time.Millisecond)
	killAtRandom(0)
	killDuringRestore(0)
	procs[1] = run(1) // scale to 2: partitions of the input and of the repartition topic move
	time.Sleep(1500 * time.Millisecond)
	killAtRandom(1)
	killDuringRestore(1)
	killAtRandom(0)
	killDuringRestore(0)
	time.Sleep(time.Second)
	_ = procs[1].Signal(syscall.SIGTERM) // scale back to 1: instance 0 restores what 1 had
	if code := procs[1].Wait(); code != 0 {
		t.Fatalf("instance 1 exited %d after SIGTERM, want 0", code)
	}
	killAtRandom(0)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	waitCaughtUpTransactional(e, "agg", time.Minute, "agg-in", "agg-windows-repartition")

	// Heartbeats: one record per repartition partition with a time far
	// past every window, so every window closes and emits its result.
	part := kgo.StickyKeyPartitioner(nil).ForTopic("agg-windows-repartition") // kgo's hashing of keyed records
	covered := map[int]bool{}
	for k := 0; len(covered) < 6; k++ {
		g := "zz-heartbeat-" + strconv.Itoa(k)
		r := &kgo.Record{Topic: "agg-in", Key: []byte(g), Value: fmt.Appendf(nil, `{"user":%q,"ts":%d,"amount":0}`, g, base+36_000_000)}
		if p := part.Partition(&kgo.Record{Key: []byte(g)}, 6); !covered[p] {
			covered[p] = true
			if err := e.cl.ProduceSync(e.ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitCaughtUpTransactional(e, "agg", time.Minute, "agg-in", "agg-windows-repartition")
	e.stop()
	if kills < 5 || duringRestore < 2 {
		t.Fatalf("%d SIGKILLs, %d of them while restoring; want at least 5 and 2", kills, duringRestore)
	}

	want := map[string]*aggWindow{}
	wantDL := map[string]string{}
	for _, r := range recs {
		switch r.kind {
		case "late":
			wantDL[fmt.Sprintf("%d/%d", r.r.Partition, r.r.Offset)] = "late-record"
			continue
		case "poison":
			wantDL[fmt.Sprintf("%d/%d", r.r.Partition, r.r.Offset)] = "malformed-json"
			continue
		}
		start := (r.ts - base) / 5000 * 5000
		k := r.user + "/" + strconv.FormatInt(base+start, 10)
		w := want[k]
		if w == nil {
			w = &aggWindow{Smallest: math.Inf(1), Biggest: math.Inf(-1)}
			want[k] = w
		}
		a := float64(r.amt)
		w.Orders, w.Total, w.Smallest, w.Biggest = w.Orders+1, w.Total+a, min(w.Smallest, a), max(w.Biggest, a)
	}

	out, err := committed.Read(e.ctx, e.opts, "agg-out")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]aggWindow{}
	for _, r := range committed.Flatten(out) {
		var v struct {
			Key   string
			Start int64
			aggWindow
			Final bool
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || !v.Final {
			t.Fatalf("result %q: %v", r.Value, err)
		}
		k := v.Key + "/" + strconv.FormatInt(v.Start, 10)
		if _, dup := got[k]; dup {
			t.Fatalf("window %s emitted twice: a double count", k)
		}
		got[k] = v.aggWindow
	}
	if len(got) != len(want) {
		t.Fatalf("%d window results, the reference has %d", len(got), len(want))
	}
	for k, w := range want {
		if got[k] != *w {
			t.Fatalf("window %s: got %+v, want %+v", k, got[k], *w)
		}
	}

	dlq, err := committed.Read(e.ctx, e.opts, "agg-dlq")
	if err != nil {
		t.Fatal(err)
	}
	gotDL := map[string]string{}
	for _, r := range committed.Flatten(dlq) {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if h[pipeline.DeadLetterTopicHeader] != "agg-in" || h[pipeline.DeadLetterTopologyHeader] != "aggregate" {
			t.Fatalf("dead letter headers %v", h)
		}
		k := h[pipeline.DeadLetterPartitionHeader] + "/" + h[pipeline.DeadLetterOffsetHeader]
		if _, dup := gotDL[k]; dup {
			t.Fatalf("dead letter of agg-in %s written twice", k)
		}
		gotDL[k] = h[pipeline.DeadLetterReasonHeader]
	}
	if fmt.Sprint(gotDL) != fmt.Sprint(wantDL) {
		t.Fatalf("dead letters:\n got  %v\n want %v", gotDL, wantDL)
	}

	byInstance := map[string]int{}
	restores := 0
	e.mu.Lock()
	for _, ev := range e.events {
		switch ev.Kind {
		case pipeline.EventCommitted:
			byInstance[ev.Instance]++
		case pipeline.EventRestored:
			restores++
		}
	}
	e.mu.Unlock()
	if byInstance["0"] == 0 || byInstance["1"] == 0 {
		t.Fatalf("commits by instance %v: the scale-out did not happen", byInstance)
	}
	t.Logf("%d windows exact, %d dead letters exact; %d SIGKILLs (%d while restoring), %d restores completed, commits by instance %v",
		len(want), len(wantDL), kills, duringRestore, restores, byInstance)
	if testing.Verbose() {
		t.Logf("restore log lines:\n%s", grepLines(e, "state restored"))
	}
}

// waitCaughtUpTransactional waits until group has consumed everything in
// topics, seeing through the transaction markers a group never commits past
// on a transactional topic such as a repartition topic.
func waitCaughtUpTransactional(e *env, group string, within time.Duration, topics ...string) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := committed.CaughtUp(e.ctx, e.opts, group, topics...)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			lag, _ := admin.GroupLag(e.ctx, e.cl, group, topics...)
			e.t.Fatalf("group %s did not catch up on %v within %s: lag %d, err %v", group, topics, within, lag, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// grepLines returns the workers' log lines that contain s.
func grepLines(e *env, s string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
