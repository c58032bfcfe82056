package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/eosctltest"
	"github.com/eosctl/eos/internal/supervise"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/eosctl/eos/pipeline"
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

// env is one test's broker, admin client and worker processes.
type env struct {
	t      *testing.T
	b      testbroker.Cluster
	cl     *kgo.Client
	opts   []kgo.Opt
	ctx    context.Context
	mu     sync.Mutex
	procs  []*supervise.Proc
	events []pipeline.Event
	logs   *bytes.Buffer
}

func newEnv(t *testing.T, cfg broker.Config) *env {
	t.Helper()
	return newEnvWith(t, cfg, nil)
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
	e := &env{t: t, b: b, ctx: conn.Ctx, opts: conn.Opts, cl: conn.Client, logs: &bytes.Buffer{}}
	t.Cleanup(func() {
		for _, p := range e.procs {
			p.Kill()
		}
		if t.Failed() {
			e.mu.Lock()
			t.Logf("worker logs:\n%s", e.logs.String())
			e.mu.Unlock()
		}
	})
	return e
}

// lockedWriter serialises the stderr of all workers into one buffer.
type lockedWriter struct {
	e    *env
	name string
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	defer w.e.mu.Unlock()
	for _, line := range bytes.SplitAfter(p, []byte("\n")) {
		if len(line) > 0 {
			fmt.Fprintf(w.e.logs, "[%s] %s", w.name, line)
		}
	}
	return len(p), nil
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
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, topic, partitions, nil); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := datagen.Produce(e.ctx, e.cl, datagen.Config{Topic: topic, Count: n, Size: 100, Partitions: partitions, Rate: rate})
		done <- err
	}()
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
// test's logs, its events (--events -) to e.events.
func (e *env) start(name string, args []string) *supervise.Proc {
	e.t.Helper()
	p, err := supervise.Start(e.ctx, supervise.Config{
		Name: name, Bin: eosctl, Args: args, Stderr: lockedWriter{e, name},
		OnEvent: func(_ string, ev pipeline.Event) {
			e.mu.Lock()
			e.events = append(e.events, ev)
			e.mu.Unlock()
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// count returns how many events of kind all workers have written.
func (e *env) count(kind pipeline.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return pipeline.CountEvents(e.events, kind)
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

// commitsByInstance counts the committed events of each instance.
func (e *env) commitsByInstance() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	by := map[string]int{}
	for _, ev := range e.events {
		if ev.Kind == pipeline.EventCommitted {
			by[ev.Instance]++
		}
	}
	return by
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
	if err := committed.WaitCaughtUp(e.ctx, e.opts, committed.Wait{Group: group, Topics: topics, Within: within}); err != nil {
		e.t.Fatal(err)
	}
}

// waitCaughtUpToLSO waits until group has committed everything in topics up
// to the last stable offset: for drills that hold transactions open.
func (e *env) waitCaughtUpToLSO(group string, within time.Duration, topics ...string) {
	e.t.Helper()
	if err := committed.WaitCaughtUp(e.ctx, e.opts, committed.Wait{Group: group, Topics: topics, Within: within, OpenTransactions: true}); err != nil {
		e.t.Fatal(err)
	}
}

// stop sends SIGTERM to every running worker and requires exit code 0.
func (e *env) stop() {
	e.t.Helper()
	for _, p := range e.procs {
		select {
		case <-p.Done():
			continue
		default:
		}
		_ = p.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
			if code := p.Wait(); code != 0 {
				e.t.Errorf("worker %s exited %d after SIGTERM, want 0", p.Name, code)
			}
		case <-time.After(20 * time.Second):
			e.t.Errorf("worker %s did not exit within 20s of SIGTERM", p.Name)
			p.Kill()
		}
	}
}

// requireExactlyOnce is the verdict every exactly-once test ends with: the
// final read_committed read of the output and the concurrent tail both see
// every input record exactly once, in input order per partition.
func (e *env) requireExactlyOnce(in, out string, tl *verify.Tail, n int64) {
	e.t.Helper()
	rep, err := verify.Run(e.ctx, e.opts, verify.Config{Input: in, Output: out, Timeout: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	if !rep.OK() || rep.InputRecords != n {
		e.t.Fatalf("verify after the faults: %s (want %d input records)", rep.Summary(), n)
	}
	if tl != nil {
		if err := tl.WaitFor(e.ctx, n); err != nil {
			e.t.Fatalf("concurrent read_committed reader: %v", err)
		}
		tr := tl.Stop()
		if !tr.OK() || tr.Keys != n {
			e.t.Fatalf("concurrent read_committed reader: %s (want %d keys)", tr, n)
		}
		e.t.Logf("%s; %s", rep.Summary(), tr)
	}
}

// eventsSnapshot copies the events the workers have written so far.
func (e *env) eventsSnapshot() []pipeline.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// produceAsyncCtx is produceAsync under ctx: canceling it ends the
// production early (the records acknowledged by then are the input).
func (e *env) produceAsyncCtx(ctx context.Context, topic string, n int64, partitions int32, rate int) <-chan error {
	e.t.Helper()
	if _, _, err := admin.EnsureTopic(e.ctx, e.cl, topic, partitions, nil); err != nil {
		e.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := datagen.Produce(ctx, e.cl, datagen.Config{Topic: topic, Count: n, Size: 100, Partitions: partitions, Rate: rate})
		done <- err
	}()
	return done
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
