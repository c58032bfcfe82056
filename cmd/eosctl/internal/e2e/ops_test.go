package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/metrics"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freeAddr returns a loopback host:port nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := broker.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// cli runs eosctl with args (stdin empty) and returns its exit code,
// stdout and stderr.
func (e *env) cli(args ...string) (int, string, string) {
	e.t.Helper()
	cmd := exec.CommandContext(e.ctx, eosctl, append(args, "--brokers", e.b.Addrs()[0])...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader("")
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// cliJSON runs eosctl, requires exit code 0 and decodes its stdout into v.
func (e *env) cliJSON(v any, args ...string) {
	e.t.Helper()
	code, out, errs := e.cli(args...)
	if code != 0 {
		e.t.Fatalf("eosctl %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("eosctl %s: decoding %q: %v", strings.Join(args, " "), out, err)
	}
}

func (e *env) scrape(addr string) testenv.Scraped {
	e.t.Helper()
	s, err := testenv.Scrape(e.ctx, "http://"+addr+"/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) eventually(within time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	testenv.Eventually(e.t, within, what, cond)
}

// A worker started with --metrics-addr serves every metric docs/operations.md lists,
// with values that agree with its event stream, and healthy probes.
func TestWorkerMetricsEndpointAfterAShortRun(t *testing.T) {
	e := newEnv(t, broker.Config{})
	const n = 30_000
	input := e.produceAsync("met-in", n, 3, 20_000) // 1.5s: many transactions
	addr := freeAddr(t)
	e.worker("met", 0, "met-in", "met-out", "--metrics-addr", addr, "--metrics-interval", "200ms")
	if err := <-input; err != nil {
		t.Fatal(err)
	}
	e.waitCaughtUp("met", time.Minute, "met-in")

	var s testenv.Scraped
	e.eventually(10*time.Second, "consumer lag gauge at 0 after catching up", func() (bool, string) {
		s = e.scrape(addr)
		return s.Series(metrics.ConsumerLag, "topic", "met-in") == 3 && s.Sum(metrics.ConsumerLag) == 0 &&
				s.Sum(metrics.Transactions, "result", "committed") == float64(e.Count(pipeline.EventCommitted)),
			fmt.Sprintf("lag %v over %d series", s.Sum(metrics.ConsumerLag), s.Series(metrics.ConsumerLag))
	})
	for _, d := range metrics.Catalog() {
		if !s.Has(d.Name) {
			t.Errorf("%s missing from /metrics", d.Name)
		}
	}
	for _, name := range []string{"eos_client_produce_records_total", "eos_client_fetch_records_total", "eos_client_connects_total"} {
		if !s.Has(name) {
			t.Errorf("client metric %s missing", name)
		}
	}
	committed := s.Sum(metrics.Transactions, "result", "committed")
	consumed, produced := s.Sum(metrics.RecordsConsumed), s.Sum(metrics.RecordsProduced)
	if committed < 1 || consumed != n || produced != n {
		t.Errorf("committed %v, consumed %v, produced %v; want > 0, %d, %d", committed, consumed, produced, n, n)
	}
	if s.Sum(metrics.CommitDuration) != committed || s.Sum(metrics.TransactionDuration) != committed {
		t.Errorf("histogram counts %v/%v differ from %v committed transactions", s.Sum(metrics.CommitDuration), s.Sum(metrics.TransactionDuration), committed)
	}
	if s.Sum(metrics.AssignedPartitions) != 3 || s.Sum(metrics.Ready) != 1 || s.Sum(metrics.HangingTxns) != 0 || s.Sum(metrics.ProducerFenced) != 0 {
		t.Errorf("assigned %v ready %v hanging %v fenced %v", s.Sum(metrics.AssignedPartitions), s.Sum(metrics.Ready), s.Sum(metrics.HangingTxns), s.Sum(metrics.ProducerFenced))
	}
	if s.Series(metrics.LSOLag, "topic", "met-in") != 3 || s.Series(metrics.LSOLag, "topic", "met-out") != 3 {
		t.Errorf("LSO lag is not exported for the 3 input and 3 output partitions")
	}
	if code, body := testenv.Get(t, "http://"+addr+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if code, _ := testenv.Get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	e.stop()
	t.Logf("%v transactions committed, %v records consumed and produced", committed, consumed)
}

// A fenced worker keeps serving its final metrics for --metrics-linger, so
// a scrape sees the fence (eos_producer_fenced_total, /readyz 503), and
// then exits with code 3.
func TestFencedWorkerExportsItsFenceBeforeExiting(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.produceAsync("fence-in", 100_000, 3, 20_000) // runs until the test ends
	addr := freeAddr(t)
	zombie := e.worker("fence", 0, "fence-in", "fence-out", "--metrics-addr", addr, "--metrics-linger", "3s", "--metrics-interval", "200ms")
	e.eventually(20*time.Second, "first commit", func() (bool, string) {
		return e.Count(pipeline.EventCommitted) > 0, ""
	})
	if s := e.scrape(addr); s.Sum(metrics.ProducerFenced) != 0 || s.Sum(metrics.Ready) != 1 {
		t.Fatalf("before the fence: fenced %v, ready %v", s.Sum(metrics.ProducerFenced), s.Sum(metrics.Ready))
	}
	e.worker("fence", 0, "fence-in", "fence-out") // same instance id: takes over
	e.eventually(20*time.Second, "the first worker reports its fence", func() (bool, string) {
		s := e.scrape(addr)
		return s.Sum(metrics.ProducerFenced) == 1 && s.Sum(metrics.Ready) == 0, fmt.Sprint(s.Sum(metrics.ProducerFenced))
	})
	code, body := testenv.Get(t, "http://"+addr+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "fenced") {
		t.Fatalf("/readyz of the fenced worker: %d %q", code, body)
	}
	select {
	case <-zombie.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the fenced worker did not exit after --metrics-linger")
	}
	if c := zombie.Wait(); c != 3 {
		t.Fatalf("fenced worker exit code %d, want 3", c)
	}
	e.stop()
}

// A busy --metrics-addr fails start-up with one line naming the flag, before
// anything is written; a malformed one is bad input.
func TestMetricsAddrInUseFailsStartup(t *testing.T) {
	e := newEnv(t, broker.Config{})
	e.produce("busy-in", 10, 1, 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	run := []string{"run", "passthrough", "--app", "busy", "--instance", "0", "--input", "busy-in", "--output", "busy-out"}
	code, _, errs := e.cli(append(run, "--metrics-addr", ln.Addr().String())...)
	want := "--metrics-addr " + ln.Addr().String()
	if code != 1 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, want) || !strings.Contains(errs, "address already in use") {
		t.Fatalf("busy port: exit %d, stderr %q; want exit 1 and one line naming %q", code, errs, want)
	}
	if _, err := admin.Partitions(e.ctx, e.cl, "busy-out"); err == nil {
		t.Fatal("the output topic was created although start-up failed")
	}
	if code, _, errs := e.cli(append(run, "--metrics-addr", "nonsense")...); code != 2 || !strings.Contains(errs, "--metrics-addr") {
		t.Fatalf("malformed address: exit %d, stderr %q; want exit 2 naming the flag", code, errs)
	}
}

// hang begins a transaction as id with a 30-minute timeout, writes n records
// to topic's partition p, and never ends it.
func (e *env) hang(id, topic string, p int32, n int) {
	e.t.Helper()
	cl, err := kgo.NewClient(append(e.opts, kgo.TransactionalID(id), kgo.TransactionTimeout(30*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(fmt.Sprintf("hang-%s-%d", id, i)), Value: []byte("never committed")}
		if err := cl.ProduceSync(e.ctx, r).FirstErr(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// produceLate writes n committed records with keys late-<from+i> to
// topic's partitions ps, round robin.
func (e *env) produceLate(topic string, ps []int32, from, n int) {
	e.t.Helper()
	cl, err := kgo.NewClient(append(e.opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		cl.Produce(e.ctx, &kgo.Record{Topic: topic, Partition: ps[i%len(ps)], Key: []byte(fmt.Sprintf("late-%d", from+i)), Value: []byte("late")}, nil)
	}
	if err := cl.Flush(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) offsets(topic string) inspect.Offsets {
	e.t.Helper()
	offs, err := inspect.ReadOffsets(e.ctx, kadm.NewClient(e.cl), topic)
	if err != nil {
		e.t.Fatal(err)
	}
	return offs
}

type hangingOut struct {
	Threshold time.Duration             `json:"threshold_ns"`
	Hanging   []inspect.OpenTransaction `json:"hanging"`
}

// The hanging-transaction drill: two transactions left open on the input
// stop its LSO; LSO lag grows while a worker sits caught up at the LSO;
// `txn hanging` finds both, `txn abort` clears one by its start offset and
// the other by fencing its id; the LSO reaches the HWM, the worker copies
// the rest, and everything committed is in the output exactly once while
// nothing of the hanging transactions is.
func TestHangingTransactionDrill(t *testing.T) {
	e := newEnv(t, broker.Config{BrokerConfigs: map[string]string{"transaction.max.timeout.ms": "3600000"}})
	const in, out, n = "drill-in", "drill-out", 3000
	e.produce(in, n, 3, 0)
	e.hang("drill-a", in, 0, 40)
	e.hang("drill-b", in, 1, 60)
	hangStart := time.Now() // both have been open at least since
	late := 0
	e.produceLate(in, []int32{0, 1}, late, 500)
	late += 500

	before := e.offsets(in)
	p0, _ := before.Lookup(in, 0)
	p1, _ := before.Lookup(in, 1)
	if p0.Unstable() != 40+250 || p1.Unstable() != 60+250 {
		t.Fatalf("offsets with two transactions open: %+v %+v", p0, p1)
	}

	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, out, 3, nil); err != nil {
		t.Fatal(err)
	}
	waddr, maddr := freeAddr(t), freeAddr(t)
	e.worker("drill", 0, in, out, "--metrics-addr", waddr, "--metrics-interval", "200ms")
	mon := exec.CommandContext(e.ctx, eosctl, "monitor", "--brokers", e.b.Addrs()[0], "--topics", in+","+out, "--groups", "drill",
		"--metrics-addr", maddr, "--interval", "200ms", "--hanging-after", "2s", "--log-level", "warn")
	mon.Stderr = e.LogWriter("monitor")
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mon.Process.Kill(); _ = mon.Wait() }()

	// The worker copies everything up to the LSO and then waits: its
	// LSO-based lag is 0 while HWM - committed is not.
	e.waitCaughtUpToLSO("drill", time.Minute, in)
	var lag0 float64
	e.eventually(10*time.Second, "worker exports the LSO lag of in[0]", func() (bool, string) {
		s := e.scrape(waddr)
		lag0 = s.Sum(metrics.LSOLag, "topic", in, "partition", "0")
		return lag0 == float64(p0.Unstable()), fmt.Sprint(lag0)
	})
	e.produceLate(in, []int32{0}, late, 300)
	late += 300
	e.eventually(10*time.Second, "LSO lag of in[0] grows by the late records", func() (bool, string) {
		got := e.scrape(waddr).Sum(metrics.LSOLag, "topic", in, "partition", "0")
		return got == lag0+300, fmt.Sprint(got)
	})
	if o, _ := e.offsets(in).Lookup(in, 0); o.LSO != p0.LSO {
		t.Fatalf("LSO of in[0] moved from %d to %d with the transaction still open", p0.LSO, o.LSO)
	}

	// Not hanging under the brokers' threshold (1h); hanging past 2s.
	var h hangingOut
	e.cliJSON(&h, "txn", "hanging", "--json")
	if h.Threshold != time.Hour || len(h.Hanging) != 0 {
		t.Fatalf("txn hanging (default threshold): %+v; want none under 1h", h)
	}
	time.Sleep(time.Until(hangStart.Add(2100 * time.Millisecond)))
	e.cliJSON(&h, "txn", "hanging", "--older-than", "2s", "--json")
	if len(h.Hanging) != 2 {
		t.Fatalf("txn hanging --older-than 2s: %+v; want the two open transactions", h.Hanging)
	}
	found := map[int32]inspect.OpenTransaction{}
	for _, x := range h.Hanging {
		found[x.Partition] = x
	}
	a, b := found[0], found[1]
	if a.StartOffset != p0.LSO || a.TransactionalID != "drill-a" || a.Age < 2*time.Second || b.StartOffset != p1.LSO || b.TransactionalID != "drill-b" {
		t.Fatalf("hanging = %+v", h.Hanging)
	}
	if a.Blocked != p0.Unstable()+300 {
		t.Fatalf("in[0] blocked %d, want %d", a.Blocked, p0.Unstable()+300)
	}
	e.eventually(10*time.Second, "monitor counts two hanging transactions", func() (bool, string) {
		s := e.scrape(maddr)
		return s.Sum(metrics.HangingTxns, "topic", in) == 2 && s.Sum(metrics.OpenTransactionAge, "topic", in, "partition", "0") >= 2,
			fmt.Sprint(s.Sum(metrics.HangingTxns, "topic", in))
	})
	code, _, _ := e.cli("txn", "producers", "--topic", in, "--partition", "0")
	if code != 0 {
		t.Fatalf("txn producers: exit %d", code)
	}

	// Without --yes and with no one to answer, nothing happens.
	abortA := []string{"txn", "abort", "--topic", in, "--partition", "0", "--start-offset", fmt.Sprint(a.StartOffset)}
	if code, _, errs := e.cli(abortA...); code != 1 || !strings.Contains(errs, "not confirmed") {
		t.Fatalf("abort without --yes: exit %d, %q", code, errs)
	}
	if o, _ := e.offsets(in).Lookup(in, 0); o.LSO != p0.LSO {
		t.Fatal("an unconfirmed abort moved the LSO")
	}
	if code, _, errs := e.cli("txn", "abort", "--topic", in, "--partition", "0", "--start-offset", "1", "--yes"); code != 2 || !strings.Contains(errs, "no open transaction starts at offset 1") {
		t.Fatalf("abort at a wrong offset: exit %d, %q", code, errs)
	}
	code, stdout, errs := e.cli(append(abortA, "--yes")...)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("LSO before: %d", a.StartOffset)) {
		t.Fatalf("abort by offset: exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	t.Logf("txn abort --start-offset:\n%s", stdout)
	code, stdout, errs = e.cli("txn", "abort", "--transactional-id", "drill-b", "--yes")
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("LSO before: %s[1] %d", in, b.StartOffset)) {
		t.Fatalf("abort by fencing: exit %d, stdout %q, stderr %q", code, stdout, errs)
	}
	t.Logf("txn abort --transactional-id:\n%s", stdout)
	for _, o := range e.offsets(in).Sorted() {
		if o.LSO != o.HWM {
			t.Fatalf("after both aborts %s[%d] has LSO %d < HWM %d", o.Topic, o.Partition, o.LSO, o.HWM)
		}
	}
	e.cliJSON(&h, "txn", "hanging", "--older-than", "1ms", "--topics", in, "--json")
	if len(h.Hanging) != 0 {
		t.Fatalf("still hanging after the aborts: %+v", h.Hanging)
	}
	e.eventually(10*time.Second, "monitor and worker see no lag and nothing hanging", func() (bool, string) {
		m, w := e.scrape(maddr), e.scrape(waddr)
		return m.Sum(metrics.HangingTxns) == 0 && m.Sum(metrics.LSOLag, "topic", in) == 0 && w.Sum(metrics.LSOLag, "topic", in) == 0,
			fmt.Sprintf("monitor hanging %v lag %v, worker lag %v", m.Sum(metrics.HangingTxns), m.Sum(metrics.LSOLag, "topic", in), w.Sum(metrics.LSOLag, "topic", in))
	})

	// The worker now copies what was stuck behind the transactions.
	e.waitCaughtUp("drill", time.Minute, in)
	e.stop()
	_ = mon.Process.Signal(syscall.SIGTERM)
	if err := mon.Wait(); err != nil {
		t.Errorf("monitor after SIGTERM: %v", err)
	}
	rep, err := verify.Run(e.ctx, e.opts, verify.Config{Input: in, Output: out, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.InputRecords != int64(n+late) || rep.OutputRecords != int64(n+late) {
		t.Fatalf("verify: %s; want all %d committed records exactly once and none of the aborted ones", rep.Summary(), n+late)
	}
	t.Log(rep.Summary())
}

// The numbers `eosctl lag` prints are the offsets kadm reads directly.
func TestLagCommandMatchesKadm(t *testing.T) {
	e := newEnv(t, broker.Config{BrokerConfigs: map[string]string{"transaction.max.timeout.ms": "3600000"}})
	e.produce("lag-in", 5000, 4, 0)
	e.hang("lag-stuck", "lag-in", 2, 25)
	e.produceLate("lag-in", []int32{2}, 0, 75)
	adm := kadm.NewClient(e.cl)
	commits := kadm.Offsets{}
	for p, at := range map[int32]int64{0: 100, 1: 0, 2: 300} { // partition 3: no commit
		commits.Add(kadm.Offset{Topic: "lag-in", Partition: p, At: at, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(e.ctx, "lagger", commits); err != nil {
		t.Fatal(err)
	}

	var gl inspect.GroupLag
	e.cliJSON(&gl, "lag", "--group", "lagger", "--topics", "lag-in", "--json")
	hwm, err := adm.ListEndOffsets(e.ctx, "lag-in")
	if err != nil {
		t.Fatal(err)
	}
	lso, err := adm.ListCommittedOffsets(e.ctx, "lag-in")
	if err != nil {
		t.Fatal(err)
	}
	fetched, err := adm.FetchOffsets(e.ctx, "lagger")
	if err != nil {
		t.Fatal(err)
	}
	if len(gl.Partitions) != 4 {
		t.Fatalf("lag printed %d partitions, want 4", len(gl.Partitions))
	}
	var total, unstable int64
	for _, p := range gl.Partitions {
		h, _ := hwm.Lookup("lag-in", p.Partition)
		l, _ := lso.Lookup("lag-in", p.Partition)
		c := int64(-1)
		if f, ok := fetched.Lookup("lag-in", p.Partition); ok {
			c = f.At
		}
		from := max(c, 0)
		if p.HWM != h.Offset || p.LSO != l.Offset || p.Committed != c || p.Lag != l.Offset-from || p.Unstable != h.Offset-l.Offset {
			t.Errorf("partition %d: lag says %+v; kadm says HWM %d, LSO %d, committed %d", p.Partition, p, h.Offset, l.Offset, c)
		}
		total += p.Lag
		unstable += p.Unstable
	}
	if gl.TotalLag != total || gl.TotalUnstable != unstable || unstable != 100 {
		t.Errorf("totals lag %d unstable %d, want %d and %d (the 25 open + 75 behind them)", gl.TotalLag, gl.TotalUnstable, total, unstable)
	}

	// The table prints the same numbers.
	code, table, _ := e.cli("lag", "--group", "lagger", "--topics", "lag-in")
	if code != 0 {
		t.Fatalf("lag: exit %d", code)
	}
	for _, p := range gl.Partitions {
		c := fmt.Sprint(p.Committed)
		if p.Committed < 0 {
			c = "-"
		}
		want := strings.Join([]string{"lag-in", fmt.Sprint(p.Partition), c, fmt.Sprint(p.LSO), fmt.Sprint(p.HWM), fmt.Sprint(p.Lag), fmt.Sprint(p.Unstable)}, " ")
		if !strings.Contains(squeeze(table), want) {
			t.Errorf("table lacks the row %q:\n%s", want, table)
		}
	}
	t.Logf("eosctl lag:\n%s", table)
	if code, _, errs := e.cli("lag", "--group", "nobody"); code != 2 || !strings.Contains(errs, "no committed offsets") {
		t.Errorf("lag of an unknown group: exit %d, %q", code, errs)
	}
}

// squeeze collapses runs of spaces, so table rows compare regardless of
// column widths.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
