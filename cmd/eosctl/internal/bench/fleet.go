package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/twmb/franz-go/pkg/kgo"
)

// copyJob is what one run's copiers do.
type copyJob struct {
	mode     Mode
	interval Interval
	app      string // consumer group and transactional.id prefix
	inputs   []string
	output   string
	workers  int
	peerJar  string // the kstreams mode's jar
	config   string // the topology's configuration file, if it takes one
	dlq      string // the dead-letter topic, for the aggregate topology
}

// fleet is the running copiers of one run, as goroutines or as child
// processes. Every event they emit goes to onEvent.
type fleet interface {
	// cpu returns the CPU time used so far by what the fleet measures.
	cpu() time.Duration
	// stop asks every copier to finish (commit and leave), waits, and
	// returns the peak resident set size in bytes (0 if unknown) and the
	// first copier failure.
	stop() (peakRSS int64, err error)
}

// startFleet starts job's copiers in the way cfg says.
func startFleet(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (fleet, error) {
	if job.mode == ModeKStreams {
		return startKStreams(ctx, cfg, brokers, job, onEvent)
	}
	if cfg.InProcess {
		return startInProcess(ctx, cfg, brokers, job, onEvent)
	}
	return startChildren(ctx, cfg, brokers, job, onEvent)
}

// inProcess runs the copiers as goroutines. Its CPU and peak RSS are the
// whole process's: copiers, the embedded broker and the bench's own clients.
type inProcess struct {
	cpu0   time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func startInProcess(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (fleet, error) {
	topo, err := topologies.Lookup(cfg.Topology)
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, cfg.ClientOpts...)
	resetPeakRSS()
	ctx, cancel := context.WithCancel(ctx)
	f := &inProcess{cancel: cancel, cpu0: selfCPU()}
	for i := range job.workers {
		t, err := topo.New(topologies.Options{Config: job.config})
		if err != nil {
			cancel()
			return nil, err
		}
		var run func(context.Context) error
		switch job.mode {
		case ModeBaseline:
			bc := BaselineConfig{Group: job.app, Inputs: job.inputs, Output: job.output, CommitInterval: job.interval.Fixed,
				Transform: t, ClientOpts: opts, Logger: cfg.Logger, OnEvent: onEvent}
			run = func(ctx context.Context) error { return RunBaseline(ctx, bc) }
		case ModeBare:
			bc := BareConfig{Group: job.app, Inputs: job.inputs, Output: job.output, CommitInterval: job.interval.Fixed,
				ClientOpts: opts, Logger: cfg.Logger, OnEvent: onEvent}
			run = func(ctx context.Context) error { return RunBare(ctx, bc) }
		case ModeEOS, ModeEOSNoPreagg:
			w, err := pipeline.New(pipeline.Config{
				App: job.app, Instance: strconv.Itoa(i), Inputs: job.inputs, Output: job.output,
				Topology: cfg.Topology, DLQ: job.dlq,
				CommitInterval: job.interval.Fixed, AutoInterval: job.interval.Auto,
				OverheadBudget: cfg.OverheadBudget, MaxCommitInterval: cfg.MaxCommitInterval,
				NoIdempotencyKey: cfg.NoIdempotencyKey,
				ClientOpts:       opts, Logger: cfg.Logger, OnEvent: onEvent,
			}, t)
			if err != nil {
				cancel()
				return nil, err
			}
			run = w.Run
		}
		f.wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("mode", string(job.mode)), func(ctx context.Context) {
			// The label follows every goroutine the copier's clients
			// start, so a --cpuprofile splits by mode (-tagfocus mode=eos).
			defer f.wg.Done()
			if err := run(ctx); err != nil {
				f.mu.Lock()
				if f.err == nil {
					f.err = fmt.Errorf("%s copier %d: %w", job.mode, i, err)
				}
				f.mu.Unlock()
			}
		})
	}
	return f, nil
}

func (f *inProcess) cpu() time.Duration { return selfCPU() - f.cpu0 }

func (f *inProcess) stop() (int64, error) {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return selfPeakRSS(), f.err
}

// children runs each copier as a child process of the eosctl binary: the
// eos mode as `eosctl run` (the real command, exactly as a user runs it),
// the others as the hidden `eosctl bench baseline` and `eosctl bench bare`. CPU and peak RSS are
// the children's own, without the broker or the latency consumer.
type children struct {
	procs []*child
}

type child struct {
	name     string
	cmd      *exec.Cmd
	stderr   *tailBuffer
	done     chan struct{}
	err      error
	stopping atomic.Bool // stop asked it to finish
}

// startChildren starts job's copiers as child processes of bin.
func startChildren(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (fleet, error) {
	bin := cfg.Bin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: finding own executable for the copier processes: %w", err)
		}
		bin = self
		if strings.HasSuffix(bin, ".test") {
			// A test binary given eosctl's arguments runs its tests again,
			// each starting copiers of its own.
			return nil, fmt.Errorf("bench: the copier processes need bench.Config.Bin (an eosctl binary) when run from a test binary (%s)", bin)
		}
	}
	f := &children{}
	for i := range job.workers {
		cmd := exec.CommandContext(ctx, bin, copierArgs(cfg, brokers, job, i)...)
		cmd.Env = append(os.Environ(), cfg.ChildEnv...)
		parse := func(line []byte) {
			var e pipeline.Event
			if json.Unmarshal(line, &e) == nil && e.Kind != "" {
				onEvent(e)
			}
		}
		if _, err := f.start(ctx, fmt.Sprintf("%s copier %d", job.mode, i), cmd, parse, onEvent); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

// start starts cmd as one of f's processes, handing every line of its
// stdout to parse. A process that exits before stop asks it to, while ctx
// is live, is reported to onEvent as a stopped event with its error and the
// last line of its stderr, which fails the run at once rather than after
// Config.RunTimeout.
func (f *children) start(ctx context.Context, name string, cmd *exec.Cmd, parse func([]byte), onEvent func(pipeline.Event)) (*child, error) {
	c := &child{name: name, cmd: cmd, stderr: &tailBuffer{max: 8 << 10}, done: make(chan struct{})}
	c.cmd.Stderr = c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s (%s): %w", c.name, cmd.Path, err)
	}
	f.procs = append(f.procs, c)
	go func() {
		c.read(out, parse)
		if !c.stopping.Load() && ctx.Err() == nil {
			why := "exit status 0"
			if c.err != nil {
				why = c.err.Error()
			}
			onEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventStopped,
				Err: fmt.Sprintf("%s exited before the run ended (%s): %s", c.name, why, c.stderr.lastLine())})
		}
	}()
	return c, nil
}

// copierArgs is the command line of copier i of job. The eos copier is a
// supervise.Worker, the one description of an `eosctl run` worker that the
// quickstart, the demos and chaos share, so the benchmark measures the
// worker exactly as they run it.
func copierArgs(cfg *Config, brokers []string, job copyJob, i int) []string {
	if job.mode.isEOS() {
		// supervise.Worker serves no metrics: the baseline has none, and a
		// fixed port would collide between runs.
		return supervise.Worker{Topology: cfg.Topology, Config: job.config, Brokers: strings.Join(brokers, ","), App: job.app, Instance: i,
			Input: strings.Join(job.inputs, ","), Output: job.output, LogLevel: "warn",
			CommitInterval: job.interval.Fixed, AutoCommitInterval: job.interval.Auto,
			OverheadBudget: cfg.OverheadBudget, MaxCommitInterval: cfg.MaxCommitInterval,
			NoIdempotencyKey: cfg.NoIdempotencyKey, Extra: dlqArgs(job, cfg.ChildArgs)}.Args()
	}
	common := append([]string{"--brokers", strings.Join(brokers, ","), "--log-level", "warn",
		"--input", strings.Join(job.inputs, ","), "--output", job.output}, cfg.ChildArgs...)
	switch job.mode {
	case ModeBaseline:
		return append([]string{"bench", "baseline", "--topology", cfg.Topology, "--group", job.app,
			"--commit-interval", job.interval.Fixed.String()}, common...)
	default: // ModeBare
		return append([]string{"bench", "bare", "--group", job.app,
			"--commit-interval", job.interval.Fixed.String()}, common...)
	}
}

// dlqArgs returns extra, with --dlq first if job names a dead-letter topic.
func dlqArgs(job copyJob, extra []string) []string {
	if job.dlq == "" {
		return extra
	}
	return append([]string{"--dlq", job.dlq}, extra...)
}

func (c *child) read(out interface{ Read([]byte) (int, error) }, parse func([]byte)) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		parse(sc.Bytes())
	}
	c.err = c.cmd.Wait()
	close(c.done)
}

func (f *children) cpu() time.Duration {
	var sum time.Duration
	for _, c := range f.procs {
		sum += procCPU(c.cmd.Process.Pid)
	}
	return sum
}

// stop reads each child's peak RSS, then stops it. The peak is VmHWM from
// /proc/<pid>/status, the high-water mark of the child's own address space
// since exec; getrusage's maxrss of a child is no good here, because Linux
// carries the parent's RSS at the time of the (vfork) exec into it, and the
// parent holds the embedded broker.
func (f *children) stop() (int64, error) {
	var peak int64
	for _, c := range f.procs {
		peak = max(peak, procPeakRSS(c.cmd.Process.Pid))
		c.stopping.Store(true)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	var first error
	for _, c := range f.procs {
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if c.err != nil && first == nil {
			first = fmt.Errorf("%s exited with %v: %s", c.name, c.err, c.stderr.lastLine())
		}
	}
	return peak, first
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	return string(lines[len(lines)-1])
}
