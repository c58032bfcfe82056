package bench

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/pipeline"
)

// The JVM peers' modes. The plain ones run with eos's client settings
// (matched cells, the default comparison); the -defaults ones with their
// client's own defaults, labelled so, to show what the settings alone are
// worth.
const (
	ModeKStreamsDefaults Mode = "kstreams-defaults" // Kafka Streams with its clients' defaults
	ModeJavaLoop         Mode = "javaloop"          // a hand-written Java transactional copy loop, matched settings
	ModeJavaLoopDefaults Mode = "javaloop-defaults" // the same loop with the Java clients' defaults
)

// jvm reports whether m runs as a JVM peer (peers/kstreams' jar).
func (m Mode) jvm() bool {
	return m == ModeKStreams || m == ModeKStreamsDefaults || m == ModeJavaLoop || m == ModeJavaLoopDefaults
}

// matched reports whether a JVM mode runs with eos's client settings.
func (m Mode) matched() bool { return m == ModeKStreams || m == ModeJavaLoop }

// kstreams reports whether m runs Kafka Streams (rather than the Java loop).
func (m Mode) kstreams() bool { return m == ModeKStreams || m == ModeKStreamsDefaults }

// peerMain is the main class of the peer jar that runs m.
func (m Mode) peerMain() string {
	if m.kstreams() {
		return "eos.peers.KStreamsPeer"
	}
	return "eos.peers.JavaLoop"
}

// DefaultWarmupRecords is the warm-up backlog a JVM peer drains in the
// same JVM before its measured backlog when Config.WarmupRecords is 0:
// about ten seconds of a cold JVM's throughput on a 2-core machine, after
// which the copy loop's code is compiled by C2.
func DefaultWarmupRecords(topology string) int64 {
	if topology == topologyAggregate {
		return 100_000
	}
	return 500_000
}

// DefaultJVMHeap is each JVM peer's -Xmx when Config.JVMHeap is empty: the
// smallest of 128m and 256m with which every JVM mode completed small runs
// of both topologies and both stores (see peers/kstreams/README.md,
// "Heap"), so that Kafka Streams' memory is measured at the least it needs.
const DefaultJVMHeap = "128m"

// ParseThreads parses a comma-separated list of thread counts such as
// "1,2": each cell of the sweep runs at each.
func ParseThreads(s string) ([]int, error) {
	return parseList(s, "bench.Config.Threads", "thread counts", func(f string, out []int) (int, error) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("thread count %q: want a positive whole number", f)
		}
		if slices.Contains(out, n) {
			return 0, fmt.Errorf("thread count %d is listed twice", n)
		}
		return n, nil
	})
}

// validateJVM fills in and checks the fields of the JVM peers and the
// thread counts.
func (c *Config) validateJVM() error {
	if len(c.Threads) == 0 {
		c.Threads = []int{runtime.GOMAXPROCS(0)}
	}
	for i, n := range c.Threads {
		if n <= 0 || slices.Contains(c.Threads[:i], n) {
			return eos.BadConfig("bench.Config.Threads", "thread counts %v: each positive, each once", c.Threads)
		}
		if c.InProcess && n != runtime.GOMAXPROCS(0) {
			// Goroutines share this process's GOMAXPROCS with the broker
			// and the bench's clients.
			return eos.BadConfig("bench.Config.Threads", "with bench.Config.InProcess the copiers run at this process's GOMAXPROCS (%d), not %d: run them as child processes", runtime.GOMAXPROCS(0), n)
		}
	}
	if c.WarmupRecords == 0 {
		c.WarmupRecords = DefaultWarmupRecords(c.Topology)
	}
	if c.WarmupRecords < -1 {
		return eos.BadConfig("bench.Config.WarmupRecords", "want a number of records, 0 for the default or -1 for none, got %d", c.WarmupRecords)
	}
	if c.Topology == topologyAggregate && c.WarmupRecords > aggcheck.MaxRecords {
		return eos.BadConfig("bench.Config.WarmupRecords", "the aggregate's warm-up input holds at most %d regular records, got %d", aggcheck.MaxRecords, c.WarmupRecords)
	}
	if c.JVMHeap == "" {
		c.JVMHeap = DefaultJVMHeap
	}
	if !validHeap(c.JVMHeap) {
		return eos.BadConfig("bench.Config.JVMHeap", "%q: want a java -Xmx size such as 128m, 256m or 1g", c.JVMHeap)
	}
	switch c.KStreamsStore {
	case "":
		c.KStreamsStore = "rocksdb"
	case "rocksdb", "memory":
	default:
		return eos.BadConfig("bench.Config.KStreamsStore", "%q: want rocksdb or memory", c.KStreamsStore)
	}
	for _, m := range c.Modes {
		if !m.jvm() {
			continue
		}
		switch {
		case len(c.Brokers) == 0:
			return eos.BadConfig("bench.Config.Modes", "the %s mode runs a JVM peer against real Apache Kafka: it needs brokers (bench.Config.Brokers), not the embedded broker", m)
		case c.InProcess:
			return eos.BadConfig("bench.Config.Modes", "the %s mode runs a JVM child process; with bench.Config.InProcess the other modes' CPU and RSS would be the whole process's, not comparable: drop one of them", m)
		case !m.kstreams() && c.Topology != "passthrough":
			return eos.BadConfig("bench.Config.Modes", "the %s mode is a stateless copy loop: passthrough only; drop it from the modes to benchmark %s", m, c.Topology)
		}
	}
	return nil
}

// validHeap reports whether s is a java -Xmx size: digits and one of k, m, g.
func validHeap(s string) bool {
	if len(s) < 2 || !strings.ContainsRune("kKmMgG", rune(s[len(s)-1])) {
		return false
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	return err == nil && n > 0
}

// jvmClientConfig is the --client-config of a JVM peer that runs with s:
// Kafka Streams' producer. and consumer. prefixes, which the Java loop
// reads too. Every value comes from s, eos's effective settings.
func jvmClientConfig(s pipeline.ClientSettings) string {
	idem := strconv.FormatBool(s.Idempotent)
	kv := []string{
		"producer.compression.type=" + s.Compression,
		"producer.batch.size=" + strconv.Itoa(int(s.BatchMaxBytes)),
		"producer.linger.ms=" + strconv.FormatFloat(s.LingerMs, 'f', -1, 64),
		"producer.acks=" + map[string]string{"all": "all", "leader": "1", "none": "0"}[s.Acks],
		"producer.max.in.flight.requests.per.connection=" + strconv.Itoa(s.MaxInFlight),
		"producer.enable.idempotence=" + idem,
		"consumer.max.partition.fetch.bytes=" + strconv.Itoa(int(s.FetchMaxPartitionBytes)),
		"consumer.fetch.max.bytes=" + strconv.Itoa(int(s.FetchMaxBytes)),
		"consumer.fetch.min.bytes=" + strconv.Itoa(int(s.FetchMinBytes)),
		"consumer.fetch.max.wait.ms=" + strconv.FormatFloat(s.FetchMaxWaitMs, 'f', 0, 64),
	}
	return strings.Join(kv, ",")
}

// peerSettings turns the effective producer and consumer settings a JVM
// peer reported in its started line into a ClientSettings.
func peerSettings(producer, consumer map[string]string) pipeline.ClientSettings {
	num := func(m map[string]string, k string) float64 {
		f, _ := strconv.ParseFloat(m[k], 64)
		return f
	}
	acks := producer["acks"]
	switch acks {
	case "-1":
		acks = "all"
	case "1":
		acks = "leader"
	case "0":
		acks = "none"
	}
	return pipeline.ClientSettings{
		Compression: producer["compression.type"], BatchMaxBytes: int32(num(producer, "batch.size")),
		LingerMs: num(producer, "linger.ms"), Acks: acks,
		MaxInFlight: int(num(producer, "max.in.flight.requests.per.connection")), Idempotent: producer["enable.idempotence"] == "true",
		FetchMaxPartitionBytes: int32(num(consumer, "max.partition.fetch.bytes")), FetchMaxBytes: int32(num(consumer, "fetch.max.bytes")),
		FetchMinBytes: int32(num(consumer, "fetch.min.bytes")), FetchMaxWaitMs: num(consumer, "fetch.max.wait.ms"),
	}
}

// clientSettings returns what each mode's clients run with: for the Go
// modes, what their options resolve to (eos and the baseline: the worker's
// settings; bare: kgo's defaults, which it keeps deliberately); for the
// JVM modes, what the peer reported its clients were built with in its
// first run (absent if none ran).
func (b *bencher) clientSettings() map[Mode]pipeline.ClientSettings {
	out := map[Mode]pipeline.ClientSettings{}
	for _, m := range b.cfg.Modes {
		var (
			s   pipeline.ClientSettings
			err error
		)
		switch m {
		case ModeEOS, ModeBaseline:
			s, err = pipeline.WorkerClientSettings(b.cfg.ClientOpts...)
		case ModeBare:
			s, err = pipeline.ClientSettingsOf(b.cfg.ClientOpts...)
		default:
			i := slices.IndexFunc(b.runs, func(r RunResult) bool { return r.Mode == m && r.Settings != nil })
			if i < 0 {
				continue
			}
			s = *b.runs[i].Settings
		}
		if err == nil {
			out[m] = s
		}
	}
	return out
}

// settingsLines describes the modes' client settings, one line per
// distinct set, naming the modes that share it.
func settingsLines(p Params) []string {
	var order []pipeline.ClientSettings
	names := map[pipeline.ClientSettings][]string{}
	for _, m := range p.Modes {
		s, ok := p.ClientSettings[m]
		if !ok {
			continue
		}
		if _, seen := names[s]; !seen {
			order = append(order, s)
		}
		names[s] = append(names[s], string(m))
	}
	var out []string
	for _, s := range order {
		out = append(out, fmt.Sprintf("client settings of %s: %s", strings.Join(names[s], ", "), s))
	}
	return out
}
