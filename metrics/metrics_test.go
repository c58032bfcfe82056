package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/inspect"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCatalogFollowsPrometheusNaming(t *testing.T) {
	name := regexp.MustCompile(`^eos_[a-z][a-z0-9_]*[a-z0-9]$`)
	seen := map[string]bool{}
	for _, d := range Catalog() {
		switch {
		case !name.MatchString(d.Name):
			t.Errorf("%s: not eos_snake_case", d.Name)
		case seen[d.Name]:
			t.Errorf("%s: declared twice", d.Name)
		case d.Help == "":
			t.Errorf("%s: no help", d.Name)
		case d.Kind == Counter && !strings.HasSuffix(d.Name, "_total"):
			t.Errorf("%s: a counter must end in _total", d.Name)
		case d.Kind != Counter && strings.HasSuffix(d.Name, "_total"):
			t.Errorf("%s: only counters end in _total", d.Name)
		case d.Kind == Histogram && len(d.Buckets) == 0:
			t.Errorf("%s: a histogram needs buckets", d.Name)
		case d.Kind != Counter && d.Kind != Gauge && d.Kind != Histogram:
			t.Errorf("%s: kind %q; eos exports counters, gauges and histograms (no summaries)", d.Name, d.Kind)
		case strings.Contains(d.Name, "duration") && !strings.HasSuffix(d.Name, "_seconds"),
			strings.Contains(d.Name, "_ms") || strings.Contains(d.Name, "millis"):
			t.Errorf("%s: durations are in seconds", d.Name)
		}
		for _, l := range d.Labels {
			if l == "app" || l == "instance" {
				t.Errorf("%s: label %s is added to every metric; do not declare it", d.Name, l)
			}
		}
		seen[d.Name] = true
	}
	for _, want := range []string{RecordsConsumed, RecordsProduced, Transactions, TransactionAborts, TransactionDuration, CommitDuration,
		CommitFlushDuration, TransactionRecords, ProducerEpoch, ProducerFenced, ProducerReinits, Rebalances, LSOLag, ConsumerLag, OpenTransactionAge, HangingTxns} {
		if !seen[want] {
			t.Errorf("%s is not in the catalog", want)
		}
	}
}

// env is an embedded broker with an admin client.
type env struct {
	b    testbroker.Cluster
	cl   *kgo.Client
	adm  *kadm.Client
	opts []kgo.Opt
	ctx  context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	b := testbroker.Start(t, broker.Config{BrokerConfigs: map[string]string{"transaction.max.timeout.ms": "3600000"}})
	conn := testbroker.Connect(t, b, time.Minute)
	return &env{b: b, ctx: conn.Ctx, opts: conn.Opts, cl: conn.Client, adm: kadm.NewClient(conn.Client)}
}

// produceTo writes n plain records to topic's partition p.
func (e *env) produceTo(t *testing.T, topic string, p int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(append(e.opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for range n {
		cl.Produce(e.ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}, nil)
	}
	if err := cl.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	s, err := Listen("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return "http://" + s.Addr()
}

func TestWorkerExportsEveryMetricWithSaneValues(t *testing.T) {
	e := newEnv(t)
	const n = 20000
	if _, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: "in", Count: n, Size: 100, Partitions: 3}); err != nil {
		t.Fatal(err)
	}
	mw := NewWorker(WorkerConfig{App: "copy", Instance: "0", Inputs: []string{"in"}, Output: "out", PollInterval: 100 * time.Millisecond, ClientOpts: e.opts})
	url := serve(t, mw.Handler())
	if code, body := testenv.Get(t, url+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz before the worker started: %d %q, want 503 starting", code, body)
	}

	topo, _ := topologies.Lookup("passthrough")
	tr, _ := topo.New(topologies.Options{})
	w, err := pipeline.New(pipeline.Config{App: "copy", Instance: "0", Inputs: []string{"in"}, Output: "out",
		ClientOpts: append(e.opts, mw.ClientHooks()), OnEvent: mw.OnEvent, SessionTimeout: 6 * time.Second}, tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	pollDone := make(chan error, 1)
	go func() { pollDone <- mw.Run(ctx) }()

	testenv.Eventually(t, 30*time.Second, "group caught up", func() (bool, string) {
		lag, err := inspect.Lag(e.ctx, kadm.NewClient(e.cl), "copy", "in")
		return err == nil && lag.TotalLag == 0, fmt.Sprint(lag, err)
	})
	var s testenv.Scraped
	testenv.Eventually(t, 5*time.Second, "consumer lag gauge at 0 after catching up", func() (bool, string) {
		s, err = testenv.Scrape(e.ctx, url+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		return s.Series(ConsumerLag, "group", "copy", "topic", "in") == 3 && s.Sum(ConsumerLag) == 0 &&
			s.Sum(OffsetPolls, "result", "ok") >= 2, fmt.Sprint(s.Sum(ConsumerLag), " series ", s.Series(ConsumerLag, "group", "copy", "topic", "in"), " polls ", s.Sum(OffsetPolls, "result", "ok"), " errors ", s.Sum(OffsetPolls, "result", "error"))
	})
	for _, d := range Catalog() {
		if !s.Has(d.Name) {
			t.Errorf("%s missing from /metrics", d.Name)
		}
	}
	for _, name := range []string{"eos_client_produce_records_total", "eos_client_fetch_records_total", "eos_client_request_duration_e2e_seconds", "go_goroutines", "process_start_time_seconds"} {
		if !s.Has(name) {
			t.Errorf("%s missing from /metrics", name)
		}
	}
	if got := s.Sum(RecordsConsumed); got != n {
		t.Errorf("%s = %v, want %d", RecordsConsumed, got, n)
	}
	if got := s.Sum(RecordsProduced); got != n {
		t.Errorf("%s = %v, want %d (passthrough)", RecordsProduced, got, n)
	}
	committed := s.Sum(Transactions, "result", "committed")
	if committed < 1 || s.Sum(TransactionDuration) != committed || s.Sum(CommitDuration) != committed || s.Sum(CommitFlushDuration) != committed || s.Sum(TransactionRecords) != committed {
		t.Errorf("committed %v, duration/commit/flush/records histogram counts %v/%v/%v/%v: want equal and > 0",
			committed, s.Sum(TransactionDuration), s.Sum(CommitDuration), s.Sum(CommitFlushDuration), s.Sum(TransactionRecords))
	}
	if s.Sum(Transactions, "result", "aborted") != 0 || s.Sum(TransactionAborts) != 0 || s.Sum(ProducerFenced) != 0 || s.Sum(ProducerReinits) != 0 {
		t.Errorf("aborts, fences or re-inits in a clean run")
	}
	if s.Sum(AssignedPartitions) != 3 || s.Sum(Rebalances) < 1 || s.Sum(ProducerEpoch) < 0 || s.Sum(LastCommit) < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("assigned %v, rebalances %v, epoch %v, last commit %v", s.Sum(AssignedPartitions), s.Sum(Rebalances), s.Sum(ProducerEpoch), s.Sum(LastCommit))
	}
	// LSO lag for the 3 input and 3 output partitions; nothing open, nothing hanging.
	if s.Series(LSOLag, "topic", "in") != 3 || s.Series(LSOLag, "topic", "out") != 3 || s.Sum(HangingTxns) != 0 {
		t.Errorf("LSO lag series in/out %d/%d, hanging %v", s.Series(LSOLag, "topic", "in"), s.Series(LSOLag, "topic", "out"), s.Sum(HangingTxns))
	}
	if s.Series(RecordsConsumed, "app", "copy", "instance", "0") != 1 {
		t.Errorf("metrics do not carry app and instance labels")
	}
	if s.Sum(Ready) != 1 {
		t.Errorf("%s = %v, want 1", Ready, s.Sum(Ready))
	}
	if code, body := testenv.Get(t, url+"/readyz"); code != http.StatusOK || !strings.Contains(body, "3 partitions assigned") {
		t.Errorf("/readyz while running: %d %q", code, body)
	}
	if code, _ := testenv.Get(t, url+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-pollDone
	if code, body := testenv.Get(t, url+"/readyz"); code != http.StatusServiceUnavailable || body != "stopped" {
		t.Errorf("/readyz after the worker stopped: %d %q", code, body)
	}
}

func TestIdleWorkerStaysReadyAndAStuckOneDoesNot(t *testing.T) {
	e := newEnv(t)
	if _, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: "in", Count: 100, Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// The worker logs its failed polls into the test's output. Its waits
	// are bounds: on Apache Kafka one poll can take up to its 5s timeout
	// while a just-created topic reaches the broker it asks.
	mw := NewWorker(WorkerConfig{App: "g", Instance: "0", Inputs: []string{"in"}, Output: "in-out", PollInterval: 50 * time.Millisecond, ClientOpts: e.opts,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	mw.window = 300 * time.Millisecond
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, "in-out", 1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go mw.Run(ctx)
	// What a worker reports when it starts and is given the partition; it
	// then never commits: the 100 records wait.
	mw.OnEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventStarted, ProducerID: 1})
	mw.OnEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventAssigned, Partitions: map[string][]int32{"in": {0}}})
	if ok, why := mw.Ready(); !ok {
		t.Fatalf("just assigned: not ready (%s)", why)
	}
	testenv.Eventually(t, 15*time.Second, "a worker with input that does not commit becomes unready", func() (bool, string) {
		ok, why := mw.Ready()
		return !ok && strings.Contains(why, "with 100 records to consume"), why
	})
	// The group commits everything (as the worker would): now it is idle,
	// with nothing to consume, and ready although its last commit is old.
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "in", Partition: 0, At: 100, LeaderEpoch: -1})
	if _, err := e.adm.CommitOffsets(e.ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "an idle worker is ready", func() (bool, string) {
		ok, why := mw.Ready()
		return ok && strings.Contains(why, "idle"), why
	})
	// Transactional input: a committed transaction of 5 records (offsets
	// 100-104, commit marker at 105). A caught-up worker commits 105, the
	// offset after the last record, never past the marker: lag 1, nothing
	// to read. Still idle, still ready.
	txp, err := kgo.NewClient(append(e.opts, kgo.TransactionalID("upstream"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer txp.Close()
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := txp.ProduceSync(e.ctx, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("t")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := txp.EndTransaction(e.ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	os = kadm.Offsets{}
	os.Add(kadm.Offset{Topic: "in", Partition: 0, At: 105, LeaderEpoch: -1})
	if _, err := e.adm.CommitOffsets(e.ctx, "g", os); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "idle on transactional input: lag 1 is only the commit marker", func() (bool, string) {
		ok, why := mw.Ready()
		return ok && strings.Contains(why, "only transaction markers"), why
	})
	// One more record waits: not idle any more.
	e.produceTo(t, "in", 0, 1)
	testenv.Eventually(t, 15*time.Second, "a record waiting behind the marker makes it unready", func() (bool, string) {
		ok, why := mw.Ready()
		return !ok && strings.Contains(why, "with 2 records to consume"), why
	})
	mw.OnEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventRevoked, Partitions: map[string][]int32{"in": {0}}})
	if ok, why := mw.Ready(); ok || why != "no partitions assigned" {
		t.Fatalf("after revocation: %v %q", ok, why)
	}
	mw.OnEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventFenced, Err: "fenced by epoch 3"})
	if ok, why := mw.Ready(); ok || !strings.Contains(why, "fenced by epoch 3") {
		t.Fatalf("after a fence: %v %q", ok, why)
	}
}

func TestMonitorSeesLSOLagGrowBehindAHangingTransaction(t *testing.T) {
	e := newEnv(t)
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, "in", 2, nil); err != nil {
		t.Fatal(err)
	}
	produce := func(n int) {
		cl, _ := kgo.NewClient(append(e.opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		defer cl.Close()
		for range n {
			cl.Produce(e.ctx, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("v")}, nil)
		}
		if err := cl.Flush(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(5)
	hung, err := kgo.NewClient(append(e.opts, kgo.TransactionalID("stuck"), kgo.TransactionTimeout(30*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	if err := hung.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := hung.ProduceSync(e.ctx, &kgo.Record{Topic: "in", Partition: 0, Value: []byte("hang")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	produce(10)

	m, err := NewMonitor(MonitorConfig{Instance: "test", Topics: []string{"in"}, Interval: 50 * time.Millisecond, HangingAfter: time.Second, ClientOpts: e.opts})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Poll(e.ctx); err != nil {
		t.Fatal(err)
	}
	url := serve(t, m.Handler())
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go m.Run(ctx)

	scrape := func() testenv.Scraped {
		s, err := testenv.Scrape(e.ctx, url+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := scrape()
	if got := s.Sum(LSOLag, "topic", "in", "partition", "0"); got != 11 {
		t.Fatalf("LSO lag of in[0] = %v, want 11 (1 open + 10 behind it)", got)
	}
	if s.Sum(LSOLag, "topic", "in", "partition", "1") != 0 || s.Sum(HangingTxns) != 0 {
		t.Fatalf("in[1] lag %v, hanging %v: want 0, 0", s.Sum(LSOLag, "topic", "in", "partition", "1"), s.Sum(HangingTxns))
	}
	produce(20)
	testenv.Eventually(t, 5*time.Second, "LSO lag grows and the transaction turns hanging after 1s", func() (bool, string) {
		s := scrape()
		lag, h, age := s.Sum(LSOLag, "topic", "in", "partition", "0"), s.Sum(HangingTxns, "topic", "in", "partition", "0"), s.Sum(OpenTransactionAge, "topic", "in", "partition", "0")
		return lag == 31 && h == 1 && age > 1, fmt.Sprintf("lag %v hanging %v age %v", lag, h, age)
	})
	if code, _ := testenv.Get(t, url+"/readyz"); code != http.StatusOK {
		t.Fatalf("monitor /readyz: %d", code)
	}

	p, err := inspect.TransactionAt(e.ctx, e.adm, "in", 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if err := inspect.WriteAbortMarker(e.ctx, e.adm, p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, "lag and hanging back to 0 after the abort", func() (bool, string) {
		s := scrape()
		return s.Sum(LSOLag) == 0 && s.Sum(HangingTxns) == 0 && s.Sum(OpenTransactionAge) == 0,
			fmt.Sprintf("lag %v hanging %v age %v", s.Sum(LSOLag), s.Sum(HangingTxns), s.Sum(OpenTransactionAge))
	})
}

func TestClientHooksSurviveOverlappingClients(t *testing.T) {
	e := newEnv(t)
	mw := NewWorker(WorkerConfig{App: "a", Instance: "0", Inputs: []string{"in"}, Output: "out", ClientOpts: e.opts})
	opts := append(e.opts, mw.ClientHooks())
	first, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := kgo.NewClient(opts...) // kprom alone panics here: duplicate registration
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	if err := second.Ping(e.ctx); err != nil {
		t.Fatal(err)
	}
	fams, err := mw.r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range fams {
		found = found || f.GetName() == "eos_client_connects_total"
	}
	if !found {
		t.Fatal("client metrics gone after the first of two clients closed")
	}
	second.Close()
	third, err := kgo.NewClient(opts...) // re-registers after all closed
	if err != nil {
		t.Fatal(err)
	}
	third.Close()
}

func TestListenOnABusyPortFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = Listen(ln.Addr().String(), http.NotFoundHandler())
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Listen on a busy port: %v", err)
	}
	if _, err := Listen("nonsense", http.NotFoundHandler()); err == nil || !strings.Contains(err.Error(), "not host:port") {
		t.Fatalf("Listen on a bad address: %v", err)
	}
}
