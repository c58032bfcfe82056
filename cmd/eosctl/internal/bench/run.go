package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Run runs the benchmark that cfg describes and returns its report. Every
// error before the first run is about the configuration or the brokers;
// a run that fails (a copier error, a phase that does not finish within
// RunTimeout) ends the benchmark with an error naming the run.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &bencher{cfg: &cfg, started: time.Now()}
	if cfg.Topology == topologyAggregate || cfg.Topology == topologyDedup || cfg.Topology == topologyJoin || cfg.Topology == topologyETL {
		// The eos workers read the topology's configuration from a file,
		// as `eosctl run aggregate --config` does.
		dir, err := os.MkdirTemp("", "eosbench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		b.dir = dir
		switch cfg.Topology {
		case topologyJoin: // written with the table
		case topologyDedup:
			b.dedupConfig, err = writeDedupConfig(dir)
		case topologyETL:
			b.etlJSON, b.etlAvro, err = writeETLConfigs(dir)
		default:
			b.aggConfig, b.aggConfigNoPreagg, err = writeAggregateConfig(dir)
		}
		if err != nil {
			return nil, err
		}
	}
	if slices.ContainsFunc(cfg.Modes, Mode.jvm) {
		// Before anything is created: a missing tool or a failed build
		// ends the benchmark at once.
		jar, err := peerJar(ctx, cfg.Logger)
		if err != nil {
			return nil, err
		}
		b.peerJar = jar
	}
	var err error
	if b.settings, err = pipeline.WorkerClientSettings(cfg.ClientOpts...); err != nil {
		return nil, eos.BadConfig("bench.Config.ClientOpts", "%w", err)
	}
	if err := b.connect(ctx); err != nil {
		return nil, err
	}
	defer b.close()
	if slices.Contains(cfg.Modes, ModeEOSAvro) {
		if err := b.startRegistry(ctx); err != nil {
			return nil, err
		}
		if b.stopRegistry != nil {
			defer b.stopRegistry()
		}
	}
	if err := b.produceInputs(ctx); err != nil {
		return nil, err
	}
	if err := b.sweep(ctx); err != nil {
		return nil, err
	}
	return b.report(), nil
}

type bencher struct {
	cfg     *Config
	started time.Time
	broker  *broker.Broker // nil with external brokers
	brokers []string
	opts    []kgo.Opt
	adm     *kgo.Client
	prefix  string
	inputs  map[int]string // size -> backlog topic
	topics  []string       // created, to delete at the end
	groups  []string
	runs    []RunResult
	runNo   int
	peerJar string // the JVM modes' jar
	// warmups are the JVM peers' warm-up inputs: size -> topic (0 for
	// the aggregate); empty without JVM modes or with WarmupRecords -1.
	warmups map[int]string
	// settings are eos's effective client settings, which the matched
	// JVM modes run with.
	settings pipeline.ClientSettings

	// The aggregate topology's configuration file, input and its mean
	// record size; see aggregate.go.
	aggConfig string
	// aggConfigNoPreagg is aggConfig with preaggregate: false, for
	// ModeEOSNoPreagg.
	aggConfigNoPreagg string
	// dedupConfig is the dedup workers' configuration file (dedup.go).
	dedupConfig string
	// dir holds the configuration files; joinConfig is the join
	// workers' (join.go), written once the table is.
	dir, joinConfig string
	aggInput        *aggcheck.Input
	aggMeanBytes    float64

	// The etl topology's configurations, the Avro twins of the backlogs
	// (size -> topic) and the Schema Registry: see etl.go.
	etlJSON, etlAvro string
	avroInputs       map[int]string
	registry         string
	registryKind     string
	stopRegistry     func()
}

func (b *bencher) connect(ctx context.Context) error {
	b.brokers = b.cfg.Brokers
	if len(b.brokers) == 0 {
		br, err := broker.Start(broker.Config{RTT: b.cfg.RTT, MinSessionTimeout: time.Second})
		if err != nil {
			return err
		}
		b.broker, b.brokers = br, br.Addrs()
	}
	b.opts = append([]kgo.Opt{kgo.SeedBrokers(b.brokers...)}, b.cfg.ClientOpts...)
	adm, err := admin.Connect(ctx, b.cfg.StartTimeout, b.opts...)
	if err != nil {
		b.close()
		return err
	}
	b.adm = adm
	var id [4]byte
	_, _ = rand.Read(id[:])
	b.prefix = "eosbench-" + hex.EncodeToString(id[:])
	if b.broker == nil {
		// Warn, not Info: the benchmark writes to someone's cluster.
		b.cfg.Logger.Warn("benchmarking an external cluster: creating topics and groups named "+b.prefix+"-*; they are deleted at the end", "brokers", strings.Join(b.brokers, ","))
	}
	return nil
}

// close deletes what the benchmark created and stops the embedded broker.
func (b *bencher) close() {
	if b.adm != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm := kadm.NewClient(b.adm)
		if len(b.topics) > 0 {
			if err := admin.DeleteTopics(ctx, b.adm, b.topics...); err != nil {
				b.cfg.Logger.Warn("deleting the benchmark's topics failed", "topics", b.topics, "err", err)
			}
		}
		if len(b.groups) > 0 && b.broker == nil {
			if _, err := adm.DeleteGroups(ctx, b.groups...); err != nil {
				b.cfg.Logger.Warn("deleting the benchmark's groups failed", "groups", b.groups, "err", err)
			}
		}
		b.adm.Close()
	}
	if b.broker != nil {
		b.broker.Close()
	}
}

// produceInputs writes each size's backlog once; every run of that size
// drains the same records.
func (b *bencher) produceInputs(ctx context.Context) error {
	b.inputs = map[int]string{}
	if err := b.produceWarmups(ctx); err != nil {
		return err
	}
	if b.cfg.Topology == topologyAggregate {
		topic := b.prefix + "-in-aggregate"
		b.topics = append(b.topics, topic)
		b.inputs[0] = topic
		return b.produceAggregateInput(ctx, topic)
	}
	for _, size := range b.cfg.Sizes {
		topic := fmt.Sprintf("%s-in-%d", b.prefix, size)
		n := b.cfg.records(size)
		b.topics = append(b.topics, topic)
		start := time.Now()
		var progress func(done, total int64)
		if b.cfg.Progress != nil {
			progress = func(done, total int64) {
				b.cfg.Progress(Progress{Phase: "input", Size: size, Done: done, Total: total, Elapsed: time.Since(start), Runs: b.totalRuns()})
			}
		}
		if _, err := datagen.Produce(ctx, b.adm, datagen.Config{Topic: topic, Count: n, Size: size, Partitions: b.cfg.Partitions, Progress: progress, KeyHeader: b.keyHeader(), Keys: b.cfg.joinTableRows()}); err != nil {
			return fmt.Errorf("bench: producing the %d-byte input: %w", size, err)
		}
		b.inputs[size] = topic
		if b.registry != "" {
			twin, err := b.produceAvroTwin(ctx, size, progress)
			if err != nil {
				return err
			}
			if b.avroInputs == nil {
				b.avroInputs = map[int]string{}
			}
			b.avroInputs[size] = twin
		}
	}
	if b.cfg.Topology == topologyJoin {
		return b.seedJoinTable(ctx)
	}
	return nil
}

func (b *bencher) totalRuns() int {
	return len(b.cfg.Modes) * b.cfg.Repeat * len(b.cfg.Sizes) * len(b.cfg.Intervals) * len(b.cfg.Threads)
}

// RoundOrder is the order the modes run in, in every cell of round
// (1-based): modes as given in round 1, rotated left by one each later
// round, so that over len(modes) rounds every mode runs once in every
// position, and none always runs first (on a cold cache, a fresh JVM's
// page cache, a machine still busy with the input).
func RoundOrder(modes []Mode, round int) []Mode {
	if len(modes) == 0 {
		return nil
	}
	k := (round - 1) % len(modes)
	return append(slices.Clone(modes[k:]), modes[:k]...)
}

// sweep runs every cell in every round, the modes in RoundOrder. In an
// auto cell the other modes commit as often as eos chose to: until eos has
// run in the cell, it runs first; after that the others use the interval
// its latest run chose.
func (b *bencher) sweep(ctx context.Context) error {
	for _, threads := range b.cfg.Threads {
		if err := b.sweepThreads(ctx, threads); err != nil {
			return err
		}
	}
	return nil
}

// sweepThreads runs every cell in every round with the copiers' parallelism
// at threads (Config.Threads).
func (b *bencher) sweepThreads(ctx context.Context, threads int) error {
	chosen := map[string]time.Duration{} // auto cell -> eos's interval
	for round := 1; round <= b.cfg.Repeat; round++ {
		order := RoundOrder(b.cfg.Modes, round)
		for _, size := range b.cfg.Sizes {
			for _, iv := range b.cfg.Intervals {
				key := fmt.Sprintf("%s/%d", iv, size)
				modes := order
				if iv.Auto && chosen[key] == 0 {
					modes = append([]Mode{ModeEOS}, slices.DeleteFunc(slices.Clone(order), func(m Mode) bool { return m == ModeEOS })...)
				}
				for seq, m := range modes {
					use := iv
					if iv.Auto && m != ModeEOS {
						use = Interval{Fixed: chosen[key]}
					}
					r, err := b.run(ctx, round, seq+1, m, iv, use, size, threads)
					if err != nil {
						return err
					}
					if iv.Auto && m == ModeEOS {
						// The interval auto settled on: its median
						// transaction, less the commit. Rounded to a
						// millisecond for the command line.
						chosen[key] = max(time.Duration(r.OpenP50Ms*float64(time.Millisecond)).Round(time.Millisecond), time.Millisecond)
					}
				}
			}
		}
	}
	return nil
}

// run runs one mode of one cell: drain the backlog, then measure latency on
// live records, then stop the copiers. cellIv names the cell; iv is the
// interval the copiers use (they differ only for the baseline of an auto
// cell).
func (b *bencher) run(ctx context.Context, round, seq int, mode Mode, cellIv, iv Interval, size, threads int) (RunResult, error) {
	b.runNo++
	res := RunResult{Round: round, Seq: seq, Mode: mode, Interval: cellIv.String(), Size: size, Threads: threads, Records: b.records(size)}
	name := fmt.Sprintf("run %d/%d (round %d, %s, %s, %d bytes, %d threads)", b.runNo, b.totalRuns(), round, mode, cellIv, size, threads)
	stem := fmt.Sprintf("%s-%s-%s-%d-t%d-r%d", b.prefix, mode, topicSafe(cellIv.String()), size, threads, round)
	job := copyJob{mode: mode, interval: iv, app: stem, inputs: []string{b.inputs[size], stem + "-live"}, output: stem + "-out", workers: b.cfg.Workers,
		peerJar: b.peerJar, threads: threads, settings: b.settings}
	if mode.jvm() {
		// The warm-up's group and outputs are the run's, suffixed -warmup.
		job.warmup = b.warmups[size]
	}
	aggregate := b.aggInput != nil
	if aggregate {
		// The second input carries the heartbeats, not live records.
		job.inputs[1], job.dlq, job.config = stem+"-hb", stem+"-dlq", b.aggConfig
		if mode == ModeEOSNoPreagg {
			job.config = b.aggConfigNoPreagg
		}
		name = fmt.Sprintf("run %d/%d (round %d, %s, %s, aggregate, %d threads)", b.runNo, b.totalRuns(), round, mode, cellIv, threads)
	}
	dedup := b.cfg.Topology == topologyDedup
	if dedup {
		// One input: no live records (dedup.go).
		job.inputs, job.config = job.inputs[:1], b.dedupConfig
	}
	join := b.cfg.Topology == topologyJoin
	if join {
		// One input, as a table needs; a dead letter fails the judge.
		job.inputs, job.config, job.dlq = job.inputs[:1], b.joinConfig, stem+"-dlq"
		dedup = true // the same run otherwise (join.go)
	}
	etl := b.cfg.Topology == topologyETL
	if etl {
		// One input, JSON or its Avro twin: no live records (etl.go).
		job.inputs, job.config = job.inputs[:1], b.etlJSON
		if mode == ModeEOSAvro {
			job.inputs[0], job.config, job.registry = b.avroInputs[size], b.etlAvro, b.registry
		}
		job.dlq = stem + "-dlq" // none expected: every order decodes and fits
	}
	b.groups = append(b.groups, stem)
	if job.warmup != "" {
		b.groups = append(b.groups, stem+"-warmup")
	}
	created := append(slices.Clone(job.inputs[1:]), job.output)
	if job.dlq != "" {
		created = append(created, job.dlq)
	}
	for _, t := range created {
		if err := b.createTopic(ctx, t, aggregate && t == job.output); err != nil {
			return res, err
		}
	}
	if aggregate || dedup || etl {
		// The copiers' internal topics too (repartition, changelogs).
		defer b.deleteRunTopics(ctx, stem)
	} else if job.warmup != "" {
		defer b.deleteTopics(job.output, job.inputs[1], job.output+"-warmup")
	} else {
		defer b.deleteTopics(job.output, job.inputs[1])
	}

	progress := func(phase string, total int64, start time.Time) func(int64) {
		if b.cfg.Progress == nil {
			return nil
		}
		return func(done int64) {
			b.cfg.Progress(Progress{Run: b.runNo, Runs: b.totalRuns(), Round: round, Mode: mode, Interval: cellIv.String(),
				Size: size, Phase: phase, Done: done, Total: total, Elapsed: time.Since(start)})
		}
	}
	log := newRunLog()
	// The clock starts before the copiers: its first sample is (now, 0).
	clock := startOffsetClock(ctx, kadm.NewClient(b.adm), job.app, job.inputs[0])
	var samples []offsetSample
	defer func() {
		if samples == nil {
			clock.stop()
		}
	}()
	f, err := startCopiers(ctx, b.cfg, b.brokers, job, log.onEvent)
	if err != nil {
		return res, fmt.Errorf("bench: %s: %w", name, err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_, _ = f.stop()
		}
	}()
	var (
		cpu     time.Duration
		drained time.Time
		st      drainStats
		lat     latencyResult
	)
	if aggregate {
		// No latency phase: see aggregate.go.
		if drained, err = b.aggregateDrain(ctx, job, log, progress("drain", res.Records, time.Now())); err != nil {
			return res, fmt.Errorf("bench: %s, draining the backlog: %w", name, err)
		}
		cpu = f.cpu()
		log.mu.Lock()
		st = aggregateStats(log.commits, res.Records, drained)
		log.mu.Unlock()
		if samples, err = b.readClock(ctx, clock, res.Records); err != nil {
			return res, fmt.Errorf("bench: %s: %w", name, err)
		}
		if err := b.finishAggregate(ctx, &res, job, log); err != nil {
			return res, fmt.Errorf("bench: %s: %w", name, err)
		}
	} else {
		if err := log.waitConsumed(ctx, res.Records, b.cfg.RunTimeout, progress("drain", res.Records, time.Now())); err != nil {
			return res, fmt.Errorf("bench: %s, draining the backlog: %w", name, err)
		}
		cpu = f.cpu()
		drained = time.Now()
		log.mu.Lock()
		st = drain(log.commits, res.Records)
		log.mu.Unlock()
		if samples, err = b.readClock(ctx, clock, res.Records); err != nil {
			return res, fmt.Errorf("bench: %s: %w", name, err)
		}
		judge := b.verify
		if join {
			judge = b.judgeJoin
		}
		if err := judge(ctx, &res, job); err != nil {
			return res, fmt.Errorf("bench: %s: %w", name, err)
		}
	}
	if !noLatencyPhase(b.cfg.Topology) {
		dur := b.cfg.latencyDuration(cellIv)
		probe := &latencyProbe{opts: b.opts, mode: mode, input: job.inputs[1], output: job.output, size: size,
			rate: b.cfg.LatencyRate, duration: dur, firstSeq: res.Records}
		if lat, err = probe.run(ctx, 2*max(iv.Fixed, b.cfg.MaxCommitInterval)+10*time.Second, progress("latency", int64(float64(b.cfg.LatencyRate)*dur.Seconds()), time.Now())); err != nil {
			return res, fmt.Errorf("bench: %s: %w", name, err)
		}
	}
	if jf, ok := f.(*kstreamsFleet); ok {
		res.Settings = jf.reported()
	}
	peak, ferr := f.stop()
	stopped = true
	if ferr != nil && !errors.Is(ferr, context.Canceled) {
		return res, fmt.Errorf("bench: %s: %w", name, ferr)
	}

	rps, window, short := midRate(samples, res.Records)
	res.RPS, res.WindowS, res.ShortWindow = rps, window.Seconds(), short
	res.EventRPS, res.EventWindowS = st.rps, st.window.Seconds()
	res.MBps = rps * float64(size) / 1e6
	if aggregate {
		res.MBps = rps * b.aggMeanBytes / 1e6
	}
	res.Commits, res.TxnPerSec = st.commits, st.txnPerSec
	res.CommitP50Ms, res.CommitP99Ms, res.FlushP50Ms = ms(st.commitP50), ms(st.commitP99), ms(st.flushP50)
	res.TxnP50Ms, res.TxnP99Ms, res.OpenP50Ms = ms(st.txnP50), ms(st.txnP99), ms(st.openP50)
	res.OverheadPct = st.overhead * 100
	res.E2ESamples = len(lat.samples)
	res.E2EP50Ms, res.E2EP99Ms, res.E2EMaxMs = ms(quantile(lat.samples, 0.5)), ms(quantile(lat.samples, 0.99)), ms(quantile(lat.samples, 1))
	res.E2EP999Ms = ms(quantile(lat.samples, 0.999))
	res.CPUSeconds = cpu.Seconds()
	res.CPUSecPerM = cpu.Seconds() / float64(res.Records) * 1e6
	res.PeakRSSMiB = float64(peak) / (1 << 20)
	log.mu.Lock()
	res.Aborted, res.Reinits, res.CommittedRec = log.aborted, log.reinits, log.consumed
	lv := live(log.commits, drained)
	log.mu.Unlock()
	res.LiveCommitP50Ms, res.LiveCommitP99Ms, res.LiveOpenP50Ms = ms(lv.commitP50), ms(lv.commitP99), ms(lv.openP50)
	res.LiveOverheadPct = lv.overhead * 100
	b.runs = append(b.runs, res)
	b.cfg.Logger.Debug("bench run done", "run", name, "rps", int(res.RPS), "e2e_p99_ms", res.E2EP99Ms)
	return res, nil
}

// readClock waits until the broker shows the whole backlog committed by
// the run's group, and stops the clock: its samples.
func (b *bencher) readClock(ctx context.Context, c *offsetClock, backlog int64) ([]offsetSample, error) {
	err := c.waitFor(ctx, backlog, b.cfg.RunTimeout)
	samples := c.stop()
	if err != nil {
		return nil, fmt.Errorf("timing the drain: %w", err)
	}
	return samples, nil
}

// verify reads the backlog and the run's output with read_committed, as
// they stand after the drain (the live records of the latency phase are not
// produced yet), and records the verdict. Duplicates are what at-least-once
// allows, so they fail only the exactly-once modes; a missing record or an
// order violation fails any mode.
func (b *bencher) verify(ctx context.Context, res *RunResult, job copyJob) error {
	if err := b.awaitStable(ctx, job.output); err != nil {
		return err
	}
	rep, err := verify.Run(ctx, b.opts, verify.Config{Input: job.inputs[0], Output: job.output, Timeout: b.cfg.RunTimeout})
	if err != nil {
		return fmt.Errorf("verifying the output: %w", err)
	}
	res.Verified, res.Duplicates, res.Missing = rep.OK(), rep.Duplicates, rep.Missing
	switch {
	case rep.OK() && b.cfg.Topology == topologyETL:
		bad, first, err := b.etlCheck(ctx, job.output, res.Mode == ModeEOSAvro)
		if err != nil {
			return fmt.Errorf("checking the etl output's values: %w", err)
		}
		if bad > 0 {
			res.Verified = false
			return fmt.Errorf("the %s output holds every key once, but %d values are not their order's: %s", res.Mode, bad, first)
		}
		return nil
	case rep.OK():
		return nil
	case res.Mode == ModeBaseline && rep.Missing == 0 && rep.Unexpected == 0 && rep.OrderViolations == 0:
		b.cfg.Logger.Warn("the at-least-once baseline duplicated records", "summary", rep.Summary())
		return nil
	}
	return fmt.Errorf("the %s output is not an exactly-once copy of the input: %s", res.Mode, rep.Summary())
}

// awaitStable waits until no transaction is still completing on topic: its
// last stable offset equals its high watermark on every partition. On Apache
// Kafka the commit markers are written after EndTxn returns (transactions
// v2 completes them asynchronously), so a read_committed reader listing
// offsets right after the last commit stopped short of it.
func (b *bencher) awaitStable(ctx context.Context, topic string) error {
	if err := committed.WaitSettled(ctx, b.opts, b.cfg.RunTimeout, topic); err != nil {
		return fmt.Errorf("after the drain: %w", err)
	}
	return nil
}

// createTopic creates topic for a run. keep turns time-based retention off:
// the aggregate's results carry their window's end, aggcheck.Input's
// 2023 event time, as their timestamp, and a cluster's retention.ms (7 days
// by default) would delete them at its next retention check, before the
// judge reads them. The bench deletes its topics at the end either way.
func (b *bencher) createTopic(ctx context.Context, topic string, keep bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var configs map[string]*string
	if keep {
		forever := "-1"
		configs = map[string]*string{"retention.ms": &forever}
	}
	if _, _, err := admin.EnsureTopic(ctx, b.adm, topic, b.cfg.Partitions, configs); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// deleteTopics deletes a run's own topics at once, so that the embedded
// broker's memory holds only the backlogs.
func (b *bencher) deleteTopics(topics ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.DeleteTopics(ctx, b.adm, topics...); err != nil {
		b.cfg.Logger.Warn("deleting a run's topics failed; they are retried at the end", "topics", topics, "err", err)
		b.topics = append(b.topics, topics...)
	}
}

func (b *bencher) report() *Report {
	rep := &Report{Params: b.params()}
	for _, threads := range b.cfg.Threads {
		for _, size := range b.cfg.Sizes {
			for _, iv := range b.cfg.Intervals {
				var runs []RunResult
				for _, r := range b.runs {
					if r.Size == size && r.Interval == iv.String() && r.Threads == threads {
						runs = append(runs, r)
					}
				}
				c := cell(iv.String(), size, b.records(size), runs)
				c.Threads = threads
				rep.Cells = append(rep.Cells, c)
			}
		}
	}
	rep.Auto = autoChecks(rep.Cells, b.cfg.OverheadBudget)
	return rep
}

func (b *bencher) params() Params {
	c := b.cfg
	p := Params{
		Started: b.started, ElapsedS: time.Since(b.started).Seconds(),
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), CPUModel: cpuModel(),
		Broker: "embedded", RTT: c.RTT.String(), RTTMs: ms(c.RTT),
		Modes: c.Modes, NoIdempotencyKey: c.NoIdempotencyKey,
		Topology: c.Topology, KeyHeader: c.KeyHeader, TableRows: c.joinTableRows(), Sizes: c.Sizes, Partitions: c.Partitions, Workers: c.Workers, Repeat: c.Repeat,
		OverheadBudget: c.OverheadBudget, MaxCommitInterval: c.MaxCommitInterval.String(), LatencyRate: c.LatencyRate,
		LatencyDurationNote: "max(" + DefaultLatencyDuration.String() + ", 3 commit intervals)",
		Clock:               "every mode: the group's committed offsets on the backlog, read from the broker every " + clockPoll.String() + ", between 10% and 90% of the backlog",
	}
	for round := 1; round <= c.Repeat; round++ {
		var names []string
		for _, m := range RoundOrder(c.Modes, round) {
			names = append(names, string(m))
		}
		p.Orders = append(p.Orders, strings.Join(names, ","))
	}
	if c.LatencyDuration > 0 {
		p.LatencyDurationNote = c.LatencyDuration.String()
	}
	if b.broker == nil {
		p.Broker, p.Brokers, p.TopicPrefix = "external", b.brokers, b.prefix
	}
	for _, iv := range c.Intervals {
		p.Intervals = append(p.Intervals, iv.String())
	}
	for _, s := range c.Sizes {
		p.Records = append(p.Records, b.records(s))
	}
	if c.InProcess {
		p.Copiers = "in-process goroutines"
		p.CPUScope = "the whole bench process over the drain: copiers plus, if embedded, the broker"
		p.RSSScope = "the whole bench process's peak RSS (VmHWM, reset at each run's start): copiers, the bench's clients and, if embedded, the broker with every backlog in memory"
	} else {
		p.Copiers = "child processes (eosctl run for eos, eosctl bench baseline and bench bare for the others)"
		p.CPUScope = "the copier processes only, from process start to the end of the drain (/proc/<pid>/stat, 10ms ticks)"
		p.RSSScope = "the largest copier process's peak RSS since exec (VmHWM from /proc/<pid>/status, read before it is stopped)"
	}
	p.Threads, p.ClientSettings = c.Threads, b.clientSettings()
	if c.Topology == topologyETL {
		p.ETLConfigs = map[Mode]string{ModeEOS: etlJSONConfig, ModeEOSAvro: etlAvroConfig}
		p.SchemaRegistry = b.registryKind
	}
	if slices.ContainsFunc(c.Modes, Mode.jvm) {
		p.JVMHeap, p.KStreamsStore = c.JVMHeap, c.KStreamsStore
		p.Copiers += "; the JVM modes as one JVM per worker (java -Xmx" + c.JVMHeap + " -XX:ActiveProcessorCount=THREADS, Kafka Streams with THREADS stream threads, the Java loop with THREADS loops); the Go copiers with GOMAXPROCS=THREADS"
		p.CPUScope += "; for the JVM modes, from when each JVM processed its first measured record or printed started, whichever came first (its start, class loading, warm-up and group join left out)"
		p.RSSScope += "; a JVM's VmHWM is its whole resident memory: heap, metaspace, code cache, thread stacks and RocksDB's native memory"
		if c.WarmupRecords > 0 {
			p.WarmupRecords = c.WarmupRecords
		}
	}
	return p
}

// topicSafe maps an interval label to Kafka's topic alphabet.
func topicSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		case r == '.':
			return '_'
		case r == 'µ':
			return 'u'
		}
		return '-'
	}, s)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
