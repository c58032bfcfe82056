package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/cmd/eosctl/internal/bench"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newBenchCmd(g *globals) *cobra.Command {
	var (
		cfg                bench.Config
		intervals, sizes   string
		modes              string
		eosIdemKey         bool
		cpuProfile         string
		latencyRate        int
		records            int64
		partitions         int32
		workers, repeat    int
		latencyDuration    time.Duration
		overheadBudget     float64
		maxCommitInterval  time.Duration
		rtt                time.Duration
		runTimeout         time.Duration
		inProcess, noTable bool
		wide               bool
		threads            string
		warmupRecords      int64
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure what exactly-once costs: eos against an at-least-once baseline, a hand-written loop and Kafka Streams, in one run",
		Long: `Runs the same topology over the same pre-produced input in several modes
(--modes, default baseline,bare,eos), on the same brokers, for --repeat
rounds; round 1 runs them in the order given in every cell, and each later
round rotates that order by one (printed above the table), so that no mode
always runs first:

  baseline  at-least-once: idempotent producer (acks=all), read_uncommitted
            consumer group, and every commit interval a flush followed by a
            plain synchronous OffsetCommit;
  bare      exactly-once by hand: the minimal franz-go GroupTransactSession
            loop (poll, produce each record to the same partition of the
            output, End once the transaction is a commit interval old), with
            kgo's defaults and none of eos's features; what the engine costs
            or saves over writing the loop yourself (passthrough only);
  eos       the real worker (eosctl run): transactions, read_committed, the
            offsets committed inside the transaction;
  kstreams  Kafka Streams 4.4 with processing.guarantee=exactly_once_v2 (the
            application of bench/peers/kstreams, built with Maven on first
            use into ~/.cache/eos/kstreams-peer, or $EOS_KAFKA_CACHE; needs
            java 17+ and mvn), one JVM per worker (-Xmx from --jvm-heap,
            --threads stream threads); real Apache Kafka only (--brokers or
            EOSCTL_BROKERS), passthrough or aggregate (--kstreams-store
            rocksdb or memory);
  javaloop  a hand-written Java transactional copy loop in the same jar
            (KafkaConsumer read_committed, KafkaProducer with a
            transactional.id, sendOffsetsToTransaction with the group
            metadata, commit every interval; abort and rewind to the
            committed offsets on error), --threads loops per JVM; beside
            bare, it separates the client from the engine; passthrough only;
  kstreams-defaults, javaloop-defaults
            the same with their clients' defaults instead of eos's settings.
            kstreams and javaloop run with eos's effective client settings
            (compression, batch size, linger, acks, in-flight, fetch
            bounds), which the table prints for every mode. Each JVM first
            drains --warmup-records records in the same JVM, so that its JIT
            is warm. The JVM peers report no commits: their progress is
            their group's committed offsets, read from the broker every
            25 ms, so their txn/s, commit timings and overhead show "-";
            their throughput, e2e latency, CPU (counted from the measured
            instance's first record or its started line, whichever came
            first, after its warm-up) and peak RSS (the whole
            process: heap, RocksDB and other native memory) are measured as
            the others';
  eos-nopreagg  eos on the aggregate topology with preaggregate: false: no
            combining before the repartition topic, every record through it
            alone, as Kafka Streams does (--topology aggregate only). Beside
            eos and kstreams it separates the design (eos / eos-nopreagg)
            from the engine (eos-nopreagg / kstreams), printed below the
            table.

--threads 1,2 runs every cell at each parallelism: the Go copiers with
GOMAXPROCS=N, Kafka Streams with N stream threads, the Java loop with N
loops, each JVM with -XX:ActiveProcessorCount=N.

After each drain the output is read back with read_committed and must hold
every input record exactly once and in order per partition; bare, eos or
kstreams failing that check fails the benchmark (the baseline may
duplicate: that is what at-least-once allows, and the run says so).

Each run drains a backlog of --records records (throughput, commit timings,
commit overhead, CPU), then measures end-to-end latency on live records
produced at the fixed --latency-rate for --latency-duration (default 30s,
or 3 commit intervals if longer): from the producer's clock to the moment a
read_committed (bare, eos, kstreams) or read_uncommitted (baseline)
consumer of the output sees the record. p50, p99 and p99.9 are printed with
the sample count; a quantile with fewer than ten samples above it (1,000
samples for a p99, 10,000 for a p99.9) shows "few" instead of a number.

Throughput has one clock for every mode, eos included: the run's group's
committed offsets on the backlog, read from the broker every 25 ms; rec/s
is the records committed between the moments they passed 10% and 90% of
the backlog over the time between them, so start-up (a JVM's, a group
join) and the idle tail do not count. The copier's own figure from its
commit events stays in the JSON as event_rps. The sweep covers every --intervals
x --sizes cell; each cell reports, per mode, medians over rounds of
throughput, commit stalls (p50/p99 of flush + offset commit + EndTxn), the
share of time spent committing, end-to-end latency and CPU seconds per
million records, and the eos/baseline, eos/bare and eos/kstreams ratios
(medians of the per-round ratios of runs that ran back to back) with their
spread. --eos-idempotency-key=false runs eos without its
per-record idempotency-key header, to measure what the header costs.

Brokers follow the rules of every command: --brokers, else EOSCTL_BROKERS;
only when neither names any does the bench start an embedded broker, which
injects --rtt (default 1ms) per response, because loopback round trips are
microseconds and hide the very cost being measured. The table's first line
says which brokers ran and where they were named. Against real brokers the
benchmark creates uniquely named topics and groups (eosbench-<random>-...)
and deletes them at the end.

Copiers run as child processes of this binary (eos as "eosctl run", the
others as "eosctl bench baseline" and "eosctl bench bare"), so their CPU and peak RSS are their
own; --in-process runs them as goroutines next to the broker instead, and the
figures then cover the whole process. An "auto" interval runs the worker with
--commit-interval auto (--eos-overhead-budget, --max-commit-interval); the
other modes commit as often as auto chose to.

--topology passthrough,aggregate runs both, one after the other, each with
its own table and files (kstreams.json becomes kstreams-passthrough.json and
kstreams-aggregate.json): with --modes eos,kstreams, the whole comparison
with Kafka Streams in one command. Each topology runs the modes of --modes
that run it (the copy loops baseline, bare and javaloop passthrough only,
eos-nopreagg the aggregate only), and says which it left out; --sizes
applies to the passthrough only. Every setting is checked for both before
either runs.

--topology aggregate (modes eos and kstreams only, eos alone by default; no
--sizes) runs the aggregate topology under aggcheck.Config on
aggcheck.Input:
--records regular orders (default 200,000, at most 600,000) with late
records and poison pills. After the drain, heartbeats close every window
and aggcheck.Judge must find every window's result and every dead
letter exactly once. rec/s counts input records until the group has
consumed the input and the repartition topic; there is no latency phase
(a result is written when its window closes, ten minutes of event time
later), so e2e shows "-".

--topology dedup (mode eos only) runs the dedup topology keyed by a header
(key: {header: event-id}, retention 24h) over a backlog whose records carry
their distinct seq in that header: every record passes and every key is
held at the end, so --records is the number of keys held (peak RSS is the
worker's memory for them). verify must find every key exactly once, in
order. A worker with state reads one input, so there is no latency phase
and e2e shows "-". Run --topology passthrough,dedup --modes eos for the
ratio: the passthrough's backlog then carries the header too, so both
drain records of the same shape.

--topology etl (modes eos and eos-avro, both by default) runs the etl
topology (map cents and size, drop pad) on the JSON backlog (eos) and on
its Avro twin (eos-avro: the same orders in the Confluent wire format, the
output written in Avro), interleaved, and reports eos-avro / eos and the
CPU a record of each. The registry is --schema-registry (or
EOSCTL_SCHEMA_REGISTRY); "fake" runs franz-go's in-process srfake (no JVM
sharing the cores); unset, the bench starts Apicurio Registry from Maven
Central (java and mvn needed). verify must find every key exactly once,
in order, and every value, decoded by encoding/json or hamba/avro, must be
its order's. One input, so no latency phase: e2e shows "-".

Output: a progress bar on a terminal, a table at the end of the essential
columns (--wide for every column: ratio spreads, txn/s, flush, overhead,
e2e max), and on request
--json (every figure, every run, and the parameters: machine, Go version,
broker kind, RTT), --csv (one row per cell) and --chart (SVG or PNG by
extension; repeatable).`,
		Example: `  eosctl bench
  eosctl bench --modes bare,eos --sizes 100 --intervals 10ms,100ms --records 1000000 --repeat 5
  eosctl bench --modes eos --eos-idempotency-key=false --sizes 100 --intervals 100ms
  eosctl bench --intervals 10ms,100ms,1s,auto --sizes 1024 --json bench.json --chart bench.svg --chart bench.png
  eosctl bench --rtt 0 --sizes 100 --intervals 100ms --in-process
  eosctl bench --brokers kafka-1:9092,kafka-2:9092 --sizes 1024 --intervals 100ms,1s --repeat 5
  # eos beside Kafka Streams on a real Apache Kafka cluster (scripts/kafka start), interleaved;
  # the live records' rate well under Kafka Streams' throughput, or its latency measures a queue:
  eosctl --brokers 127.0.0.1:9092 bench --modes baseline,eos,kstreams --sizes 100,1024 --intervals 100ms --records 1000000 --repeat 3 --latency-rate 2000
  # dedup holding 10,000,000 keys beside passthrough on the same machine:
  eosctl bench --topology passthrough,dedup --modes eos --sizes 100 --intervals 100ms --records 10000000 --repeat 3
  # etl on Avro against etl on JSON, the same orders (a registry started for it, or --schema-registry URL or fake):
  eosctl bench --topology etl --sizes 100 --intervals 100ms --records 1000000 --repeat 5
  # the aggregate (count/sum/min/max/avg per user per 5 s window), both outputs judged window by window:
  eosctl --brokers 127.0.0.1:9092 bench --topology aggregate --modes eos,kstreams --intervals 100ms --records 500000 --repeat 3
  # the same with and without eos's pre-aggregation: the design and the engine apart
  EOSCTL_BROKERS=127.0.0.1:9092 eosctl bench --topology aggregate --modes eos,eos-nopreagg,kstreams --intervals 100ms --repeat 3
  eosctl --brokers 127.0.0.1:9092 bench --topology passthrough,aggregate --modes eos,kstreams --intervals 100ms --records 300000 --repeat 3 --latency-rate 1000 --json kstreams.json
  # the matched comparison in one command: eos, the franz-go and Java loops and Kafka Streams with eos's client
  # settings, warm JVMs, 1 and 2 cores; each topology runs the modes that run it:
  eosctl --brokers 127.0.0.1:9092 bench --topology passthrough,aggregate --modes bare,javaloop,eos,eos-nopreagg,kstreams,kstreams-defaults --threads 1,2 --sizes 100 --intervals 100ms --repeat 2 --json matched.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if cfg.Intervals, err = bench.ParseIntervals(intervals); err != nil {
				return usage(err)
			}
			// Unset, the library's default: 100,1024, or none for the
			// aggregate topology, whose input has its own records.
			if cmd.Flags().Changed("sizes") {
				if cfg.Sizes, err = bench.ParseSizes(sizes); err != nil {
					return usage(err)
				}
			}
			// Likewise the modes: the library's default depends on the
			// topology (eos alone for the aggregate).
			if cmd.Flags().Changed("modes") {
				if cfg.Modes, err = bench.ParseModes(modes); err != nil {
					return usage(err)
				}
			}
			cfg.NoIdempotencyKey = !eosIdemKey
			changed := cmd.Flags().Changed
			if changed("threads") {
				if cfg.Threads, err = bench.ParseThreads(threads); err != nil {
					return usage(err)
				}
			}
			switch {
			case !changed("warmup-records"):
				cfg.WarmupRecords = 0 // the library's default, per topology
			case warmupRecords == 0:
				cfg.WarmupRecords = -1 // none
			case warmupRecords < 0:
				return usage(fmt.Errorf("--warmup-records must be 0 (none) or positive"))
			default:
				cfg.WarmupRecords = warmupRecords
			}
			// Zero is the library's "default" for these, so only the
			// command line, which has its own defaults, can tell a 0 the
			// user typed from none; bench.Config judges everything else.
			for _, c := range []struct {
				name string
				bad  bool
			}{
				{"records", changed("records") && records <= 0},
				{"partitions", partitions <= 0},
				{"workers", workers <= 0},
				{"repeat", repeat <= 0},
				{"latency-rate", latencyRate <= 0},
				{"table-rows", cfg.TableRows <= 0},
			} {
				if c.bad {
					return usage(fmt.Errorf("--%s must be positive", c.name))
				}
			}
			cfg.Records, cfg.Partitions, cfg.Workers, cfg.Repeat = records, partitions, workers, repeat
			cfg.LatencyRate, cfg.LatencyDuration, cfg.RunTimeout = latencyRate, latencyDuration, runTimeout
			cfg.StartTimeout = g.timeout
			cfg.OverheadBudget, cfg.MaxCommitInterval, cfg.InProcess = overheadBudget, maxCommitInterval, inProcess
			if !changed("records") {
				cfg.Records = 0 // sized per record size
			}
			cfg.RTT = rtt
			cfg.SchemaRegistry = g.registry.URL
			// The broker rules of every command: --brokers, else
			// EOSCTL_BROKERS; the embedded broker only when neither names
			// one.
			from := brokersFrom(cmd)
			if from != "" {
				if changed("rtt") && rtt > 0 {
					return usage(fmt.Errorf("--rtt is injected by the embedded broker; it cannot be used with brokers named by %s", from))
				}
				if cfg.Brokers, err = g.seeds(); err != nil {
					return err
				}
				if cfg.ClientOpts, err = g.clientOpts(); err != nil {
					return err
				}
				if !changed("rtt") {
					cfg.RTT = 0 // the default 1ms is the embedded broker's
				}
				cfg.ChildArgs, cfg.ChildEnv = g.connArgs()
			}
			if cfg.Logger, err = benchLogger(cmd, g); err != nil {
				return err
			}
			// --topology passthrough,aggregate runs each topology in turn,
			// each with its own table and files (FILE-<topology>.EXT).
			// Every configuration is judged before anything runs or the
			// profile file is created, so that a mistake leaves nothing
			// behind.
			var cfgs []bench.Config
			names := strings.Split(cfg.Topology, ",")
			withDedup := slices.ContainsFunc(names, func(n string) bool { return strings.TrimSpace(n) == "dedup" })
			for _, name := range names {
				c := cfg
				c.Topology = strings.TrimSpace(name)
				if withDedup && c.Topology == "passthrough" {
					// The same records as dedup's: with its key header.
					c.KeyHeader = bench.DedupKeyHeader
				}
				if len(names) > 1 {
					if slices.ContainsFunc(cfgs, func(o bench.Config) bool { return o.Topology == c.Topology }) {
						return usage(fmt.Errorf("--topology: %s is listed twice", c.Topology))
					}
					// Each topology runs the modes of --modes that run
					// it, so that one command compares every peer on both.
					if len(c.Modes) > 0 {
						var kept, dropped []string
						for _, m := range c.Modes {
							if m.RunsOn(c.Topology) {
								kept = append(kept, string(m))
							} else {
								dropped = append(dropped, string(m))
							}
						}
						if len(kept) == 0 {
							return usage(fmt.Errorf("--modes: none of %s runs the %s topology", modes, c.Topology))
						}
						if len(dropped) > 0 {
							fmt.Fprintf(cmd.ErrOrStderr(), "bench: the %s topology runs %s of --modes (%s do not run it)\n", c.Topology, strings.Join(kept, ","), strings.Join(dropped, ", "))
						}
						if c.Modes, err = bench.ParseModes(strings.Join(kept, ",")); err != nil {
							return usage(err)
						}
					}
					// The aggregate's input has its own records: --sizes
					// is the passthrough's.
					if c.Topology == "aggregate" && len(c.Sizes) > 0 {
						fmt.Fprintf(cmd.ErrOrStderr(), "bench: the aggregate topology's input has its own records; --sizes applies to the passthrough only\n")
						c.Sizes = nil
					}
					c.JSONPath, c.CSVPath = perTopology(c.JSONPath, c.Topology), perTopology(c.CSVPath, c.Topology)
					c.ChartPaths = nil
					for _, path := range cfg.ChartPaths {
						c.ChartPaths = append(c.ChartPaths, perTopology(path, c.Topology))
					}
				}
				if err := c.Validate(); err != nil {
					return usage(err)
				}
				cfgs = append(cfgs, c)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return usage(fmt.Errorf("--cpuprofile: %w", err))
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}

			ctx, stop := signalContext()
			defer stop()
			for i, c := range cfgs {
				var bars *stretchProgress
				if isTerminal(os.Stderr) {
					bars = &stretchProgress{w: os.Stderr}
					c.Progress = benchProgress(bars)
				}
				rep, err := bench.Run(ctx, c)
				if bars != nil {
					bars.finish(err)
				}
				if err != nil {
					if errors.Is(err, eos.ErrConfig) {
						return usage(err)
					}
					return err
				}
				rep.Params.Command = "eosctl " + strings.Join(os.Args[1:], " ")
				rep.Params.BrokersFrom = from
				if !noTable {
					if i > 0 {
						fmt.Println()
					}
					var table strings.Builder
					write := bench.WriteTable
					if wide {
						write = bench.WriteWideTable
					}
					if err := write(&table, rep); err != nil {
						return err
					}
					fmt.Print(inFlagNames(table.String()))
				}
				if err := writeBenchFiles(rep, c.JSONPath, c.CSVPath, c.ChartPaths); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modes, "modes", "baseline,bare,eos", "modes to run in every cell, in this order in round 1 (rotated by one each round): baseline, bare, eos, eos-nopreagg (aggregate only), eos-avro (etl only: on Avro), and on real brokers the JVM peers kstreams (Kafka Streams) and javaloop (a Java transactional loop), each with eos's client settings, or with their clients' defaults as kstreams-defaults and javaloop-defaults; eos alone by default for --topology aggregate and dedup, eos,eos-avro for etl")
	f.StringVar(&threads, "threads", "", "parallelism of every copier, comma-separated to sweep (e.g. 1,2): GOMAXPROCS of the Go copiers, stream threads of Kafka Streams, loops of the Java loop, and -XX:ActiveProcessorCount of the JVMs (default: this process's GOMAXPROCS)")
	f.Int64Var(&warmupRecords, "warmup-records", 0, "records each JVM peer drains in its own JVM before the measured backlog, so that its JIT is warm; 0: none (default 500,000, or 100,000 orders for --topology aggregate)")
	f.StringVar(&cfg.JVMHeap, "jvm-heap", "", "each JVM peer's -Xmx (default "+bench.DefaultJVMHeap+")")
	f.StringVar(&cfg.KStreamsStore, "kstreams-store", "rocksdb", "the aggregate's stores in the Kafka Streams modes: rocksdb (RocksDB window store, suppress(untilWindowCloses)) or memory (in-memory window store, emitStrategy(onWindowClose))")
	f.BoolVar(&eosIdemKey, "eos-idempotency-key", true, "run eos with its idempotency-key header (false: without, as eosctl run --idempotency-key=false)")
	f.StringVar(&intervals, "intervals", "10ms,100ms,1s", "commit intervals to sweep, comma-separated durations or auto")
	f.StringVar(&sizes, "sizes", "", "record value sizes to sweep, in bytes, comma-separated (default 100,1024; none with --topology aggregate, whose input has its own records)")
	f.Int64Var(&records, "records", 0, "backlog each run drains (default: 4,000,000 records for sizes up to 128 bytes, 2,000,000 up to 1 KiB, 2 GB worth above; with --topology aggregate the regular orders, at most 600,000, default 200,000; with --topology join the events, whose keys cycle through the table's)")
	f.Int32Var(&partitions, "partitions", 6, "partitions of the input and output topics")
	f.IntVar(&workers, "workers", 1, "workers (copiers) per run, each its own process unless --in-process")
	f.IntVar(&repeat, "repeat", 3, "rounds; each runs every cell in every mode, one after the other")
	f.StringVar(&cfg.Topology, "topology", "passthrough", "topology to run: passthrough (judged as a copy), aggregate (judged window by window), dedup, join (the etl topology joining every record with its row of a seeded table, judged record by record), etl (eos on JSON against eos-avro on Avro), or several, comma-separated: run in turn, each with its own table and files (FILE-TOPOLOGY.EXT)")
	f.Int64Var(&cfg.TableRows, "table-rows", bench.DefaultTableRows, "rows of the table --topology join seeds and joins every record with; event i is keyed i mod --table-rows")
	f.DurationVar(&rtt, "rtt", time.Millisecond, "round-trip time the embedded broker injects per response (0: loopback)")
	f.Var(percentFlag{v: &overheadBudget}, "eos-overhead-budget", "for auto intervals: the share of wall time commits may take, in percent (default 3%)")
	f.DurationVar(&maxCommitInterval, "max-commit-interval", 0, "for auto intervals: the longest interval auto may choose (default 5s)")
	f.IntVar(&latencyRate, "latency-rate", 10_000, "records per second of the latency phase; keep it well under both modes' throughput")
	f.DurationVar(&latencyDuration, "latency-duration", 0, "how long the latency phase produces at --latency-rate (default: max(30s, 3 commit intervals))")
	f.BoolVar(&inProcess, "in-process", false, "run the copiers as goroutines of this process, next to the embedded broker")
	f.DurationVar(&runTimeout, "run-timeout", 2*time.Minute, "limit for each phase of a run")
	f.StringVar(&cfg.JSONPath, "json", "", "write every figure and the run's parameters as JSON to this file")
	f.StringVar(&cfg.CSVPath, "csv", "", "write one row per cell as CSV to this file")
	f.StringArrayVar(&cfg.ChartPaths, "chart", nil, "write a chart of throughput and loss against commit interval; .svg or .png, repeatable")
	f.BoolVar(&noTable, "no-table", false, "do not print the table")
	f.BoolVar(&wide, "wide", false, "print every column (ratio spreads, txn/s, flush, overhead, e2e max), not only the essential ones; the JSON has every figure")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (with --in-process: copiers and broker) to this file")
	cmd.AddCommand(newBenchBaselineCmd(g), newBenchBareCmd(g))
	return cmd
}

// writeBenchFiles writes the requested outputs, each atomically, and says so.
func writeBenchFiles(rep *bench.Report, jsonPath, csvPath string, charts []string) error {
	if jsonPath != "" {
		if err := bench.WriteFile(jsonPath, func(w io.Writer) error { return bench.WriteJSON(w, rep) }); err != nil {
			return err
		}
		fmt.Println("wrote", jsonPath)
	}
	if csvPath != "" {
		if err := bench.WriteFile(csvPath, func(w io.Writer) error { return bench.WriteCSV(w, rep) }); err != nil {
			return err
		}
		fmt.Println("wrote", csvPath)
	}
	for _, c := range charts {
		if err := bench.WriteChart(c, rep); err != nil {
			return err
		}
		fmt.Println("wrote", c)
	}
	return nil
}

// benchLogger is the global logger, at warn unless --log-level was given:
// every run starts and stops workers, whose info lines would bury the
// progress line.
func benchLogger(cmd *cobra.Command, g *globals) (*slog.Logger, error) {
	if !cmd.Flag("log-level").Changed {
		saved := g.logLevel
		g.logLevel = "warn"
		defer func() { g.logLevel = saved }()
	}
	return g.logger()
}

// benchProgress draws a bar for each stretch of a benchmark: producing a
// size's backlog, then each run's drain and latency phases, described by
// run number, round, mode, interval and size. A benchmark lasts minutes;
// the bar says how far it is and how fast the current run goes.
func benchProgress(bars *stretchProgress) func(bench.Progress) {
	return func(p bench.Progress) {
		what := fmt.Sprintf("run %d/%d  round %d  %s %s %d B  %s", p.Run, p.Runs, p.Round, p.Mode, p.Interval, p.Size, p.Phase)
		switch {
		case p.Phase == "input" && p.Size == 0:
			what = "producing the aggregate input"
		case p.Phase == "input":
			what = fmt.Sprintf("producing the %d-byte backlog", p.Size)
		case p.Size == 0:
			what = fmt.Sprintf("run %d/%d  round %d  %s %s aggregate  %s", p.Run, p.Runs, p.Round, p.Mode, p.Interval, p.Phase)
		}
		bars.set(what, p.Done, p.Total)
	}
}

// connArgs returns the global connection flags as arguments for child
// processes, and the SASL password as their environment (never argv, which
// ps shows).
func (g *globals) connArgs() (args, env []string) {
	c := g.conn
	args = append(args, "--timeout", g.timeout.String())
	if c.TLS {
		args = append(args, "--tls")
	}
	for _, kv := range [][2]string{{"--tls-ca", c.TLSCA}, {"--tls-cert", c.TLSCert}, {"--tls-key", c.TLSKey},
		{"--sasl-mechanism", c.SASLMechanism}, {"--sasl-user", c.SASLUser}} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	if c.TLSInsecureSkipVerify {
		args = append(args, "--tls-insecure-skip-verify")
	}
	if c.SASLPassword != "" {
		env = append(env, "EOSCTL_SASL_PASSWORD="+c.SASLPassword)
	}
	return args, env
}

// newBenchBaselineCmd is the baseline copier as a child process of eosctl
// bench. It is hidden: it exists to be measured, not used.
func newBenchBaselineCmd(g *globals) *cobra.Command {
	var (
		cfg      bench.BaselineConfig
		inputs   string
		topology string
	)
	cmd := &cobra.Command{
		Use:    "baseline --group G --input T[,T...] --output T --commit-interval D",
		Short:  "The at-least-once copier eosctl bench measures eos against (used by eosctl bench)",
		Hidden: true,
		Long: `Copies the inputs to the output at least once: idempotent producer with
acks=all, read_uncommitted consumer group, and every --commit-interval a flush
then a plain OffsetCommit. Writes worker events as JSON lines on stdout.
SIGINT or SIGTERM commits and exits 0. It is a benchmark baseline: a crash
between the flush and the commit duplicates output.`,
		Example: `  eosctl bench baseline --group copy --input in --output out --commit-interval 100ms`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := topologies.Lookup(topology)
			if err != nil {
				return usage(err)
			}
			if cfg.Transform, err = t.New(topologies.Options{}); err != nil {
				return usage(err)
			}
			cfg.Inputs = append(cfg.Inputs, splitList(inputs)...)
			return runCopierChild(g, &cfg.Logger, &cfg.ClientOpts, &cfg.OnEvent, func(ctx context.Context) error { return bench.RunBaseline(ctx, cfg) })
		},
	}
	copierFlags(cmd, &cfg.Group, &inputs, &cfg.Output, &cfg.CommitInterval, "output topic (required)", "flush and commit offsets this often")
	cmd.Flags().StringVar(&topology, "topology", "passthrough", "topology to run")
	return cmd
}

// copierFlags adds the flags the bench's child copiers share: --group,
// --input and --output, all required, and --commit-interval.
func copierFlags(cmd *cobra.Command, group, inputs, output *string, interval *time.Duration, outputUsage, intervalUsage string) {
	f := cmd.Flags()
	f.StringVar(group, "group", "", "consumer group (required)")
	f.StringVar(inputs, "input", "", "comma-separated input topics (required)")
	f.StringVar(output, "output", "", outputUsage)
	f.DurationVar(interval, "commit-interval", 100*time.Millisecond, intervalUsage)
	for _, req := range []string{"group", "input", "output"} {
		_ = cmd.MarkFlagRequired(req)
	}
}

// runCopierChild runs one of the copiers eosctl bench starts as a child
// (baseline, bare): it sets the copier's logger, connection options and
// event sink (JSON lines on stdout, which the parent reads) from the global
// flags, runs it until SIGINT or SIGTERM, and reports a configuration error
// as bad usage.
func runCopierChild(g *globals, logger **slog.Logger, opts *[]kgo.Opt, onEvent *func(pipeline.Event), run func(context.Context) error) error {
	var err error
	if *logger, err = g.logger(); err != nil {
		return err
	}
	if *opts, err = g.clientOpts(); err != nil {
		return err
	}
	*onEvent = pipeline.JSONEvents(os.Stdout)
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx); err != nil {
		if errors.Is(err, eos.ErrConfig) {
			return usage(err)
		}
		return err
	}
	return nil
}

// newBenchBareCmd is the hand-written exactly-once loop as a child process
// of eosctl bench. It is hidden: it exists to be measured, not used.
func newBenchBareCmd(g *globals) *cobra.Command {
	var (
		cfg    bench.BareConfig
		inputs string
	)
	cmd := &cobra.Command{
		Use:    "bare --group G --input T[,T...] --output T --commit-interval D",
		Short:  "The hand-written GroupTransactSession loop eosctl bench measures eos against (used by eosctl bench)",
		Hidden: true,
		Long: `Copies the inputs to the same partitions of the output exactly once with a bare
franz-go GroupTransactSession: poll, produce, End every --commit-interval
(counted from the transaction's first record). Transactional id GROUP-bare.
Writes worker events as JSON lines on stdout. SIGINT or SIGTERM commits and
exits 0; any End error stops it (no re-initialisation, no diagnosis).`,
		Example: `  eosctl bench bare --group copy --input in --output out --commit-interval 100ms`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Inputs = append(cfg.Inputs, splitList(inputs)...)
			return runCopierChild(g, &cfg.Logger, &cfg.ClientOpts, &cfg.OnEvent, func(ctx context.Context) error { return bench.RunBare(ctx, cfg) })
		},
	}
	copierFlags(cmd, &cfg.Group, &inputs, &cfg.Output, &cfg.CommitInterval,
		"output topic (required; as many partitions as the inputs)", "end each transaction once it is this old")
	return cmd
}

// perTopology is path for one topology of a --topology list:
// "out.json" becomes "out-aggregate.json"; empty stays empty.
func perTopology(path, topology string) string {
	if path == "" {
		return ""
	}
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + topology + ext
}
