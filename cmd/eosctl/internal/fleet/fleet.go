// Package fleet is the one environment the fault suites run eosctl workers
// in: the e2e tests (through a thin testing adapter) and the chaos
// scenarios behind `eosctl chaos`. A Fleet starts, restarts, supervises
// and stops `eosctl run` processes against one cluster, collects their
// events and their prefixed stderr, produces their input, waits for them to
// catch up and gives the exactly-once verdict (verify, and the concurrent
// read_committed reader). It does not import package testing, so that the
// command can use it.
package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Fleet is a set of eosctl processes on one cluster.
type Fleet struct {
	// Opts are the connection options of the fleet's own clients (seed
	// brokers first), and Client a client on them for setting up and
	// checking. The owner sets them once connected, before Produce,
	// WaitCaughtUp or Judge.
	Opts   []kgo.Opt
	Client *kgo.Client

	bin   string
	logs  io.Writer
	logMu sync.Mutex

	mu      sync.Mutex
	all     []*supervise.Proc          // every process started, in order
	workers map[string]*supervise.Proc // the latest process of each name
	args    map[string][]string
	events  []pipeline.Event
	exits   map[string][]int
	stopped bool // Stop ran: Supervise restarts no more
}

// New returns an empty fleet of the eosctl binary bin whose processes write
// their stderr to logs, each line prefixed with "[name] "; nil discards it.
func New(bin string, logs io.Writer) *Fleet {
	if logs == nil {
		logs = io.Discard
	}
	return &Fleet{bin: bin, logs: logs, workers: map[string]*supervise.Proc{}, args: map[string][]string{}, exits: map[string][]int{}}
}

// LogWriter is the fleet's log as process name writes it: every line
// prefixed with "[name] ", lines of different writers never interleaved.
func (f *Fleet) LogWriter(name string) io.Writer { return prefixed{f, name} }

type prefixed struct {
	f    *Fleet
	name string
}

func (p prefixed) Write(b []byte) (int, error) {
	if p.f.logs == io.Discard {
		return len(b), nil
	}
	p.f.logMu.Lock()
	defer p.f.logMu.Unlock()
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) > 0 {
			fmt.Fprintf(p.f.logs, "[%s] %s", p.name, line)
		}
	}
	return len(b), nil
}

// Start starts eosctl with args as process name: its stderr goes to the
// fleet's log, its events (--events -) to the fleet's events.
func (f *Fleet) Start(ctx context.Context, name string, args []string) (*supervise.Proc, error) {
	p, err := supervise.Start(ctx, supervise.Config{
		Name: name, Bin: f.bin, Args: args, Stderr: f.LogWriter(name),
		OnEvent: func(_ string, e pipeline.Event) {
			f.mu.Lock()
			f.events = append(f.events, e)
			f.mu.Unlock()
		},
	})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.all = append(f.all, p)
	f.workers[name], f.args[name] = p, args
	f.mu.Unlock()
	return p, nil
}

// StartWorker starts the `eosctl run` worker w, named w.Name().
func (f *Fleet) StartWorker(ctx context.Context, w supervise.Worker) (*supervise.Proc, error) {
	return f.Start(ctx, w.Name(), w.Args())
}

// Restart starts the named process again with the same arguments.
func (f *Fleet) Restart(ctx context.Context, name string) (*supervise.Proc, error) {
	f.mu.Lock()
	args := f.args[name]
	f.mu.Unlock()
	return f.Start(ctx, name, args)
}

// Worker returns the latest process started as name.
func (f *Fleet) Worker(name string) *supervise.Proc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.workers[name]
}

// KillAndRestart SIGKILLs the named process and starts it again with the
// same arguments (for a worker: the same instance id).
func (f *Fleet) KillAndRestart(ctx context.Context, name string) error {
	f.Worker(name).Kill()
	_, err := f.Restart(ctx, name)
	return err
}

// Supervise restarts, with the same arguments, any process that has
// exited, until ctx ends or Stop runs; it records their exit codes
// (Exits). Real deployments restart crashed workers the same way
// (systemd, Kubernetes).
func (f *Fleet) Supervise(ctx context.Context) {
	go func() {
		for ctx.Err() == nil {
			f.mu.Lock()
			var dead []string
			for name, p := range f.workers {
				if f.stopped {
					break
				}
				select {
				case <-p.Done():
					dead = append(dead, name)
					f.exits[name] = append(f.exits[name], p.Wait())
				default:
				}
			}
			f.mu.Unlock()
			for _, name := range dead {
				_, _ = f.Restart(ctx, name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
}

// Exits returns the exit codes Supervise saw, per process name.
func (f *Fleet) Exits() map[string][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]int, len(f.exits))
	for name, codes := range f.exits {
		out[name] = slices.Clone(codes)
	}
	return out
}

// Exit is how a process ended under Stop.
type Exit struct {
	Name string
	Code int
	// TimedOut: it did not exit within Stop's bound and was SIGKILLed.
	TimedOut bool
}

// Stop sends SIGTERM to every running process and waits up to within for
// each to exit, SIGKILLing those that do not; it returns how each ended
// (processes that had already exited are not in it). Supervise restarts
// no more.
func (f *Fleet) Stop(within time.Duration) []Exit {
	f.mu.Lock()
	f.stopped = true
	var procs []*supervise.Proc
	for _, p := range f.all {
		select {
		case <-p.Done():
		default:
			procs = append(procs, p)
		}
	}
	f.mu.Unlock()
	for _, p := range procs {
		_ = p.Signal(syscall.SIGTERM)
	}
	exits := make([]Exit, 0, len(procs))
	for _, p := range procs {
		select {
		case <-p.Done():
			exits = append(exits, Exit{Name: p.Name, Code: p.Wait()})
		case <-time.After(within):
			exits = append(exits, Exit{Name: p.Name, Code: p.Kill(), TimedOut: true})
		}
	}
	return exits
}

// Kill SIGKILLs every process still running.
func (f *Fleet) Kill() {
	f.mu.Lock()
	procs := slices.Clone(f.all)
	f.mu.Unlock()
	for _, p := range procs {
		p.Kill()
	}
}

// Events copies the events the processes have written so far.
func (f *Fleet) Events() []pipeline.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// Count returns how many events of kind the processes have written.
func (f *Fleet) Count(kind pipeline.EventKind) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// CommitsByInstance counts the committed events of each instance.
func (f *Fleet) CommitsByInstance() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	by := map[string]int{}
	for _, e := range f.events {
		if e.Kind == pipeline.EventCommitted {
			by[e.Instance]++
		}
	}
	return by
}

// Recoveries returns, per transactional id, the delay from t to its first
// commit after t: how long it took to recover from a fault at t.
func (f *Fleet) Recoveries(t time.Time) []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := map[string]time.Time{}
	for _, e := range f.events {
		if e.Kind == pipeline.EventCommitted && e.Time.After(t) {
			if at, ok := first[e.TransactionalID]; !ok || e.Time.Before(at) {
				first[e.TransactionalID] = e.Time
			}
		}
	}
	var out []time.Duration
	for _, at := range first {
		out = append(out, at.Sub(t))
	}
	return out
}

// Produce creates topic with partitions if it is missing and writes n
// datagen records of 100 bytes to it at rate records/s (0: flat out) in the
// background, under ctx (canceling it ends the production early); the
// channel yields the result.
func (f *Fleet) Produce(ctx context.Context, topic string, n int64, partitions int32, rate int) (<-chan error, error) {
	return f.ProduceConfig(ctx, datagen.Config{Topic: topic, Count: n, Size: 100, Partitions: partitions, Rate: rate})
}

// ProduceConfig is Produce with every setting of datagen's (Again, say).
func (f *Fleet) ProduceConfig(ctx context.Context, cfg datagen.Config) (<-chan error, error) {
	_, created, err := admin.EnsureTopic(ctx, f.Client, cfg.Topic, cfg.Partitions, nil)
	if err != nil {
		return nil, err
	}
	// A topic created here holds nothing to continue after: the keys start
	// at 0 without asking its partitions for their last records, which
	// Apache Kafka may not serve yet (NOT_LEADER_FOR_PARTITION while a new
	// topic's leaders settle, which failed two chaos rows in CI).
	cfg.Again = cfg.Again || created
	done := make(chan error, 1)
	go func() {
		_, err := datagen.Produce(ctx, f.Client, cfg)
		done <- err
	}()
	return done, nil
}

// WaitCaughtUp is committed.WaitCaughtUp on the fleet's cluster; on timeout
// its error says where each partition and each process stands.
func (f *Fleet) WaitCaughtUp(ctx context.Context, w committed.Wait) error {
	if err := committed.WaitCaughtUp(ctx, f.Opts, w); err != nil {
		return fmt.Errorf("%w; %s; workers: %s", err, f.DescribeOffsets(ctx, w.Group, w.Topics...), f.States())
	}
	return nil
}

// Verdict is what Judge checks: the copy from Input to Output, and the
// concurrent read_committed reader of Output, if any.
type Verdict struct {
	Input, Output string
	Tail          *verify.Tail
	// Timeout bounds verify's read; TailWithin how long the reader gets to
	// see as many keys as verify found input records.
	Timeout, TailWithin time.Duration
	// SettleWithin bounds the wait for the transactions on Output to
	// finish before verify reads it; 0 means 10s. A drill that SIGKILLs
	// an Apache Kafka node coordinating transactions wants longer: a
	// commit the node accepted gets its markers only once the node is
	// back or its transaction log has moved, which a CI run saw take
	// more than 10s (verify read 26,619 of 40,000 records behind the
	// last stable offset; the read_committed tail saw all 40,000 within
	// its 30s).
	SettleWithin time.Duration
}

// Judgement is the exactly-once verdict: verify's report and, with a
// concurrent reader, its report (Tail) and whether it caught up (TailErr).
type Judgement struct {
	Verify  *verify.Report
	Tail    *verify.TailReport
	TailErr error
}

// Judge waits up to v.SettleWithin (10s by default) for the transactions
// on v.Output to finish, reads v.Output with verify against v.Input and
// then stops v.Tail, once it has seen as many keys as there were input
// records or after v.TailWithin. The error is verify's failure to run,
// not a verdict.
func (f *Fleet) Judge(ctx context.Context, v Verdict) (Judgement, error) {
	// The workers' last commit may still have its markers on the way to
	// the output (Apache Kafka writes each partition's apart, after the
	// group's offsets): wait for them, briefly. A transaction still open
	// after that (a hanging one) is judged as it stands: verify reads to
	// the last stable offset, and reports what is behind it as missing.
	settle := v.SettleWithin
	if settle <= 0 {
		settle = 10 * time.Second
	}
	_ = committed.WaitSettled(ctx, f.Opts, settle, v.Output)
	rep, err := verify.Run(ctx, f.Opts, verify.Config{Input: v.Input, Output: v.Output, Timeout: v.Timeout})
	if err != nil {
		return Judgement{}, err
	}
	j := Judgement{Verify: rep}
	if v.Tail != nil {
		wctx, cancel := context.WithTimeout(ctx, v.TailWithin)
		j.TailErr = v.Tail.WaitFor(wctx, rep.InputRecords)
		cancel()
		tr := v.Tail.Stop()
		j.Tail = &tr
	}
	return j, nil
}

// DescribeOffsets describes, per partition of topics, group's committed
// offset, the LSO and the HWM, for error messages.
func (f *Fleet) DescribeOffsets(ctx context.Context, group string, topics ...string) string {
	adm := kadm.NewClient(f.Client)
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

// States describes each process's state, for error messages.
func (f *Fleet) States() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for name, p := range f.workers {
		select {
		case <-p.Done():
			fmt.Fprintf(&b, "%s exited %d (last event %s %s); ", name, p.Wait(), p.Last().Kind, p.Last().Err)
		default:
			fmt.Fprintf(&b, "%s running (last event %s); ", name, p.Last().Kind)
		}
	}
	return b.String()
}

// Buffer is a log that processes write while its reader reads it: a
// bytes.Buffer behind a lock, for a Fleet's logs or one process's stderr.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// LastLine returns the last non-empty line written so far.
func (l *Buffer) LastLine() string {
	lines := strings.Split(strings.TrimSpace(l.String()), "\n")
	return lines[len(lines)-1]
}
