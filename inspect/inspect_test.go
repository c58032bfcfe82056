package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster is an embedded broker that allows hour-long transactions, with an
// admin client.
type cluster struct {
	b    testbroker.Cluster
	cl   *kgo.Client
	adm  *kadm.Client
	opts []kgo.Opt
	ctx  context.Context
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterOn(t, testbroker.Start(t, broker.Config{BrokerConfigs: map[string]string{"transaction.max.timeout.ms": "3600000"}}))
}

func newClusterOn(t *testing.T, b testbroker.Cluster) *cluster {
	t.Helper()
	conn := testbroker.Connect(t, b, time.Minute)
	return &cluster{b: b, ctx: conn.Ctx, opts: conn.Opts, cl: conn.Client, adm: kadm.NewClient(conn.Client)}
}

func (c *cluster) topic(t *testing.T, name string, partitions int32) {
	t.Helper()
	if _, _, err := admin.EnsureTopic(c.ctx, c.cl, name, partitions, nil); err != nil {
		t.Fatal(err)
	}
}

// produce writes n committed (idempotent, non-transactional) records to
// topic's partition p.
func (c *cluster) produce(t *testing.T, topic string, p int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(append(c.opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range n {
		cl.Produce(c.ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := cl.Flush(c.ctx); err != nil {
		t.Fatal(err)
	}
}

// hang begins a transaction as id, writes n records to topic's partition p
// and leaves the transaction open (30 minute timeout). It returns the
// client, which the test must not end the transaction with.
func (c *cluster) hang(t *testing.T, id, topic string, p int32, n int) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(c.opts, kgo.TransactionalID(id), kgo.TransactionTimeout(30*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := cl.ProduceSync(c.ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint("hang-", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func (c *cluster) offsets(t *testing.T, topic string, p int32) PartitionOffsets {
	t.Helper()
	offs, err := ReadOffsets(c.ctx, c.adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, p)
	if !ok {
		t.Fatalf("no offsets for %s[%d]", topic, p)
	}
	return o
}

func TestOpenTransactionPinsLSOUntilAbortMarker(t *testing.T) {
	c := newCluster(t)
	c.topic(t, "in", 2)
	c.produce(t, "in", 0, 10)
	c.hang(t, "stuck", "in", 0, 5)
	c.produce(t, "in", 0, 20)

	o := c.offsets(t, "in", 0)
	if o.LSO != 10 || o.HWM != 35 || o.Unstable() != 25 {
		t.Fatalf("with a transaction open at offset 10: %+v, want LSO 10, HWM 35, unstable 25", o)
	}
	if o := c.offsets(t, "in", 1); o.LSO != o.HWM {
		t.Fatalf("partition without a transaction has LSO %d != HWM %d", o.LSO, o.HWM)
	}

	open, err := Scan(c.ctx, c.adm, mustOffsets(t, c, "in"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 {
		t.Fatalf("Scan found %d open transactions, want 1: %+v", len(open), open)
	}
	ot := open[0]
	if ot.Topic != "in" || ot.Partition != 0 || ot.StartOffset != 10 || ot.TransactionalID != "stuck" || ot.State != "Ongoing" || ot.Problem != "" || ot.Blocked != 25 || ot.Hanging {
		t.Fatalf("open transaction = %+v", ot)
	}

	// Not hanging under the broker's default threshold (1h here), but
	// hanging under 2s once it is older than that.
	if h, thr, err := FindHanging(c.ctx, c.adm, 0, "in"); err != nil || len(h) != 0 || thr != time.Hour {
		t.Fatalf("default threshold: %d hanging, threshold %s, err %v; want none under 1h", len(h), thr, err)
	}
	time.Sleep(2100 * time.Millisecond)
	h, _, err := FindHanging(c.ctx, c.adm, 2*time.Second, "in")
	if err != nil || len(h) != 1 || h[0].StartOffset != 10 || h[0].Age < 2*time.Second || !strings.Contains(h[0].Reason, "longer than 2s") {
		t.Fatalf("FindHanging(2s) = %+v, %v; want the transaction at offset 10, older than 2s", h, err)
	}

	p, err := TransactionAt(c.ctx, c.adm, "in", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TransactionAt(c.ctx, c.adm, "in", 0, 11); !errors.Is(err, ErrNotFound) {
		t.Fatalf("TransactionAt a wrong offset: %v, want ErrNotFound", err)
	}
	if err := WriteAbortMarker(c.ctx, c.adm, p); err != nil {
		t.Fatal(err)
	}
	after, err := WaitPast(c.ctx, c.adm, map[string]map[int32]int64{"in": {0: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("in", 0); o.LSO != o.HWM || o.HWM != 36 {
		t.Fatalf("after the abort marker: %+v, want LSO = HWM = 36 (35 + the marker)", o)
	}
	if h, _, err := FindHanging(c.ctx, c.adm, time.Millisecond, "in"); err != nil || len(h) != 0 {
		t.Fatalf("after the abort marker FindHanging = %+v, %v; want none", h, err)
	}
	if n := readCommitted(t, c, "in", 0); n != 30 {
		t.Fatalf("read_committed sees %d records of in[0], want the 30 committed ones", n)
	}
}

// This one runs on the embedded broker even in the Apache Kafka suite: a
// coordinator that forgets its transactions is made through kfake's request
// control, and Apache Kafka's cannot be made to forget short of losing
// __transaction_state.
func TestTransactionUnknownToCoordinatorIsHanging(t *testing.T) {
	b := testbroker.Embedded(t, broker.Config{BrokerConfigs: map[string]string{"transaction.max.timeout.ms": "3600000"}})
	c := newClusterOn(t, b)
	c.topic(t, "in", 1)
	c.hang(t, "lost", "in", 0, 3)
	// The coordinator "forgets" every transaction: ListTransactions
	// answers with none, as a coordinator that lost its state would.
	b.Cluster().ControlKey(int16(kmsg.ListTransactions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		return req.ResponseKind(), nil, true
	})
	h, _, err := FindHanging(c.ctx, c.adm, time.Hour, "in")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1 || !strings.Contains(h[0].Reason, "no coordinator knows producer id") || h[0].TransactionalID != "" {
		t.Fatalf("FindHanging = %+v; want the transaction, unknown to any coordinator, although it is young", h)
	}
}

func TestFenceAbortsTheOpenTransaction(t *testing.T) {
	c := newCluster(t)
	c.topic(t, "in", 1)
	c.produce(t, "in", 0, 4)
	hung := c.hang(t, "stuck", "in", 0, 3)
	_, oldEpoch, _ := hung.ProducerID(c.ctx)

	f, err := FenceTransactionalID(c.ctx, c.adm, c.opts, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if f.Before.State != "Ongoing" || !f.Before.Has("in", 0) || f.Epoch <= oldEpoch || f.Before.Timeout != 30*time.Minute {
		t.Fatalf("fence = %+v (old epoch %d): want an Ongoing transaction on in[0], a higher epoch, the 30m timeout kept", f, oldEpoch)
	}
	after, err := WaitPast(c.ctx, c.adm, map[string]map[int32]int64{"in": {0: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := after.Lookup("in", 0); o.LSO != o.HWM {
		t.Fatalf("after the fence: %+v, want LSO = HWM", o)
	}
	if err := hung.EndTransaction(c.ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	if n := readCommitted(t, c, "in", 0); n != 4 {
		t.Fatalf("read_committed sees %d records, want the 4 committed before the fenced transaction", n)
	}
	if _, err := FenceTransactionalID(c.ctx, c.adm, c.opts, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("fencing an unknown id: %v, want ErrNotFound", err)
	}
}

func TestLagIsMeasuredAgainstTheLSO(t *testing.T) {
	c := newCluster(t)
	c.topic(t, "in", 2)
	c.produce(t, "in", 0, 10)
	c.produce(t, "in", 1, 7)
	c.hang(t, "stuck", "in", 1, 2)
	c.produce(t, "in", 1, 3)
	commit(t, c, "g", "in", 0, 4)

	gl, err := Lag(c.ctx, c.adm, "g")
	if err != nil {
		t.Fatal(err)
	}
	want := []PartitionLag{
		{Topic: "in", Partition: 0, Committed: 4, LSO: 10, HWM: 10, Lag: 6, Unstable: 0},
		{Topic: "in", Partition: 1, Committed: -1, LSO: 7, HWM: 12, Lag: 7, Unstable: 5},
	}
	if len(gl.Partitions) != 2 || gl.Partitions[0] != want[0] || gl.Partitions[1] != want[1] || gl.TotalLag != 13 || gl.TotalUnstable != 5 {
		t.Fatalf("Lag = %+v, want partitions %+v, total lag 13, unstable 5", gl, want)
	}
	if _, err := Lag(c.ctx, c.adm, "nobody"); !errors.Is(err, ErrNoCommits) {
		t.Fatalf("lag of a group without commits: %v, want ErrNoCommits", err)
	}
	if _, err := Lag(c.ctx, c.adm, "g", "missing"); !errors.Is(err, admin.ErrNoTopic) {
		t.Fatalf("lag on a missing topic: %v, want admin.ErrNoTopic", err)
	}
}

func TestListAndDescribeTransactions(t *testing.T) {
	c := newCluster(t)
	c.topic(t, "in", 3)
	c.hang(t, "open-1", "in", 2, 1)
	done := c.hang(t, "done-1", "in", 1, 1)
	if err := done.EndTransaction(c.ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// On Apache Kafka the cluster is shared with the package's other
	// tests, and transactional ids outlive their topics (for
	// transactional.id.expiration.ms): judge only this test's ids.
	all, err := ListTransactions(c.ctx, c.adm)
	all = only(all, "open-1", "done-1")
	if err != nil || len(all) != 2 || all[0].TransactionalID != "done-1" || all[1].TransactionalID != "open-1" {
		t.Fatalf("ListTransactions = %+v, %v", all, err)
	}
	ongoing, err := ListTransactions(c.ctx, c.adm, "Ongoing")
	ongoing = only(ongoing, "open-1", "done-1")
	if err != nil || len(ongoing) != 1 || ongoing[0].TransactionalID != "open-1" || ongoing[0].State != "Ongoing" {
		t.Fatalf("ListTransactions(Ongoing) = %+v, %v", ongoing, err)
	}
	ds, err := DescribeTransactions(c.ctx, c.adm, "open-1", "done-1")
	if err != nil {
		t.Fatal(err)
	}
	if d := ds[0]; d.State != "Ongoing" || !d.Has("in", 2) || d.Started.IsZero() || time.Since(d.Started) > time.Minute || d.Timeout != 30*time.Minute {
		t.Fatalf("describe open-1 = %+v", d)
	}
	// Apache Kafka answers the commit once it has logged PrepareCommit and
	// writes the markers afterwards: describe may still see PrepareCommit
	// (open: the LSO waits for the markers), then CompleteCommit. The
	// embedded broker completes before it answers.
	for d := ds[1]; d.Open(); d = ds[1] {
		if d.State != "PrepareCommit" || time.Since(d.Started) > time.Minute {
			t.Fatalf("describe done-1 = %+v, want PrepareCommit on its way to CompleteCommit", d)
		}
		time.Sleep(50 * time.Millisecond)
		if ds, err = DescribeTransactions(c.ctx, c.adm, "open-1", "done-1"); err != nil {
			t.Fatal(err)
		}
	}
	if d := ds[1]; len(d.Partitions) != 0 {
		t.Fatalf("describe done-1 = %+v, want no open transaction", d)
	}
	if _, err := DescribeTransactions(c.ctx, c.adm, "open-1", "ghost"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"ghost"`) {
		t.Fatalf("describing an unknown id: %v", err)
	}
	prods, err := Producers(c.ctx, c.adm, "in", 2)
	if err != nil || len(prods) != 1 || prods[0].TxnStartOffset != 0 || prods[0].ProducerID != ongoing[0].ProducerID {
		t.Fatalf("Producers(in, 2) = %+v, %v", prods, err)
	}
	if _, err := Producers(c.ctx, c.adm, "in", 7); !errors.Is(err, admin.ErrNoTopic) {
		t.Fatalf("Producers on a missing partition: %v", err)
	}
	if _, err := Producers(c.ctx, c.adm, "nope"); !errors.Is(err, admin.ErrNoTopic) {
		t.Fatalf("Producers on a missing topic: %v", err)
	}
}

// only keeps the transactions of ids, in their order in ts.
func only(ts []ListedTransaction, ids ...string) []ListedTransaction {
	var out []ListedTransaction
	for _, x := range ts {
		if slices.Contains(ids, x.TransactionalID) {
			out = append(out, x)
		}
	}
	return out
}

func mustOffsets(t *testing.T, c *cluster, topics ...string) Offsets {
	t.Helper()
	offs, err := ReadOffsets(c.ctx, c.adm, topics...)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// commit commits offset for group on topic's partition p.
func commit(t *testing.T, c *cluster, group, topic string, p int32, offset int64) {
	t.Helper()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: topic, Partition: p, At: offset, LeaderEpoch: -1})
	resp, err := c.adm.CommitOffsets(c.ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readCommitted counts the records a read_committed consumer sees in
// topic's partition p, reading until nothing more arrives for half a second.
func readCommitted(t *testing.T, c *cluster, topic string, p int32) int {
	t.Helper()
	cl, err := kgo.NewClient(append(c.opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(c.ctx, 500*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		got := 0
		fs.EachRecord(func(*kgo.Record) { got++ })
		if got == 0 {
			return n
		}
		n += got
	}
}
