// Package chaos is the fault-injection suite of eos: the faults Kafka's own
// transaction system tests and Jepsen inject, applied to real eosctl worker
// processes, each scenario judged by verify (read_committed, after the
// faults) and by a read_committed reader running during them.
//
// `go test ./cmd/eosctl/internal/chaos/` runs every scenario in a short form (with
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// harness runs one scenario's broker, clients and worker processes: the
// broker and its faults are the scenario's, the workers, their events,
// the wait and the verdict the shared fleet's.
type harness struct {
	*fleet.Fleet
	bin string
	dir string
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
}

func newHarness(bin string, logs io.Writer) (*harness, error) {
	dir, err := os.MkdirTemp("", "eos-chaos-")
	if err != nil {
		return nil, err
	}
	return &harness{Fleet: fleet.New(bin, logs), bin: bin, dir: dir}, nil
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
	p, err := supervise.Start(ctx, supervise.Config{Name: "broker", Bin: h.bin, Args: h.bargs, Stderr: interruptedCounter{h.LogWriter("broker"), &h.interrupted}})
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
		topics, err := kadm.NewClient(h.Client).ListTopics(ctx)
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
		if _, err := kmsg.NewPtrElectLeadersRequest().RequestWith(ctx, h.Client); err != nil { // no topics: every partition
			return fmt.Errorf("electing leaders: %w", err)
		}
	}
	return nil
}

// connect connects to addrs, waiting up to 20s for a broker that is still
// starting.
func (h *harness) connect(ctx context.Context, addrs []string) error {
	h.brokers = addrs[0]
	h.Opts = []kgo.Opt{kgo.SeedBrokers(addrs...)}
	cl, err := kgo.NewClient(h.Opts...)
	if err != nil {
		return err
	}
	h.Client = cl
	return h.ping(ctx, 20*time.Second)
}

// ping waits until the broker answers, retrying refused connections.
func (h *harness) ping(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := admin.Ping(ctx, h.Client, time.Second)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// close stops everything and removes the scenario's files.
func (h *harness) close() {
	h.Kill()
	if h.Client != nil {
		h.Client.Close()
	}
	if h.b != nil {
		h.b.Close()
	}
	if h.bproc != nil {
		h.bproc.Kill()
	}
	os.RemoveAll(h.dir)
}

// startWorker starts instance i of app as `eosctl run` of h.topology.
func (h *harness) startWorker(ctx context.Context, app string, i int, in, out string, extra ...string) error {
	w := supervise.Worker{Topology: topologyPassthrough, Brokers: h.brokers, App: app, Instance: i, Input: in, Output: out,
		SessionTimeout: 6 * time.Second, LogLevel: logLevel(), Extra: []string{"--timeout", "30s"}}
	if len(h.topology) > 0 {
		w.Topology, w.Extra = h.topology[0], append(w.Extra, h.topology[1:]...)
	}
	w.Extra = append(w.Extra, extra...)
	_, err := h.StartWorker(ctx, w)
	return err
}

// judge stops the tail and verifies the output, filling the result.
func (h *harness) judge(ctx context.Context, res *Result, in, out string, tail *verify.Tail) error {
	j, err := h.Judge(ctx, fleet.Verdict{Input: in, Output: out, Tail: tail, Timeout: 2 * time.Minute, TailWithin: 30 * time.Second, SettleWithin: settleWithin})
	if err != nil {
		return err
	}
	res.Verify, res.Records, res.Tail = j.Verify, j.Verify.InputRecords, j.Tail
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

// settleWithin is how long a judge waits for the last transactions on the
// output to finish before reading it (fleet.Verdict.SettleWithin): a
// killed coordinator's node can hold a commit's markers back for longer
// than fleet's default. It costs nothing once they are written; a
// transaction left open is judged as it stands after it.
const settleWithin = 45 * time.Second

// catchUp bounds how long a scenario waits for the workers to drain the
// input after the faults.
func catchUp() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EOS_CHAOS_CATCHUP")); err == nil {
		return d
	}
	return 2 * time.Minute
}
