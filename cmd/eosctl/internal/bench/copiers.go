package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
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
	peerJar  string // the JVM modes' jar
	threads  int    // GOMAXPROCS of the Go copiers, threads of the JVM peers
	warmup   string // the JVM peers' warm-up input, if any
	// settings are eos's client settings, which the matched JVM modes run with.
	settings pipeline.ClientSettings
	config   string // the topology's configuration file, if it takes one
	dlq      string // the dead-letter topic, for the aggregate topology
	registry string // the Schema Registry's URL, for eos-avro
}

// copiers are the running copiers of one run, as goroutines or as child
// processes. Every event they emit goes to onEvent.
type copiers interface {
	// cpu returns the CPU time used so far by what the fleet measures.
	cpu() time.Duration
	// stop asks every copier to finish (commit and leave), waits, and
	// returns the peak resident set size in bytes (0 if unknown) and the
	// first copier failure.
	stop() (peakRSS int64, err error)
}

// startCopiers starts job's copiers in the way cfg says.
func startCopiers(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (copiers, error) {
	if job.mode.jvm() {
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

func startInProcess(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (copiers, error) {
	topo, err := topologies.Lookup(workerTopology(cfg.Topology))
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, cfg.ClientOpts...)
	supervise.ResetSelfPeakRSS()
	ctx, cancel := context.WithCancel(ctx)
	f := &inProcess{cancel: cancel, cpu0: supervise.SelfCPU()}
	for i := range job.workers {
		t, err := topo.New(topologies.Options{Config: job.config, Output: job.output, SchemaRegistry: topologies.SchemaRegistry{URL: job.registry}})
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
		case ModeEOS, ModeEOSNoPreagg, ModeEOSAvro:
			w, err := pipeline.New(pipeline.Config{
				App: job.app, Instance: strconv.Itoa(i), Inputs: job.inputs, Output: job.output,
				Topology: workerTopology(cfg.Topology), DLQ: job.dlq,
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

func (f *inProcess) cpu() time.Duration { return supervise.SelfCPU() - f.cpu0 }

func (f *inProcess) stop() (int64, error) {
	f.cancel()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return supervise.SelfPeakRSS(), f.err
}

// children runs each copier as a child process of the eosctl binary, under
// supervise (the command's one process runner): the eos mode as `eosctl
// run` (the real command, exactly as a user runs it), the others as the
// hidden `eosctl bench baseline` and `eosctl bench bare`. CPU and peak RSS
// are the children's own, without the broker or the latency consumer.
type children struct {
	procs []*child
}

type child struct {
	*supervise.Proc
	stopping atomic.Bool // stop asked it to finish
}

// startChildren starts job's copiers as child processes of bin.
func startChildren(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (copiers, error) {
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
		pc := supervise.Config{Name: fmt.Sprintf("%s copier %d", job.mode, i), Bin: bin,
			Args: copierArgs(cfg, brokers, job, i), Env: copierEnv(cfg, job),
			OnEvent: func(_ string, e pipeline.Event) { onEvent(e) }}
		if err := f.start(ctx, pc, onEvent); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

// start starts one of f's processes. A process that exits before stop
// asks it to, while ctx is live, is reported to onEvent as a stopped event
// with its error and the last line of its stderr, which fails the run at
// once rather than after Config.RunTimeout.
func (f *children) start(ctx context.Context, pc supervise.Config, onEvent func(pipeline.Event)) error {
	p, err := supervise.Start(ctx, pc)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	c := &child{Proc: p}
	f.procs = append(f.procs, c)
	go func() {
		<-p.Done()
		if !c.stopping.Load() && ctx.Err() == nil {
			why := "exit status 0"
			if err := p.Err(); err != nil {
				why = err.Error()
			}
			onEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventStopped,
				Err: fmt.Sprintf("%s exited before the run ended (%s): %s", p.Name, why, p.StderrTail())})
		}
	}()
	return nil
}

// copierEnv is what job's Go copiers add to this process's environment:
// the connection's (Config.ChildEnv), and GOMAXPROCS set to the cell's
// threads (Config.Threads), which wins over any GOMAXPROCS of this
// process's environment.
func copierEnv(cfg *Config, job copyJob) []string {
	env := slices.Clone(cfg.ChildEnv)
	if job.registry != "" {
		env = append(env, "EOSCTL_SCHEMA_REGISTRY="+job.registry)
	}
	if job.threads > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(job.threads))
	}
	return env
}

// copierArgs is the command line of copier i of job. The eos copier is a
// supervise.Worker, the one description of an `eosctl run` worker that the
// quickstart, the demos and chaos share, so the benchmark measures the
// worker exactly as they run it.
func copierArgs(cfg *Config, brokers []string, job copyJob, i int) []string {
	if job.mode.isEOS() {
		// supervise.Worker serves no metrics: the baseline has none, and a
		// fixed port would collide between runs.
		return supervise.Worker{Topology: workerTopology(cfg.Topology), Config: job.config, Brokers: strings.Join(brokers, ","), App: job.app, Instance: i,
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

func (f *children) cpu() time.Duration {
	var sum time.Duration
	for _, c := range f.procs {
		sum += c.CPU()
	}
	return sum
}

// stop reads each child's peak RSS (supervise.Proc.PeakRSS, the child's
// own VmHWM), then asks them all to finish and waits, killing any that is
// not gone after 30s.
func (f *children) stop() (int64, error) {
	var peak int64
	for _, c := range f.procs {
		peak = max(peak, c.PeakRSS())
		c.stopping.Store(true)
		_ = c.Signal(syscall.SIGTERM)
	}
	var first error
	for _, c := range f.procs {
		c.Stop(30 * time.Second)
		if err := c.Err(); err != nil && first == nil {
			first = fmt.Errorf("%s exited with %v: %s", c.Name, err, c.StderrTail())
		}
	}
	return peak, first
}
