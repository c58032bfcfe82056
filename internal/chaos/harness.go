// Package chaos is the fault-injection suite of eos: the faults Kafka's own
// transaction system tests and Jepsen inject, applied to real eosctl worker
// processes, each scenario judged by verify (read_committed, after the
// faults) and by a read_committed reader running during them.
//
// `go test ./internal/chaos/` runs every scenario in a short form (with
// -short only three of them, chaos_test.go's inShort); `eosctl chaos`
// (and `make chaos`) runs the long form and prints the table published in
// RELIABILITY.md.
package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/internal/supervise"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness runs one scenario's broker, clients and worker processes.
type harness struct {
	bin  string
	logs io.Writer
	dir  string
	// rng draws the scenario's random instants and victims, from the seed
	// in its Result; one goroutine (the scenario's faults) uses it.
	rng *rand.Rand

	// topology is what `eosctl run` runs, the topology and its flags;
	// passthrough if empty.
	topology []string

	b *broker.Broker // in-process broker, if any
	// kafka is the Apache Kafka cluster the scenario runs against instead
	// of an embedded broker, if any; it outlives the scenario.
	kafka *kafkacluster.Cluster
	bproc *supervise.Proc // broker process, if any
	// interrupted counts the transactions the broker process's crash
	// recovery aborted on its restarts.
	interrupted atomic.Int64
	bargs       []string
	brokers     string
	opts        []kgo.Opt
	cl          *kgo.Client

	mu      sync.Mutex
	workers map[string]*supervise.Proc
	args    map[string][]string
	events  []pipeline.Event
	exits   map[string][]int
	stopped bool // stopWorkers ran: exits are no longer restarted
}

func newHarness(bin string, logs io.Writer) (*harness, error) {
	dir, err := os.MkdirTemp("", "eos-chaos-")
	if err != nil {
		return nil, err
	}
	if logs == nil {
		logs = io.Discard
	}
	return &harness{bin: bin, logs: logs, dir: dir, workers: map[string]*supervise.Proc{}, args: map[string][]string{}, exits: map[string][]int{}}, nil
}

// inProcessBroker starts the broker in this process, where faults can be
// injected into it.
//
// On Apache Kafka the scenario gets the shared cluster instead: cfg's
// faults are the proxies' (faultsOr), and its settings are KafkaConfigs.
func (h *harness) inProcessBroker(ctx context.Context, cfg broker.Config) error {
	if h.kafka != nil {
		return h.useKafka(ctx)
	}
	cfg.MinSessionTimeout = time.Second
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	h.b = b
	return h.connect(ctx, b.Addrs())
}

// processBroker starts `eosctl broker` as a child process on a fixed port
// with a data directory, so that it can be SIGKILLed and restarted.
// On Apache Kafka the scenario gets the shared cluster, whose nodes
// bounceNode stops and starts.
func (h *harness) processBroker(ctx context.Context, extra ...string) error {
	if h.kafka != nil {
		return h.useKafka(ctx)
	}
	addr, err := broker.FreeAddr()
	if err != nil {
		return err
	}
	h.bargs = []string{"broker", "--listen", addr, "--data-dir", h.dir + "/broker", "--min-session-timeout", "1s", "--log-level", "warn", "--sync-writes"}
	h.bargs = append(h.bargs, extra...)
	if err := h.startBroker(ctx); err != nil {
		return err
	}
	return h.connect(ctx, []string{addr})
}

func (h *harness) startBroker(ctx context.Context) error {
	p, err := supervise.Start(ctx, supervise.Config{Name: "broker", Bin: h.bin, Args: h.bargs, Stderr: interruptedCounter{prefixed{h.logs, "broker"}, &h.interrupted}})
	if err != nil {
		return err
	}
	h.bproc = p
	return nil
}

// bounceBroker stops the broker process, with SIGKILL if hard and SIGTERM
// (which writes its state to disk) otherwise, and starts it again on the
// same port and data directory. It returns when the new broker answers.
func (h *harness) bounceBroker(ctx context.Context, down time.Duration, hard bool) (restarted time.Time, err error) {
	if hard {
		// SIGUSR1: the broker SIGKILLs itself between two requests
		// (broker.KillBetweenRequests says why not at any instant).
		_ = h.bproc.Signal(syscall.SIGUSR1)
		select {
		case <-h.bproc.Done():
		case <-time.After(10 * time.Second):
			h.bproc.Kill()
		}
	} else {
		_ = h.bproc.Signal(syscall.SIGTERM)
	}
	h.bproc.Wait()
	time.Sleep(down)
	if err := h.startBroker(ctx); err != nil {
		return time.Time{}, err
	}
	restarted = time.Now()
	return restarted, h.ping(ctx, 20*time.Second)
}

// moveLeaders moves partition leaders of the in-process cluster, one of
// three ways by how: 0 every partition of the cluster
// (ShufflePartitionLeaders), 1 every partition of app's topics one node
// over (MoveTopicPartition), 2 an election on every partition (an
// ElectLeaders request, as an admin would send).
func (h *harness) moveLeaders(ctx context.Context, app string, how int) error {
	if h.kafka != nil {
		return h.moveKafkaLeaders(ctx, app, how)
	}
	c := h.b.Cluster()
	switch how {
	case 0:
		c.ShufflePartitionLeaders()
	case 1:
		topics, err := kadm.NewClient(h.cl).ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("listing topics to move: %w", err)
		}
		nodes := int32(len(h.b.Addrs()))
		for _, t := range topics.Sorted() {
			if !strings.HasPrefix(t.Topic, app+"-") {
				continue
			}
			for _, p := range t.Partitions.Sorted() {
				if err := c.MoveTopicPartition(t.Topic, p.Partition, (p.Leader+1)%nodes); err != nil {
					return fmt.Errorf("moving %s[%d]: %w", t.Topic, p.Partition, err)
				}
			}
		}
	case 2:
		if _, err := kmsg.NewPtrElectLeadersRequest().RequestWith(ctx, h.cl); err != nil { // no topics: every partition
			return fmt.Errorf("electing leaders: %w", err)
		}
	}
	return nil
}

// connect connects to addrs, waiting up to 20s for a broker that is still
// starting.
func (h *harness) connect(ctx context.Context, addrs []string) error {
	h.brokers = addrs[0]
	h.opts = []kgo.Opt{kgo.SeedBrokers(addrs...)}
	cl, err := kgo.NewClient(h.opts...)
	if err != nil {
		return err
	}
	h.cl = cl
	return h.ping(ctx, 20*time.Second)
}

// ping waits until the broker answers, retrying refused connections.
func (h *harness) ping(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := admin.Ping(ctx, h.cl, time.Second)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// close stops everything and removes the scenario's files.
func (h *harness) close() {
	h.mu.Lock()
	for _, p := range h.workers {
		p.Kill()
	}
	h.mu.Unlock()
	if h.cl != nil {
		h.cl.Close()
	}
	if h.b != nil {
		h.b.Close()
	}
	if h.bproc != nil {
		h.bproc.Kill()
	}
	os.RemoveAll(h.dir)
}

// produce writes n datagen records to topic at rate records/s in the
// background; the channel yields the result.
func (h *harness) produce(ctx context.Context, topic string, n int64, partitions int32, rate int) (<-chan error, error) {
	if _, _, err := admin.EnsureTopic(ctx, h.cl, topic, partitions, nil); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := datagen.Produce(ctx, h.cl, datagen.Config{Topic: topic, Count: n, Size: 100, Partitions: partitions, Rate: rate})
		done <- err
	}()
	return done, nil
}

// startWorker starts instance i of app as `eosctl run` of h.topology.
func (h *harness) startWorker(ctx context.Context, app string, i int, in, out string, extra ...string) error {
	w := supervise.Worker{Topology: topologyPassthrough, Brokers: h.brokers, App: app, Instance: i, Input: in, Output: out,
		SessionTimeout: 6 * time.Second, LogLevel: logLevel(), Extra: []string{"--timeout", "30s"}}
	if len(h.topology) > 0 {
		w.Topology, w.Extra = h.topology[0], append(w.Extra, h.topology[1:]...)
	}
	w.Extra = append(w.Extra, extra...)
	return h.start(ctx, w.Name(), w.Args())
}

func (h *harness) start(ctx context.Context, name string, args []string) error {
	p, err := supervise.Start(ctx, supervise.Config{
		Name: name, Bin: h.bin, Args: args, Stderr: prefixed{h.logs, name},
		OnEvent: func(_ string, e pipeline.Event) {
			h.mu.Lock()
			h.events = append(h.events, e)
			h.mu.Unlock()
		},
	})
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.workers[name], h.args[name] = p, args
	h.mu.Unlock()
	return nil
}

// restart starts the named worker again with the same arguments.
func (h *harness) restart(ctx context.Context, name string) error {
	h.mu.Lock()
	args := h.args[name]
	h.mu.Unlock()
	return h.start(ctx, name, args)
}

func (h *harness) worker(name string) *supervise.Proc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.workers[name]
}

// kill SIGKILLs the named worker and restarts it with the same instance id.
func (h *harness) killAndRestart(ctx context.Context, name string) error {
	h.worker(name).Kill()
	return h.restart(ctx, name)
}

// supervise restarts, with the same arguments, any worker that has exited,
// until ctx ends; it records exit codes. Real deployments restart crashed
// workers the same way (systemd, Kubernetes).
func (h *harness) superviseWorkers(ctx context.Context) {
	go func() {
		for ctx.Err() == nil {
			h.mu.Lock()
			var dead []string
			for name, p := range h.workers {
				if h.stopped {
					break
				}
				select {
				case <-p.Done():
					dead = append(dead, name)
					h.exits[name] = append(h.exits[name], p.Wait())
				default:
				}
			}
			h.mu.Unlock()
			for _, name := range dead {
				_ = h.restart(ctx, name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// recoveries returns, per worker, the delay from t to its first commit
// after t: how long it took to recover from a fault at t.
func (h *harness) recoveries(t time.Time) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := map[string]time.Time{}
	for _, e := range h.events {
		if e.Kind == pipeline.EventCommitted && e.Time.After(t) {
			if f, ok := first[e.TransactionalID]; !ok || e.Time.Before(f) {
				first[e.TransactionalID] = e.Time
			}
		}
	}
	var out []time.Duration
	for _, f := range first {
		out = append(out, f.Sub(t))
	}
	return out
}

func (h *harness) count(kind pipeline.EventKind) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return pipeline.CountEvents(h.events, kind)
}

// waitCaughtUp waits until group has committed everything in topics, and
// on timeout says where each partition and each worker stands.
func (h *harness) waitCaughtUp(ctx context.Context, group string, within time.Duration, topics ...string) error {
	if err := committed.WaitCaughtUp(ctx, h.opts, committed.Wait{Group: group, Topics: topics, Within: within}); err != nil {
		return fmt.Errorf("%w; %s; workers: %s", err, h.offsets(ctx, group, topics...), h.workerStates())
	}
	return nil
}

// stopWorkers sends SIGTERM to every worker and waits for them.
func (h *harness) stopWorkers() {
	h.mu.Lock()
	h.stopped = true
	procs := make([]*supervise.Proc, 0, len(h.workers))
	for _, p := range h.workers {
		procs = append(procs, p)
	}
	h.mu.Unlock()
	for _, p := range procs {
		_ = p.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(20 * time.Second):
			p.Kill()
		}
	}
}

// judge stops the tail and verifies the output, filling the result.
func (h *harness) judge(ctx context.Context, res *Result, in, out string, tail *verify.Tail) error {
	rep, err := verify.Run(ctx, h.opts, verify.Config{Input: in, Output: out, Timeout: 2 * time.Minute})
	if err != nil {
		return err
	}
	res.Verify = rep
	res.Records = rep.InputRecords
	if tail != nil {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = tail.WaitFor(wctx, rep.InputRecords)
		cancel()
		tr := tail.Stop()
		res.Tail = &tr
	}
	return nil
}

// interruptedCounter passes a broker's log through and adds up the
// transactions its crash recovery aborted (broker.RecoveredMessage).
type interruptedCounter struct {
	w io.Writer
	n *atomic.Int64
}

var recoveredCount = regexp.MustCompile(regexp.QuoteMeta(broker.RecoveredMessage) + `.*\btransactions=(\d+)`)

func (r interruptedCounter) Write(b []byte) (int, error) {
	for _, m := range recoveredCount.FindAllSubmatch(b, -1) {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		r.n.Add(n)
	}
	return r.w.Write(b)
}

// prefixed writes each line of a worker's stderr with its name.
type prefixed struct {
	w    io.Writer
	name string
}

func (p prefixed) Write(b []byte) (int, error) {
	if p.w == io.Discard {
		return len(b), nil
	}
	fmt.Fprintf(p.w, "[%s] %s", p.name, b)
	return len(b), nil
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1)+0.5)]
}

// logLevel is the workers' log level: warn, or $EOS_CHAOS_LOG_LEVEL.
func logLevel() string {
	if l := os.Getenv("EOS_CHAOS_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// catchUp bounds how long a scenario waits for the workers to drain the
// input after the faults.
func catchUp() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EOS_CHAOS_CATCHUP")); err == nil {
		return d
	}
	return 2 * time.Minute
}

// offsets describes, per partition, the committed offset, LSO and HWM, for
// error messages.
func (h *harness) offsets(ctx context.Context, group string, topics ...string) string {
	adm := kadm.NewClient(h.cl)
	lso, _ := adm.ListCommittedOffsets(ctx, topics...)
	hwm, _ := adm.ListEndOffsets(ctx, topics...)
	com, _ := adm.FetchOffsets(ctx, group)
	var b strings.Builder
	lso.Each(func(o kadm.ListedOffset) {
		h, _ := hwm.Lookup(o.Topic, o.Partition)
		c, _ := com.Lookup(o.Topic, o.Partition)
		fmt.Fprintf(&b, "%s[%d] committed %d lso %d hwm %d; ", o.Topic, o.Partition, c.At, o.Offset, h.Offset)
	})
	return b.String()
}

// workerStates describes each worker's state, for error messages.
func (h *harness) workerStates() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for name, p := range h.workers {
		select {
		case <-p.Done():
			fmt.Fprintf(&b, "%s exited %d (last event %s %s); ", name, p.Wait(), p.Last().Kind, p.Last().Err)
		default:
			fmt.Fprintf(&b, "%s running (last event %s); ", name, p.Last().Kind)
		}
	}
	return b.String()
}
