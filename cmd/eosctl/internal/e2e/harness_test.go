package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eosctl is the binary under test, built once by TestMain.
var eosctl string

func TestMain(m *testing.M) {
	var cleanup func()
	var err error
	if eosctl, cleanup, err = eosctltest.Build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testbroker.Stop()
	cleanup()
	os.Exit(code)
}

// env is one test's broker and admin client, and the fleet of its worker
// processes (package fleet, which the chaos scenarios run in too): a
// testing adapter that fails the test where the fleet returns an error.
type env struct {
	*fleet.Fleet
	t    *testing.T
	b    testbroker.Cluster
	cl   *kgo.Client
	opts []kgo.Opt
	ctx  context.Context
	logs *fleet.Buffer
}

func newEnv(t *testing.T, cfg broker.Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, nil)
}

// waitsInParallel lets a test that spends most of its time waiting (on a
// timeout or a grace period the command under test must honour, a
// signal's delivery) run beside the others under go test -short on the
// embedded broker, where every test has a broker of its own: the short
// suite's wall time is this package's. On Apache Kafka (one shared
// cluster) and in the full suite such a test runs alone as before. It
// must be the test's first call, and the test must not change the
// process's environment.
func waitsInParallel(t *testing.T) {
	if testing.Short() && !testbroker.IsKafka() {
		t.Parallel()
	}
}

// newEnvWith is newEnv with extra connection options (TLS, SASL) for the
// test's own clients.
func newEnvWith(t *testing.T, cfg broker.Config, connOpts []kgo.Opt) *env {
	t.Helper()
	cfg.MinSessionTimeout = time.Second
	return newEnvOn(t, testbroker.Start(t, cfg), connOpts)
}

// newEnvOn is newEnvWith on a cluster the test started itself.
func newEnvOn(t *testing.T, b testbroker.Cluster, connOpts []kgo.Opt) *env {
	t.Helper()
	conn := testbroker.Connect(t, b, 4*time.Minute, connOpts...)
	logs := &fleet.Buffer{}
	f := fleet.New(eosctl, logs)
	f.Opts, f.Client = conn.Opts, conn.Client
	e := &env{Fleet: f, t: t, b: b, ctx: conn.Ctx, opts: conn.Opts, cl: conn.Client, logs: logs}
	t.Cleanup(func() {
		e.Kill()
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	return e
}

// produce writes n datagen records to topic, at rate records/s (0: flat out).
func (e *env) produce(topic string, n int64, partitions int32, rate int) {
	e.t.Helper()
	if _, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: topic, Count: n, Size: 100, Partitions: partitions, Rate: rate}); err != nil {
		e.t.Fatal(err)
	}
}

// produceAsync produces in the background; the returned channel yields its error.
func (e *env) produceAsync(topic string, n int64, partitions int32, rate int) <-chan error {
	e.t.Helper()
	return e.produceAsyncCtx(e.ctx, topic, n, partitions, rate)
}

// produceAsyncCtx is produceAsync under ctx: canceling it ends the
// production early (the records acknowledged by then are the input).
func (e *env) produceAsyncCtx(ctx context.Context, topic string, n int64, partitions int32, rate int) <-chan error {
	e.t.Helper()
	done, err := e.Produce(ctx, topic, n, partitions, rate)
	if err != nil {
		e.t.Fatal(err)
	}
	return done
}

// worker starts `eosctl run passthrough` for instance i of app.
func (e *env) worker(app string, i int, in, out string, extra ...string) *supervise.Proc {
	e.t.Helper()
	return e.topologyWorker("passthrough", app, i, in, out, extra...)
}

// topologyWorker starts `eosctl run TOPOLOGY` for instance i of app, with
// the same settings as worker.
func (e *env) topologyWorker(topology, app string, i int, in, out string, extra ...string) *supervise.Proc {
	e.t.Helper()
	w := supervise.Worker{Topology: topology, Brokers: e.b.Addrs()[0], App: app, Instance: i, Input: in, Output: out,
		SessionTimeout: 3 * time.Second, Extra: extra}
	return e.start(w.Name(), w.Args())
}

// start starts eosctl with args as process name: its stderr goes to the
// test's logs, its events (--events -) to the fleet's events.
func (e *env) start(name string, args []string) *supervise.Proc {
	e.t.Helper()
	p, err := e.Start(e.ctx, name, args)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// topics lists the cluster's topics. On Apache Kafka the cluster is shared
// with the package's other tests, so a test that checks what it created
// compares against the list taken before (requireNoNewTopics).
func (e *env) topics() kadm.TopicDetails {
	e.t.Helper()
	ts, err := kadm.NewClient(e.cl).ListTopics(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

// requireNoNewTopics fails the test for every topic not in before.
func (e *env) requireNoNewTopics(before kadm.TopicDetails, what string) {
	e.t.Helper()
	for _, name := range e.topics().Names() {
		if !before.Has(name) {
			e.t.Errorf("%s left topic %q behind", what, name)
		}
	}
}

// tail starts a concurrent read_committed reader of topic.
func (e *env) tail(topic string) *verify.Tail {
	e.t.Helper()
	tl, err := verify.NewTail(e.ctx, e.opts, topic)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { tl.Stop() })
	return tl
}

// waitCaughtUp waits until group has committed everything in topics, with
// no transaction still open or completing there.
func (e *env) waitCaughtUp(group string, within time.Duration, topics ...string) {
	e.t.Helper()
	if err := e.WaitCaughtUp(e.ctx, committed.Wait{Group: group, Topics: topics, Within: within}); err != nil {
		e.t.Fatal(err)
	}
}

// waitCaughtUpToLSO waits until group has committed everything in topics up
// to the last stable offset: for drills that hold transactions open.
func (e *env) waitCaughtUpToLSO(group string, within time.Duration, topics ...string) {
	e.t.Helper()
	if err := e.WaitCaughtUp(e.ctx, committed.Wait{Group: group, Topics: topics, Within: within, OpenTransactions: true}); err != nil {
		e.t.Fatal(err)
	}
}

// stop sends SIGTERM to every running worker and requires exit code 0.
func (e *env) stop() {
	e.t.Helper()
	for _, x := range e.Stop(20 * time.Second) {
		switch {
		case x.TimedOut:
			e.t.Errorf("worker %s did not exit within 20s of SIGTERM", x.Name)
		case x.Code != 0:
			e.t.Errorf("worker %s exited %d after SIGTERM, want 0", x.Name, x.Code)
		}
	}
}

// requireExactlyOnce is the verdict every exactly-once test ends with: the
// final read_committed read of the output and the concurrent tail both see
// every input record exactly once, in input order per partition.
func (e *env) requireExactlyOnce(in, out string, tl *verify.Tail, n int64) {
	e.t.Helper()
	j, err := e.Judge(e.ctx, fleet.Verdict{Input: in, Output: out, Tail: tl, Timeout: time.Minute, TailWithin: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	if rep := j.Verify; !rep.OK() || rep.InputRecords != n {
		e.t.Fatalf("verify after the faults: %s (want %d input records)", rep.Summary(), n)
	}
	if tl != nil {
		if j.TailErr != nil {
			e.t.Fatalf("concurrent read_committed reader: %v", j.TailErr)
		}
		if tr := *j.Tail; !tr.OK() || tr.Keys != n {
			e.t.Fatalf("concurrent read_committed reader: %s (want %d keys)", tr, n)
		}
		e.t.Logf("%s; %s", j.Verify.Summary(), *j.Tail)
	}
}

// endOffsets sums the high watermarks of topic's partitions: its record
// count, for a topic written without transactions.
func (e *env) endOffsets(topic string) int64 {
	e.t.Helper()
	offs, err := kadm.NewClient(e.cl).ListEndOffsets(e.ctx, topic)
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
