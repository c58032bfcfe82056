// Package bench measures what exactly-once costs on a given cluster, for
// eosctl bench and for programs that measure it their own way: it runs the
// same topology over the same pre-produced input in several modes, one
// after the other, on the same brokers, and reports the differences.
//
//   - baseline: an at-least-once copy loop (see RunBaseline): idempotent
//     producer with acks=all, a read_uncommitted consumer group, and every
//     commit interval a flush followed by a plain synchronous OffsetCommit.
//   - bare: the exactly-once copy loop a user would write by hand on a
//     kgo.GroupTransactSession (see RunBare), without eos's engine: what
//     the engine costs, or saves, over writing the loop yourself.
//   - eos: the real worker of package pipeline (transactions,
//     read_committed, offsets committed inside the transaction).
//   - kstreams: Kafka Streams 4.4 with processing.guarantee=exactly_once_v2,
//     the peer application of bench/peers/kstreams (embedded in this
//     package and built with Maven into the cache on first use), one JVM
//     per worker; only against Config.Brokers (real Apache Kafka) and for
//     the passthrough and aggregate topologies. Kafka Streams reports no
//     commits: its throughput, end-to-end latency, CPU and peak RSS are
//     measured as the others', but it has no commit timings, commit
//     overhead or transaction rate. Not in the default modes.
//   - eos-nopreagg: eos on the aggregate topology with its pre-aggregation
//     before the repartition topic off (ModeEOSNoPreagg), the algorithm
//     Kafka Streams runs. Not in the default modes.
//   - javaloop: a hand-written Java transactional copy loop in the same jar
//     (KafkaConsumer with read_committed, KafkaProducer with a
//     transactional.id, sendOffsetsToTransaction with the group metadata),
//     passthrough only, measured as kstreams: beside bare, it separates the
//     client from the engine.
//   - kstreams-defaults, javaloop-defaults: the same peers with their
//     clients' defaults. kstreams and javaloop run with eos's effective
//     client settings (pipeline.WorkerClientSettings), so that their cells
//     are matched; every mode's settings are in Params.ClientSettings.
//
// Every JVM drains a warm-up backlog in the same JVM before its measured
// one (Config.WarmupRecords), and every cell runs at each of Config.Threads
// (GOMAXPROCS of the Go copiers, threads of the JVM peers).
//
// After each drain the output is read back with read_committed (package
// verify) and must hold every input record exactly once, in input order per
// partition; an exactly-once mode that fails the check fails the benchmark.
//
// The aggregate topology (Config.Topology "aggregate", modes eos and
// kstreams only) runs under aggcheck.Config, which the bench writes
// to a file for the eos workers' --config, on aggcheck.Input; the
// heartbeats that close the last windows go to a per-run second input once
// the drain is over, and the judgement is aggcheck.Judge (every
// window's final result and every dead letter exactly once and exactly
// right). Its drain ends when the group has consumed the backlog and the
// repartition topic, as read from the broker, and it has no latency phase:
// its results appear only when windows close, ten minutes of event time
// after their end. See aggregate.go.
//
// Each run has two phases. In the drain phase the copier consumes a backlog
// of Config.Records records as fast as it can; throughput, commit timings,
// commit overhead and CPU come from it. Throughput has one clock for every
// mode: the run's group's committed offsets on the backlog, read from the
// broker every 25 ms, between the moments they passed 10% and 90% of the
// backlog (see clock.go). In the latency phase a producer
// writes live records at Config.LatencyRate while a consumer of the output
// (read_committed for eos, read_uncommitted for the baseline) measures how
// long each took from the producer's clock to the consumer's. Latency is not
// measured on the backlog: there it would only measure the backlog's age.
//
// Runs alternate between the modes (baseline, bare, eos, baseline, ...) and
// the whole sweep is repeated Config.Repeat times, each round rotating the
// order of the modes by one (RoundOrder), so that drift on a noisy
// machine, and running first or last, hits every mode alike; cells report medians over rounds and the
// ratios as the medians of the per-round eos/baseline and eos/bare ratios,
// whose runs ran back to back.
package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Every error about the configuration is an *eos.ConfigError.

// Mode is one of the ways a run copies its input.
type Mode string

const (
	ModeBaseline Mode = "baseline" // at-least-once: idempotent producer, OffsetCommit after a flush
	ModeBare     Mode = "bare"     // a hand-written GroupTransactSession loop
	ModeEOS      Mode = "eos"      // the pipeline worker: transactions, read_committed
	ModeKStreams Mode = "kstreams" // Kafka Streams with exactly_once_v2 (real Apache Kafka only)
	// ModeEOSNoPreagg is the eos worker running the aggregate topology with
	// preaggregate: false (see topologies.Aggregate): every record goes
	// through the repartition topic alone, as in Kafka Streams, so that
	// eos against Kafka Streams compares the engines on the same algorithm
	// and eos against eos-nopreagg shows what the combiner is worth.
	// Aggregate topology only.
	ModeEOSNoPreagg Mode = "eos-nopreagg"
)

// isEOS reports whether m runs the eos worker (eosctl run).
func (m Mode) isEOS() bool { return m == ModeEOS || m == ModeEOSNoPreagg || m == ModeEOSAvro }

// RunsOn reports whether the mode can run topology: the copy loops
// (baseline, bare, the Java loops) keep no state and run passthrough only,
// eos-nopreagg exists for the aggregate alone, eos and Kafka Streams run
// both, dedup runs in eos alone, and etl in eos and eos-avro. Config.Validate refuses a mode that does not; a command running
// several topologies keeps for each the modes that do.
func (m Mode) RunsOn(topology string) bool {
	switch topology {
	case topologyAggregate:
		return m.isEOS() || m.kstreams()
	case "passthrough":
		return m != ModeEOSNoPreagg && m != ModeEOSAvro
	case topologyDedup, topologyJoin:
		return m == ModeEOS
	case topologyETL:
		return m == ModeEOS || m == ModeEOSAvro
	}
	return false
}

// AllModes are the modes in the order a cell runs them by default. The
// kstreams mode is not among them: it needs real brokers, Java and Maven.
var AllModes = []Mode{ModeBaseline, ModeBare, ModeEOS}

// knownModes are every mode, in the order a cell runs them by default.
var knownModes = []Mode{ModeBaseline, ModeBare, ModeEOS, ModeEOSNoPreagg, ModeEOSAvro, ModeKStreams, ModeKStreamsDefaults, ModeJavaLoop, ModeJavaLoopDefaults}

// ParseModes parses a comma-separated list such as "baseline,bare,eos" or
// "baseline,eos,kstreams".
// The order given is the order a cell runs them in.
func ParseModes(s string) ([]Mode, error) {
	return parseList(s, "bench.Config.Modes", "modes", func(f string, out []Mode) (Mode, error) {
		m := Mode(f)
		if !slices.Contains(knownModes, m) {
			return "", fmt.Errorf("mode %q: want baseline, bare, eos, eos-nopreagg, eos-avro, kstreams, kstreams-defaults, javaloop or javaloop-defaults", f)
		}
		if slices.Contains(out, m) {
			return "", fmt.Errorf("mode %q is listed twice", f)
		}
		return m, nil
	})
}

// parseList parses the comma-separated list s of a setting, item by item
// (each trimmed, empty ones skipped) with parse, which sees the items
// parsed so far. A bad item or an empty list is an eos.ConfigError on
// setting; what names the items in the latter's message.
func parseList[T any](s, setting, what string, parse func(item string, sofar []T) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := parse(f, out)
		if err != nil {
			return nil, eos.BadConfig(setting, "%w", err)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, eos.BadConfig(setting, "no %s in %q", what, s)
	}
	return out, nil
}

// Interval is one commit interval of the sweep: a fixed duration, or Auto
// (the worker adapts it to its overhead budget; see pipeline.Config).
type Interval struct {
	Fixed time.Duration
	Auto  bool
}

// String returns "auto" or the duration, as ParseIntervals accepts it.
func (i Interval) String() string {
	if i.Auto {
		return "auto"
	}
	return i.Fixed.String()
}

// ParseIntervals parses a comma-separated list such as "10ms,100ms,1s,auto".
func ParseIntervals(s string) ([]Interval, error) {
	return parseList(s, "bench.Config.Intervals", "commit intervals", func(f string, _ []Interval) (Interval, error) {
		iv, err := ParseInterval(f)
		if err != nil {
			return Interval{}, fmt.Errorf("interval %q %w", f, err)
		}
		return iv, nil
	})
}

// ParseInterval parses one commit interval as every eosctl flag takes it:
// "auto" (pipeline.Config.AutoInterval) or a positive duration. 0 is
// refused rather than taken as the worker's default, which a user typing
// it did not mean.
func ParseInterval(s string) (Interval, error) {
	if s == "auto" {
		return Interval{Auto: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return Interval{}, errors.New("is not a duration: want one such as 100ms, or auto")
	}
	if d <= 0 {
		return Interval{}, errors.New("must be positive (a duration such as 100ms, or auto)")
	}
	return Interval{Fixed: d}, nil
}

// ParseSizes parses a comma-separated list of record sizes in bytes.
func ParseSizes(s string) ([]int, error) {
	return parseList(s, "bench.Config.Sizes", "record sizes", func(f string, _ []int) (int, error) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("size %q is not a number of bytes", f)
		}
		return n, nil
	})
}

// Config describes a benchmark. The zero value, with defaults filled in, is
// the documented default run except for RTT, which the command line sets to
// 1ms and the library leaves at 0 (none) unless told.
type Config struct {
	// Modes to run in every cell; default AllModes for the
	// passthrough topology and ModeEOS alone for any other. An
	// auto interval needs eos (the others commit as often as it chose).
	// ModeKStreams needs Brokers, the passthrough or aggregate topology,
	// child processes (not InProcess), and java and mvn on PATH. The
	// aggregate topology runs in ModeEOS, ModeEOSNoPreagg and ModeKStreams
	// only, and ModeEOSNoPreagg only there. Round 1 runs them in this
	// order, and each later round rotates it by one (RoundOrder), so that
	// no mode always runs first on a machine that drifts.
	Modes []Mode
	// Intervals to sweep; default 10ms, 100ms, 1s.
	Intervals []Interval
	// Sizes are record value sizes in bytes; default 100 and 1024. The
	// aggregate topology takes none: its input is aggcheck.Input's
	// JSON orders, and its cells have size 0.
	Sizes []int
	// Records is the backlog each run drains, per size; 0 picks a count
	// that lasts a few seconds at this machine's expected throughput
	// (DefaultRecords). For the aggregate topology it is the regular
	// orders of aggcheck.NewInput, at most
	// aggcheck.MaxRecords, default DefaultAggregateRecords; the
	// input adds a late record per 1000 and a poison pill per 997, and the
	// reported records count them too.
	Records int64
	// Partitions of the input and output topics; default 6.
	Partitions int32
	// Workers copying in parallel, each with its own client (and, unless
	// InProcess, its own process); default 1.
	Workers int
	// Repeat is the number of rounds; default 3.
	Repeat int
	// Topology is passthrough (the default; every run judged as a copy),
	// aggregate (judged by aggcheck.Judge), dedup (eos mode only, over
	// distinct keys, judged as a copy: see dedup.go), etl (modes eos, on
	// JSON, and eos-avro, on Avro, judged as a copy and field by field:
	// see etl.go) or join (the etl joining a table, judged as a copy and
	// against the table's reference: see join.go); wordcount has no judge
	// here.
	// The aggregate topology runs under aggcheck.Config on
	// aggcheck.Input and is judged by aggcheck.Judge; see
	// the package documentation.
	Topology string
	// KeyHeader, if set, has every backlog record carry its key in this
	// header too. The dedup topology is keyed by it and needs
	// DedupKeyHeader (the default for it); a passthrough run to compare
	// with dedup sets it as well, so that both drain the same records
	// (eosctl bench --topology passthrough,dedup does). The aggregate's
	// input has no such header.
	KeyHeader string
	// TableRows is the join topology's table size (join.go); default
	// DefaultTableRows. Only --topology join uses it.
	TableRows int64
	// SchemaRegistry is the registry of the eos-avro mode: its URL
	// (Confluent-compatible API), "fake" for an in-process srfake, or
	// empty to start Apicurio (internal/schemaregistry); see etl.go.
	SchemaRegistry string

	// Brokers of a real cluster; empty starts an embedded one. With real
	// brokers the benchmark creates uniquely named topics and groups and
	// deletes them when it is done.
	Brokers []string
	// ClientOpts are further options for every client (TLS, SASL). Child
	// processes only get the broker list, so clusters that need more
	// require InProcess.
	ClientOpts []kgo.Opt
	// RTT is the round-trip time the embedded broker injects per response
	// (see broker.Config.RTT). It must be 0 with Brokers.
	RTT time.Duration

	// OverheadBudget and MaxCommitInterval configure the auto cells; 0
	// means the pipeline's defaults (3%, 5s).
	OverheadBudget    float64
	MaxCommitInterval time.Duration

	// LatencyRate is the fixed rate, in records per second, of the live
	// records of the latency phase; default 10000. It must stay well under
	// every mode's throughput, or latency measures a queue.
	LatencyRate int
	// LatencyDuration is how long the latency phase produces; 0 means
	// max(DefaultLatencyDuration, 3 commit intervals). A quantile q is
	// reported only from at least 10/(1-q) samples (1,000 for p99, 10,000
	// for p99.9: ten samples above it), so rate x duration decides which
	// are.
	LatencyDuration time.Duration

	// Threads are the parallelism of every copier, one sweep of the cells
	// at each count: Go copiers (child processes) run with GOMAXPROCS=N,
	// Kafka Streams with N stream threads and the Java loop with N
	// consumer-producer loops, both in a JVM told it has N processors
	// (-XX:ActiveProcessorCount=N, which sizes its GC and JIT threads).
	// Default: this process's GOMAXPROCS, alone. With InProcess, only that.
	Threads []int

	// WarmupRecords is the backlog every JVM peer drains in the same JVM
	// before its measured backlog (a warm-up topic of that many records,
	// written once per size; for the aggregate, a second
	// aggcheck.Input), so that the JIT has compiled the copy path
	// before the clock starts; 0 means DefaultWarmupRecords, -1 none. The
	// Go modes, compiled ahead of time, have none.
	WarmupRecords int64
	// JVMHeap is each JVM peer's -Xmx; default DefaultJVMHeap.
	JVMHeap string
	// KStreamsStore is the aggregate's stores in the Kafka Streams modes:
	// rocksdb (the default: RocksDB window store and
	// suppress(untilWindowCloses)) or memory (in-memory window store and
	// emitStrategy(onWindowClose)).
	KStreamsStore string

	// NoIdempotencyKey runs the eos copiers without the idempotency-key
	// header (pipeline.Config.NoIdempotencyKey), to measure what the header
	// costs.
	NoIdempotencyKey bool

	// InProcess runs the copiers as goroutines of this process instead of
	// child processes. CPU and peak RSS then cover the whole process,
	// including the embedded broker and the latency consumer.
	InProcess bool
	// Bin is the eosctl executable child processes run; empty means this
	// process's own executable.
	Bin string
	// ChildArgs are global flags for the child processes (TLS, SASL, as
	// the command line gave them) and ChildEnv their extra environment
	// (the SASL password, which must not appear in argv).
	ChildArgs []string
	ChildEnv  []string

	// JSONPath, CSVPath and ChartPaths are the files the caller means to
	// write the report to once Run returns (WriteFile with WriteJSON or
	// WriteCSV, and WriteChart); empty means none. Run writes none of
	// them, but checks them before anything starts, so that a benchmark of
	// many minutes does not end on a name it cannot write: each file's
	// directory must exist, and a chart's name must end in .svg or .png.
	// A directory removed while the benchmark runs still fails the write.
	JSONPath, CSVPath string
	ChartPaths        []string

	// RunTimeout bounds each phase of a run; default 2 minutes.
	RunTimeout time.Duration
	// StartTimeout bounds the first connection to Brokers (or the
	// embedded broker): brokers that do not answer within it fail the
	// benchmark with an error naming the likely cause; default 10s.
	StartTimeout time.Duration

	Logger *slog.Logger
	// Progress, if set, is called from one goroutine about ten times a
	// second, and at every phase change.
	Progress func(Progress)
}

// Progress says where a benchmark is.
type Progress struct {
	Run, Runs int // 1-based run number and total runs
	Round     int
	Mode      Mode
	Interval  string
	Size      int
	Phase     string // "input", "drain", "latency"
	Done      int64  // records drained (or produced, in the input phase)
	Total     int64
	Elapsed   time.Duration // since this phase began
}

// DefaultRecords is the backlog per run when Config.Records is 0: enough for
// a few seconds of draining on a 2-core machine, so that even at a 1s
// commit interval a run holds several full commits.
func DefaultRecords(size int) int64 {
	switch {
	case size <= 128:
		return 4_000_000
	case size <= 1024:
		return 2_000_000
	default:
		return max(10_000, 2_000_000*1024/int64(size))
	}
}

// maxRecordSize is the largest value size kgo's default batch limit takes.
const maxRecordSize = 900 << 10

// Validate reports the first mistake in c, as Run would, without
// connecting to anything or writing a file; every error is an
// *eos.ConfigError naming the field. A caller that prepares something
// costly before Run (a profile file) checks first.
func (c Config) Validate() error { return c.validate() }

// validate fills in the defaults of zero fields and checks c.
func (c *Config) validate() error {
	if len(c.Intervals) == 0 {
		c.Intervals = []Interval{{Fixed: 10 * time.Millisecond}, {Fixed: 100 * time.Millisecond}, {Fixed: time.Second}}
	}
	if len(c.Modes) == 0 {
		c.Modes = slices.Clone(AllModes)
		if c.Topology != "" && c.Topology != "passthrough" {
			// baseline and bare only copy: of the default modes, only
			// eos runs another topology.
			c.Modes = []Mode{ModeEOS}
		}
		if c.Topology == topologyETL {
			c.Modes = []Mode{ModeEOS, ModeEOSAvro}
		}
	}
	for i, m := range c.Modes {
		if !slices.Contains(knownModes, m) || slices.Contains(c.Modes[:i], m) {
			return eos.BadConfig("bench.Config.Modes", "modes %v: each of baseline, bare, eos, eos-nopreagg, eos-avro, kstreams, kstreams-defaults, javaloop, javaloop-defaults at most once", c.Modes)
		}
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Workers, 1)
	def(&c.Repeat, 3)
	def(&c.LatencyRate, 10_000)
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.Topology == "" {
		c.Topology = "passthrough"
	}
	if c.Topology == topologyAggregate {
		// The input is aggcheck.Input's JSON orders, whose size is
		// theirs; the one cell of each interval has size 0.
		if slices.ContainsFunc(c.Sizes, func(s int) bool { return s != 0 }) {
			return eos.BadConfig("bench.Config.Sizes", "the aggregate topology's input is aggcheck.Input's JSON orders (about 50 bytes each), not records of a chosen size: leave the sizes empty, not %v", c.Sizes)
		}
		c.Sizes = []int{0}
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{100, 1024}
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = 2 * time.Minute
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	seen := map[Interval]bool{}
	for _, iv := range c.Intervals {
		if !iv.Auto && iv.Fixed <= 0 {
			return eos.BadConfig("bench.Config.Intervals", "commit interval %s must be positive", iv.Fixed)
		}
		if seen[iv] {
			return eos.BadConfig("bench.Config.Intervals", "commit interval %s is listed twice", iv)
		}
		seen[iv] = true
	}
	for _, s := range c.Sizes {
		if (s <= 0 && c.Topology != topologyAggregate) || s > maxRecordSize {
			return eos.BadConfig("bench.Config.Sizes", "record size %d must be between 1 and %d bytes", s, maxRecordSize)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(c.Sizes)))) != len(c.Sizes) {
		return eos.BadConfig("bench.Config.Sizes", "a record size is listed twice in %v", c.Sizes)
	}
	switch {
	case c.Records < 0:
		return eos.BadConfig("bench.Config.Records", "must be positive, got %d", c.Records)
	case c.Partitions < 0:
		return eos.BadConfig("bench.Config.Partitions", "must be positive, got %d", c.Partitions)
	case c.Workers < 0:
		return eos.BadConfig("bench.Config.Workers", "must be positive, got %d", c.Workers)
	case c.Repeat < 0:
		return eos.BadConfig("bench.Config.Repeat", "must be positive, got %d", c.Repeat)
	case c.RTT < 0:
		return eos.BadConfig("bench.Config.RTT", "must not be negative, got %s", c.RTT)
	case c.RTT > 0 && len(c.Brokers) > 0:
		return eos.BadConfig("bench.Config.RTT", "can only be injected into the embedded broker, not into a cluster named by bench.Config.Brokers")
	case c.LatencyRate < 0:
		return eos.BadConfig("bench.Config.LatencyRate", "must be positive, got %d", c.LatencyRate)
	case c.LatencyDuration < 0:
		return eos.BadConfig("bench.Config.LatencyDuration", "must not be negative, got %s", c.LatencyDuration)
	case c.RunTimeout < 0:
		return eos.BadConfig("bench.Config.RunTimeout", "must not be negative, got %s", c.RunTimeout)
	case c.StartTimeout < 0:
		return eos.BadConfig("bench.Config.StartTimeout", "must not be negative, got %s", c.StartTimeout)
	}
	if _, err := topologies.Lookup(workerTopology(c.Topology)); err != nil {
		return eos.BadConfig("bench.Config.Topology", "%w", err)
	}
	if c.Topology != "passthrough" && c.Topology != topologyAggregate && c.Topology != topologyDedup && c.Topology != topologyJoin && c.Topology != topologyETL {
		// Every run is judged before its figures count: a copy (and a
		// dedup of distinct keys) by verify.Run, an aggregate by
		// aggcheck.Judge, an etl or a join also field by field against
		// a reference. wordcount's output has no judge here, so a run
		// could not be told from a broken one.
		return eos.BadConfig("bench.Config.Topology", "the bench runs the passthrough, aggregate, dedup and etl topologies and the etl join (join), whose output it can judge exactly once; %s's output has no judge here", c.Topology)
	}
	if err := c.validateJoin(); err != nil {
		return err
	}
	if c.Topology == topologyDedup && c.KeyHeader == "" {
		c.KeyHeader = DedupKeyHeader
	}
	switch {
	case c.Topology == topologyDedup && c.KeyHeader != DedupKeyHeader:
		return eos.BadConfig("bench.Config.KeyHeader", "the dedup topology's workers are keyed by the header %s, got %q", DedupKeyHeader, c.KeyHeader)
	case c.Topology == topologyAggregate && c.KeyHeader != "":
		return eos.BadConfig("bench.Config.KeyHeader", "the aggregate topology's input is aggcheck.Input's, without a key header: leave it empty, not %q", c.KeyHeader)
	}
	if c.Topology == topologyDedup {
		for _, m := range c.Modes {
			if m != ModeEOS {
				return eos.BadConfig("bench.Config.Modes", "the dedup topology runs in the eos mode only (no copy loop keeps state, and there is no Kafka Streams peer for it): drop %s from the modes", m)
			}
		}
	}
	if c.Topology == topologyETL {
		for _, m := range c.Modes {
			if !m.RunsOn(topologyETL) {
				return eos.BadConfig("bench.Config.Modes", "the etl topology runs in the eos (JSON) and eos-avro (Avro) modes only: drop %s from the modes", m)
			}
		}
	}
	if slices.Contains(c.Modes, ModeEOSAvro) && c.Topology != topologyETL {
		return eos.BadConfig("bench.Config.Modes", "the eos-avro mode runs the etl topology on Avro; drop it from the modes of %s", c.Topology)
	}
	if c.Topology == topologyAggregate {
		if c.Records > aggcheck.MaxRecords {
			return eos.BadConfig("bench.Config.Records", "the aggregate input holds at most %d regular records (aggcheck.MaxRecords: more would span its grace period, and regular records could be late), got %d", aggcheck.MaxRecords, c.Records)
		}
		for _, m := range c.Modes {
			if !m.isEOS() && !m.kstreams() {
				// The copy loops keep no state: an aggregate needs
				// windows that survive a restart and a repartition step.
				return eos.BadConfig("bench.Config.Modes", "the aggregate topology runs in the eos and kstreams modes only; the %s mode is a stateless copy loop: drop it from the modes", m)
			}
		}
	}
	if slices.Contains(c.Modes, ModeEOSNoPreagg) && c.Topology != topologyAggregate {
		return eos.BadConfig("bench.Config.Modes", "the eos-nopreagg mode turns off the aggregate topology's pre-aggregation; %s has none: drop it from the modes", c.Topology)
	}
	if slices.Contains(c.Modes, ModeBare) && c.Topology != "passthrough" {
		return eos.BadConfig("bench.Config.Modes", "the bare mode only copies (passthrough); drop it from the modes to benchmark %s", c.Topology)
	}
	if err := c.validateJVM(); err != nil {
		return err
	}
	if slices.ContainsFunc(c.Intervals, func(i Interval) bool { return i.Auto }) && !slices.Contains(c.Modes, ModeEOS) {
		return eos.BadConfig("bench.Config.Modes", "an auto interval needs the eos mode, which chooses it")
	}
	if err := c.checkReportPaths(); err != nil {
		return err
	}
	// The auto settings are the pipeline's; let it judge them.
	probe := pipeline.Config{App: "bench", Instance: "0", Inputs: []string{"in"}, Output: "out",
		AutoInterval: true, OverheadBudget: c.OverheadBudget, MaxCommitInterval: c.MaxCommitInterval}
	if err := probe.Validate(); err != nil {
		// Name the bench's field, which has the pipeline's name.
		var ce *eos.ConfigError
		if errors.As(err, &ce) && strings.HasPrefix(ce.Setting, "pipeline.Config.") {
			return eos.BadConfig("bench.Config."+strings.TrimPrefix(ce.Setting, "pipeline.Config."), "%s", ce.Reason)
		}
		return eos.BadConfig("bench.Config", "%w", err)
	}
	if c.OverheadBudget == 0 {
		c.OverheadBudget = pipeline.DefaultOverheadBudget
	}
	if c.MaxCommitInterval == 0 {
		c.MaxCommitInterval = pipeline.DefaultMaxCommitInterval
	}
	return nil
}

// DefaultAggregateRecords is the number of regular records of the
// aggregate input when Config.Records is 0: seconds of draining for eos and
// tens of seconds for Kafka Streams on a 2-core machine, well within
// aggcheck.MaxRecords.
const DefaultAggregateRecords = 200_000

// records returns the backlog of a run with record size size: for the
// aggregate topology, its regular records (the input adds late records and
// poison pills; see bencher.records).
func (c *Config) records(size int) int64 {
	switch {
	case c.Records > 0:
		return c.Records
	case c.Topology == topologyAggregate:
		return DefaultAggregateRecords
	}
	return DefaultRecords(size)
}

// DefaultLatencyDuration is the shortest latency phase by default: at the
// default 10,000 records/s, 300,000 samples, enough for a p99.9 from 300
// samples above it, and long enough to hold many commits at 1s.
const DefaultLatencyDuration = 30 * time.Second

// latencyDuration returns how long the latency phase of a cell produces.
func (c *Config) latencyDuration(iv Interval) time.Duration {
	if c.LatencyDuration > 0 {
		return c.LatencyDuration
	}
	t := iv.Fixed
	if iv.Auto {
		t = time.Second // auto rarely settles above this at a millisecond RTT
	}
	return max(DefaultLatencyDuration, 3*t)
}
