// Package demo holds the scripted demonstrations of eosctl: real worker
// processes, frozen, resumed and killed with real signals, narrated as a
// timeline and judged by verify.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/fleet"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Scenarios of the fencing demo.
const (
	ScenarioZombie  = "zombie"  // freeze A mid-transaction, start B with the same id, resume A
	ScenarioRestart = "restart" // SIGKILL A mid-transaction and start it again with the same id
	ScenarioUnsafe  = "unsafe"  // the zombie story with an idempotent, non-transactional copier
)

// Config configures a fencing demo run.
type Config struct {
	Scenario string // default ScenarioZombie
	Records  int64  // input records; default 20,000
	Rate     int    // input records per second; default 4,000
	// Brokers, if set, runs against that cluster with uniquely named topics;
	// otherwise an embedded broker runs in a temporary directory.
	Brokers    []string
	ClientOpts []kgo.Opt // extra connection options (TLS, SASL) for Brokers
	Bin        string    // the eosctl binary; empty means this executable
	Out        io.Writer // the live timeline; nil discards
	Logger     *slog.Logger
}

// Step is one line of the timeline.
type Step struct {
	At         time.Duration `json:"at_ns"`
	Actor      string        `json:"actor"` // "A", "B", "demo" or "coordinator"
	ProducerID int64         `json:"producer_id,omitempty"`
	Epoch      int16         `json:"epoch"`
	Event      string        `json:"event"`
}

// Report is the outcome of a demo run.
type Report struct {
	Scenario string `json:"scenario"`
	Input    string `json:"input"`
	Output   string `json:"output"`
	Steps    []Step `json:"timeline"`
	// ZombieExit is A's exit code (3 when fenced; 137 when SIGKILLed).
	ZombieExit    int    `json:"zombie_exit_code"`
	ZombieMessage string `json:"zombie_message,omitempty"`
	// Verify is the read_committed verdict on the output.
	Verify *verify.Report `json:"verify"`
	// LogRecords counts every data record in the output log, aborted ones
	// included, as a read_uncommitted consumer sees them.
	LogRecords int64 `json:"log_records_read_uncommitted"`
	// OK is whether the scenario showed what it is meant to show: exactly
	// once for the transactional scenarios, duplicates for the unsafe one.
	OK      bool   `json:"ok"`
	Verdict string `json:"verdict"`
}

// Fencing runs one scenario of the fencing demo.
func Fencing(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, start: time.Now(), rep: &Report{Scenario: cfg.Scenario}}
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = r.interrupted(ctx.Err())
		}
	}()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	defer r.close()
	switch cfg.Scenario {
	case ScenarioRestart:
		err = r.restart(ctx)
	default:
		err = r.zombie(ctx)
	}
	if err != nil {
		return r.rep, err
	}
	return r.rep, r.judge(ctx)
}

func (c *Config) defaults() error {
	switch c.Scenario {
	case "":
		c.Scenario = ScenarioZombie
	case ScenarioZombie, ScenarioRestart, ScenarioUnsafe:
	default:
		return fmt.Errorf("unknown scenario %q (want %s, %s or %s)", c.Scenario, ScenarioZombie, ScenarioRestart, ScenarioUnsafe)
	}
	if c.Records == 0 {
		c.Records = 20_000
	}
	if c.Rate == 0 {
		c.Rate = 4_000
	}
	if c.Records < 0 || c.Rate < 0 {
		return fmt.Errorf("--records and --rate must be positive")
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// run is the state of one demo run.
type run struct {
	cfg   Config
	start time.Time
	rep   *Report

	b       *broker.Broker
	dir     string
	opts    []kgo.Opt
	cl      *kgo.Client
	brokers string
	app     string

	mu     sync.Mutex
	events map[string][]pipeline.Event // by actor
	procs  []*supervise.Proc
	done   chan error // input production
}

func (r *run) setup(ctx context.Context) error {
	suffix := ""
	if len(r.cfg.Brokers) == 0 {
		dir, err := os.MkdirTemp("", "eosctl-demo-")
		if err != nil {
			return err
		}
		r.dir = dir
		r.b, err = broker.Start(broker.Config{DataDir: dir, MinSessionTimeout: time.Second, Logger: r.cfg.Logger})
		if err != nil {
			return err
		}
		r.cfg.Brokers = r.b.Addrs()
	} else {
		suffix = "-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	}
	r.brokers = strings.Join(r.cfg.Brokers, ",")
	r.app = "fencing-" + r.cfg.Scenario + suffix
	r.rep.Input, r.rep.Output = r.app+"-in", r.app+"-out"
	r.opts = append([]kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...)}, r.cfg.ClientOpts...)
	cl, err := admin.Connect(ctx, 10*time.Second, r.opts...)
	if err != nil {
		return err
	}
	r.cl = cl
	for _, t := range []string{r.rep.Input, r.rep.Output} {
		if _, _, err := admin.EnsureTopic(ctx, cl, t, 3, nil); err != nil {
			return err
		}
	}
	if suffix != "" {
		fmt.Fprintf(r.cfg.Out, "using topics %s and %s on %s (delete them when done)\n", r.rep.Input, r.rep.Output, r.brokers)
	}
	r.events = map[string][]pipeline.Event{}
	r.done = make(chan error, 1)
	go func() {
		_, err := datagen.Produce(ctx, cl, datagen.Config{Topic: r.rep.Input, Count: r.cfg.Records, Size: 100, Partitions: 3, Rate: r.cfg.Rate})
		r.done <- err
	}()
	return nil
}

func (r *run) close() {
	for _, p := range r.procs {
		p.Kill()
	}
	if r.cl != nil {
		r.cl.Close()
	}
	if r.b != nil {
		r.b.Close()
		os.RemoveAll(r.dir)
	}
}

// step records and prints one timeline line.
func (r *run) step(actor string, pid int64, epoch int16, format string, args ...any) {
	s := Step{At: time.Since(r.start), Actor: actor, ProducerID: pid, Epoch: epoch, Event: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.rep.Steps = append(r.rep.Steps, s)
	r.mu.Unlock()
	// "producer-id", not "pid": next to SIGSTOP and SIGKILL, a pid
	// reads as a process id.
	who := ""
	if pid != 0 {
		who = fmt.Sprintf("producer-id=%d epoch=%d", pid, epoch)
	}
	fmt.Fprintf(r.cfg.Out, "%+8.3fs  %-11s %-40s %s\n", s.At.Seconds(), actor, who, s.Event)
}

// startWorker starts an instance-0 worker under the label actor.
func (r *run) startWorker(ctx context.Context, actor string, stderr io.Writer) (*supervise.Proc, error) {
	args := supervise.Worker{Brokers: r.brokers, App: r.app, Input: r.rep.Input, Output: r.rep.Output,
		CommitInterval: time.Second, SessionTimeout: 6 * time.Second, LogLevel: "error"}.Args()
	if r.cfg.Scenario == ScenarioUnsafe {
		// The hand-written copier takes the worker's flags.
		args = append([]string{"demo", "unsafe-worker"}, args[2:]...)
	}
	p, err := supervise.Start(ctx, supervise.Config{
		Name: actor, Bin: r.cfg.Bin, Args: args, Stderr: stderr,
		OnEvent: func(name string, e pipeline.Event) {
			r.mu.Lock()
			r.events[name] = append(r.events[name], e)
			r.mu.Unlock()
		},
	})
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	return p, nil
}

// interrupted is the error of a run that ctx stopped (SIGINT): what is
// left of it, wrapping the context's error.
func (r *run) interrupted(err error) error {
	left := "the embedded broker and its data are gone"
	if r.b == nil && r.rep.Input != "" {
		left = fmt.Sprintf("its topics %s and %s stay on %s", r.rep.Input, r.rep.Output, r.brokers)
	}
	return fmt.Errorf("fencing demo interrupted; its workers are stopped and %s: %w", left, err)
}

// waitEvent waits for the n-th event of kind from actor, or until ctx ends.
func (r *run) waitEvent(ctx context.Context, actor string, kind pipeline.EventKind, n int, within time.Duration) (pipeline.Event, error) {
	deadline := time.Now().Add(within)
	for {
		r.mu.Lock()
		seen := 0
		for _, e := range r.events[actor] {
			if e.Kind == kind {
				if seen++; seen == n {
					r.mu.Unlock()
					return e, nil
				}
			}
		}
		r.mu.Unlock()
		if time.Now().After(deadline) {
			return pipeline.Event{}, fmt.Errorf("%s: no %s event #%d within %s", actor, kind, n, within)
		}
		select {
		case <-ctx.Done():
			return pipeline.Event{}, fmt.Errorf("%s: waiting for %s event #%d: %w", actor, kind, n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// openTxn waits until the coordinator shows the worker's transaction open
// with partitions in it (records produced, nothing committed yet).
func (r *run) openTxn(ctx context.Context, within time.Duration) (kadm.DescribedTransaction, bool) {
	adm := kadm.NewClient(r.cl)
	id := r.app + "-0"
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		d, err := adm.DescribeTransactions(ctx, id)
		if t, ok := d[id]; err == nil && ok && t.Err == nil && t.State == "Ongoing" && len(t.Topics) > 0 {
			return t, true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return kadm.DescribedTransaction{}, false
}

func (r *run) zombie(ctx context.Context) error {
	aErr := &fleet.Buffer{}
	a, err := r.startWorker(ctx, "A", aErr)
	if err != nil {
		return err
	}
	ev, err := r.waitEvent(ctx, "A", pipeline.EventStarted, 1, 15*time.Second)
	if err != nil {
		return err
	}
	idKind := "transactional.id"
	if r.cfg.Scenario == ScenarioUnsafe {
		idKind = "group.instance.id; idempotent producer, no transactional.id"
	}
	r.step("A", ev.ProducerID, ev.Epoch, "started as instance 0 (%s %s-0); InitProducerId", idKind, r.app)
	ev, err = r.waitEvent(ctx, "A", pipeline.EventCommitted, 1, 15*time.Second)
	if err != nil {
		return err
	}
	if r.cfg.Scenario == ScenarioUnsafe {
		r.step("A", ev.ProducerID, ev.Epoch, "flushed %d records, then committed their input offsets", ev.Records)
	} else {
		r.step("A", ev.ProducerID, ev.Epoch, "committed a transaction of %d records", ev.Records)
	}
	if r.cfg.Scenario == ScenarioUnsafe {
		time.Sleep(600 * time.Millisecond) // into the next commit interval
		r.step("A", ev.ProducerID, ev.Epoch, "has produced records it has not committed offsets for")
	} else {
		t, ok := r.openTxn(ctx, 5*time.Second)
		if !ok {
			return fmt.Errorf("A never had an open transaction with records in it")
		}
		time.Sleep(300 * time.Millisecond) // let records accumulate in it
		r.step("coordinator", t.ProducerID, t.ProducerEpoch, "A's transaction is Ongoing, with records written to %d partition(s), not committed", partitionCount(t.Topics))
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	held := "its open transaction"
	if r.cfg.Scenario == ScenarioUnsafe {
		held = "records written whose input offsets are not committed"
	}
	r.step("demo", 0, 0, "SIGSTOP A (a GC pause, a network partition): it holds %s", held)

	b, err := r.startWorker(ctx, "B", io.Discard)
	if err != nil {
		return err
	}
	ev, err = r.waitEvent(ctx, "B", pipeline.EventStarted, 1, 30*time.Second)
	if err != nil {
		return err
	}
	if r.cfg.Scenario == ScenarioUnsafe {
		r.step("B", ev.ProducerID, ev.Epoch, "started as instance 0: a new idempotent producer id; nothing fences A's producer")
	} else {
		r.step("B", ev.ProducerID, ev.Epoch, "started as instance 0: InitProducerId bumped the epoch; the coordinator aborted A's open transaction")
	}
	ev, err = r.waitEvent(ctx, "B", pipeline.EventCommitted, 1, 30*time.Second)
	if err != nil {
		return err
	}
	r.step("B", ev.ProducerID, ev.Epoch, "took over A's partitions and keeps committing (%d records in its last commit)", ev.Records)

	if err := a.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	r.step("demo", 0, 0, "SIGCONT A: the zombie wakes up and carries on")
	select {
	case <-a.Done():
	case <-ctx.Done():
		return fmt.Errorf("waiting for A to exit after SIGCONT: %w", ctx.Err())
	case <-time.After(20 * time.Second):
		a.Kill()
		r.step("demo", 0, 0, "A still running 20s after SIGCONT: SIGKILL")
	}
	r.rep.ZombieExit, r.rep.ZombieMessage = a.Wait(), aErr.LastLine()
	r.step("A", 0, 0, "exited with code %d: %s", r.rep.ZombieExit, r.rep.ZombieMessage)
	return r.finish(ctx, b)
}

func (r *run) restart(ctx context.Context) error {
	a, err := r.startWorker(ctx, "A", io.Discard)
	if err != nil {
		return err
	}
	ev, err := r.waitEvent(ctx, "A", pipeline.EventStarted, 1, 15*time.Second)
	if err != nil {
		return err
	}
	r.step("A", ev.ProducerID, ev.Epoch, "started as instance 0 (transactional.id %s-0)", r.app)
	if _, err := r.waitEvent(ctx, "A", pipeline.EventCommitted, 1, 15*time.Second); err != nil {
		return err
	}
	t, ok := r.openTxn(ctx, 5*time.Second)
	if !ok {
		return fmt.Errorf("A never had an open transaction with records in it")
	}
	time.Sleep(300 * time.Millisecond)
	r.step("coordinator", t.ProducerID, t.ProducerEpoch, "A's transaction is Ongoing, with records in %d partition(s)", partitionCount(t.Topics))
	r.rep.ZombieExit = a.Kill()
	r.step("demo", 0, 0, "SIGKILL A mid-transaction (exit code %d)", r.rep.ZombieExit)
	again, err := r.startWorker(ctx, "A'", io.Discard)
	if err != nil {
		return err
	}
	ev, err = r.waitEvent(ctx, "A'", pipeline.EventStarted, 1, 30*time.Second)
	if err != nil {
		return err
	}
	r.step("A'", ev.ProducerID, ev.Epoch, "restarted with the same instance id: epoch bumped, the killed transaction aborted, resuming from committed offsets")
	return r.finish(ctx, again)
}

// finish waits for the surviving worker to copy all input, stops it, and
// verifies.
func (r *run) finish(ctx context.Context, survivor *supervise.Proc) error {
	if err := <-r.done; err != nil {
		return fmt.Errorf("producing input: %w", err)
	}
	if err := committed.WaitCaughtUp(ctx, r.opts, committed.Wait{Group: r.app, Topics: []string{r.rep.Input}, Outputs: []string{r.rep.Output}, Within: time.Minute}); err != nil {
		return fmt.Errorf("the surviving worker did not catch up: %w", err)
	}
	_ = survivor.Signal(syscall.SIGTERM)
	survivor.Wait()
	r.step("demo", 0, 0, "input fully copied; stopped the surviving worker; verifying")
	return nil
}

func partitionCount(ts kadm.TopicsSet) int {
	n := 0
	for _, ps := range ts {
		n += len(ps)
	}
	return n
}
