// Package quickstart runs the main job of eos end to end on an embedded
// broker: produce, copy with exactly-once workers that are killed and
// restarted mid-transaction, and verify that every record arrived once.
package quickstart

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/seed"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config sizes the run. The zero value is the documented quickstart.
type Config struct {
	Records        int64         // default 1,000,000
	Size           int           // value size in bytes; default 100
	Partitions     int32         // default 6
	Workers        int           // default 2
	Kills          int           // SIGKILLs of a worker mid-transaction; 0 means 2, negative none
	CommitInterval time.Duration // default 100ms
	Timeout        time.Duration // for the whole copy; default 5 minutes
	Bin            string        // the eosctl binary; empty means this executable
	Out            io.Writer     // narration; nil discards
	WorkerLogLevel string        // log level of the workers; default warn
	Logger         *slog.Logger
}

// Summary is what the run measured.
type Summary struct {
	Records       int64   `json:"records"`
	CopySeconds   float64 `json:"copy_seconds"`
	RecordsPerSec float64 `json:"records_per_second"`
	Committed     int     `json:"transactions_committed"`
	Aborted       int     `json:"transactions_aborted"`
	Kills         int     `json:"kills"`
	KilledMidTxn  int     `json:"kills_mid_transaction"`
	// Seed drew which worker each kill took (EOS_TEST_SEED replays it),
	// Killed which they were, in order.
	Seed         uint64         `json:"seed"`
	Killed       []int          `json:"killed_workers"`
	Verify       *verify.Report `json:"verify"`
	BrokerAddrs  []string       `json:"broker_addrs"`
	TotalSeconds float64        `json:"total_seconds"`
}

const (
	app    = "quickstart"
	input  = "quickstart-in"
	output = "quickstart-out"
)

// Run runs the quickstart. It returns the summary and an error if any step
// failed; a verify failure is reported in Summary.Verify, not as an error.
func Run(ctx context.Context, cfg Config) (_ *Summary, err error) {
	cfg.defaults()
	// An interrupt says where the run was; everything it made is removed
	// on the way out (the broker's temporary directory, the workers).
	phase := "starting the embedded broker"
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("quickstart interrupted while %s; the embedded broker, its temporary data and the workers are gone, nothing else was written: %w", phase, ctx.Err())
		}
	}()
	start := time.Now()
	say := func(format string, args ...any) { fmt.Fprintf(cfg.Out, format+"\n", args...) }

	dir, err := os.MkdirTemp("", "eosctl-quickstart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := broker.Start(broker.Config{DataDir: dir, MinSessionTimeout: time.Second, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	sum := &Summary{Records: cfg.Records, BrokerAddrs: b.Addrs()}
	say("embedded broker listening on %s (data in %s)", b.Addrs()[0], dir)

	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := admin.Connect(ctx, 10*time.Second, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	phase = "producing the input"
	res, err := datagen.Produce(ctx, cl, datagen.Config{Topic: input, Count: cfg.Records, Size: cfg.Size, Partitions: cfg.Partitions})
	if err != nil {
		return nil, fmt.Errorf("producing input: %w", err)
	}
	say("produced %d records of %d bytes to %s (%d partitions) in %.1fs", res.Records, cfg.Size, input, res.Partitions, res.Elapsed.Seconds())

	if _, _, err := admin.EnsureTopic(ctx, cl, output, res.Partitions, nil); err != nil {
		return nil, err
	}
	phase = "copying with the workers"
	s, err := seed.Draw()
	if err != nil {
		return nil, err
	}
	sum.Seed = s
	f := &fleet{cfg: cfg, brokers: b.Addrs()[0], rng: seed.New(s)}
	copyStart := time.Now()
	for i := range cfg.Workers {
		if err := f.start(ctx, i); err != nil {
			return nil, err
		}
	}
	say("started %d passthrough workers (app %q, transactional.ids %s-0..%d); the workers to kill are drawn from %s", cfg.Workers, app, app, cfg.Workers-1, seed.Replay(sum.Seed))
	defer f.stopAll()

	if err := f.killLoop(ctx, cl, say); err != nil {
		return nil, err
	}
	if err := committed.WaitCaughtUp(ctx, opts, committed.Wait{Group: app, Topics: []string{input}, Outputs: []string{output}, Within: cfg.Timeout - time.Since(copyStart)}); err != nil {
		return nil, fmt.Errorf("workers did not finish the copy: %w", err)
	}
	sum.CopySeconds = time.Since(copyStart).Seconds()
	sum.RecordsPerSec = float64(cfg.Records) / sum.CopySeconds
	f.stopAll()
	sum.Kills, sum.KilledMidTxn, sum.Killed = f.kills, f.midTxn, f.killed
	sum.Committed = int(f.committed.Load())
	// A transaction open at a SIGKILL is aborted by the coordinator when
	// the restarted worker initialises the same transactional.id.
	sum.Aborted = int(f.aborted.Load()) + f.midTxn

	phase = "verifying"
	rep, err := verify.Run(ctx, opts, verify.Config{Input: input, Output: output, Timeout: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("verifying: %w", err)
	}
	sum.Verify = rep
	sum.TotalSeconds = time.Since(start).Seconds()
	return sum, nil
}

func (c *Config) defaults() {
	if c.Records == 0 {
		c.Records = 1_000_000
	}
	if c.Size == 0 {
		c.Size = 100
	}
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Kills == 0 {
		c.Kills = 2
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.WorkerLogLevel == "" {
		c.WorkerLogLevel = "warn"
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// fleet is the set of worker processes.
type fleet struct {
	cfg       Config
	brokers   string
	procs     []*supervise.Proc
	rng       *rand.Rand // picks the worker each kill takes
	killed    []int
	kills     int
	midTxn    int
	committed atomic.Int64
	aborted   atomic.Int64
}

func (f *fleet) start(ctx context.Context, i int) error {
	p, err := supervise.Start(ctx, supervise.Config{
		Name: strconv.Itoa(i),
		Bin:  f.cfg.Bin,
		Args: supervise.Worker{Brokers: f.brokers, App: app, Instance: i, Input: input, Output: output,
			CommitInterval: f.cfg.CommitInterval, SessionTimeout: 6 * time.Second, LogLevel: f.cfg.WorkerLogLevel}.Args(),
		Stderr: os.Stderr,
		OnEvent: func(_ string, e pipeline.Event) {
			switch e.Kind {
			case pipeline.EventCommitted:
				f.committed.Add(1)
			case pipeline.EventAborted:
				f.aborted.Add(1)
			}
		},
	})
	if err != nil {
		return err
	}
	if i < len(f.procs) {
		f.procs[i] = p
	} else {
		f.procs = append(f.procs, p)
	}
	return nil
}

// killLoop SIGKILLs a random worker while its transaction is open, Kills
// times, spread over the copy, restarting it at once with the same instance
// id.
func (f *fleet) killLoop(ctx context.Context, cl *kgo.Client, say func(string, ...any)) error {
	for k := range f.cfg.Kills {
		target := f.cfg.Records * int64(k+1) / int64(f.cfg.Kills+2)
		if err := waitOutput(ctx, cl, target, f.cfg.Timeout); err != nil {
			return err
		}
		i := f.rng.IntN(len(f.procs))
		id := fencing.ID(app, strconv.Itoa(i))
		mid := admin.WaitOngoing(ctx, cl, id, 2*time.Second)
		f.procs[i].Kill()
		f.kills++
		f.killed = append(f.killed, i)
		state := "between transactions"
		if mid {
			f.midTxn++
			state = "with its transaction open"
		}
		say("SIGKILLed worker %d (%s) %s after %d output records; restarting it with the same instance id", i, id, state, target)
		if err := f.start(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (f *fleet) stopAll() {
	for _, p := range f.procs {
		select {
		case <-p.Done():
			continue
		default:
		}
		_ = p.Signal(syscall.SIGTERM)
	}
	for _, p := range f.procs {
		select {
		case <-p.Done():
		case <-time.After(15 * time.Second):
			p.Kill()
		}
	}
}

// waitOutput waits until the output topic holds at least n offsets.
func waitOutput(ctx context.Context, cl *kgo.Client, n int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		got, err := admin.EndOffsetSum(ctx, cl, output)
		if err == nil && got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("output reached %d of %d offsets within %s", got, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
