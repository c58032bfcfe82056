package bench

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eosctl/eos/cmd/eosctl/internal/supervise"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/datagen"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The JVM modes run the peers of peers/kstreams (see its README.md) as one
// JVM per worker: kstreams and kstreams-defaults its Kafka Streams 4.4
// application with processing.guarantee=exactly_once_v2, javaloop and
// javaloop-defaults its hand-written transactional copy loop
// (eos.peers.JavaLoop), the matched modes with eos's client settings
// (jvmClientConfig), the -defaults ones with their clients' defaults. An installed eosctl has no
// source tree, so the peer's Maven project is embedded here and built on
// first use into the cache (see peerJar).
//
//go:embed peers/kstreams/pom.xml peers/kstreams/src
var kstreamsPeer embed.FS

// kstreamsPoll is how often the kstreams fleet reads its group's committed
// offsets from the broker: Kafka Streams has no commit callback, so the
// broker is where its progress shows.
const kstreamsPoll = 25 * time.Millisecond

// peerSourceHash returns a short hash of the embedded peer's files, paths
// and contents: the cache directory of one version of the peer.
func peerSourceHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(kstreamsPeer, "peers/kstreams", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := kstreamsPeer.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

// peerJar returns the path of the peer's runnable jar, building it with
// Maven on first use: the embedded sources are written to
// <cache>/kstreams-peer/<hash of the sources>/ (cache: $EOS_KAFKA_CACHE, or
// ~/.cache/eos, where Apache Kafka's jars for scripts/kafka go too) and
// `mvn -q -B package` runs there. Later calls, from any process, reuse it,
// and need java but not mvn.
func peerJar(ctx context.Context, logger interface{ Warn(string, ...any) }) (string, error) {
	const why = "the JVM modes (kstreams, javaloop) build and run a Java application: Java 17+ and Maven 3.8+"
	if err := kafkacluster.LookTools(why, "java"); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	root, err := kafkacluster.CacheRoot()
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	hash, err := peerSourceHash()
	if err != nil {
		return "", fmt.Errorf("bench: reading the embedded Kafka Streams peer: %w", err)
	}
	dir := filepath.Join(root, "kstreams-peer", hash)
	jar := filepath.Join(dir, "kstreams-peer.jar")
	err = kafkacluster.Once(dir, "built", func() error {
		if err := kafkacluster.LookTools(why, "mvn"); err != nil {
			return err // Maven only builds: a built jar needs java alone
		}
		logger.Warn("building the Kafka Streams peer with Maven (once; later runs reuse it)", "dir", dir)
		src := filepath.Join(dir, "src")
		_ = os.RemoveAll(src)
		_ = os.RemoveAll(filepath.Join(dir, "target"))
		err := fs.WalkDir(kstreamsPeer, "peers/kstreams", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			to := filepath.Join(dir, strings.TrimPrefix(path, "peers/kstreams"))
			if d.IsDir() {
				return os.MkdirAll(to, 0o755)
			}
			b, err := kstreamsPeer.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		})
		if err != nil {
			return fmt.Errorf("writing the peer's sources: %w", err)
		}
		if err := kafkacluster.Maven(ctx, "-f", filepath.Join(dir, "pom.xml"), "package"); err != nil {
			return fmt.Errorf("mvn could not build the Kafka Streams peer in %s: %w", dir, err)
		}
		if err := os.Rename(filepath.Join(dir, "target", "kstreams-peer.jar"), jar); err != nil {
			return err
		}
		return os.RemoveAll(filepath.Join(dir, "target")) // the unshaded jar and classes: 100 MB of nothing

	})
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return jar, nil
}

// kstreamsFleet is a run's JVMs (Kafka Streams or the Java loop). Its progress comes from the
// broker: every kstreamsPoll it reads the committed offsets of the run's
// group (the peer's application.id) on the inputs and turns every
// increase into a committed event for the run's log, with the records
// consumed since the last increase. Those events carry no commit duration
// (Kafka Streams does not say how long its commits take), so the commit
// timings and overhead of a kstreams run are 0 and the table shows "-".
type kstreamsFleet struct {
	children
	cpu0     time.Duration // the JVMs' CPU until each processed its first record or reached RUNNING
	cpuMu    sync.Mutex
	started  chan struct{} // closed when the first JVM reached RUNNING
	startedT time.Time
	once     sync.Once
	cancel   context.CancelFunc
	polled   chan struct{}
	stateDir string

	settingsMu sync.Mutex
	settings   *pipeline.ClientSettings // what the first JVM reported its clients run with
}

// peerLine is a line the peer prints on stdout; started carries the
// effective settings of the clients the peer built.
type peerLine struct {
	Kind     string            `json:"kind"`
	PID      int               `json:"pid"`
	Threads  int               `json:"threads"`
	Producer map[string]string `json:"producer"`
	Consumer map[string]string `json:"consumer"`
	Consumed int64             `json:"consumed"` // records the measured instance had consumed when it printed the line
}

// jvmArgs is the command line of JVM i of job: -Xmx, as many processors as
// threads, and the peer's main class with its flags.
func jvmArgs(cfg *Config, brokers []string, job copyJob, stateDir string, i int) []string {
	interval := max(job.interval.Fixed.Round(time.Millisecond), time.Millisecond)
	// Java 17 does not read $JAVA_TOOL_OPTIONS quietly; the flags go on
	// the command line. The peer logs at warn: its info lines are
	// Kafka Streams' configuration dumps.
	args := []string{"-Xmx" + cfg.JVMHeap, "-XX:ActiveProcessorCount=" + strconv.Itoa(job.threads), "-Djava.awt.headless=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", job.peerJar, job.mode.peerMain(),
		"--bootstrap", strings.Join(brokers, ","), "--app-id", job.app,
		"--input", strings.Join(job.inputs, ","), "--output", job.output, "--topology", cfg.Topology,
		"--commit-interval-ms", strconv.FormatInt(interval.Milliseconds(), 10),
		"--threads", strconv.Itoa(job.threads), "--state-dir", filepath.Join(stateDir, strconv.Itoa(i))}
	if job.mode.matched() {
		args = append(args, "--client-config", jvmClientConfig(job.settings))
	}
	if job.warmup != "" {
		args = append(args, "--warmup-input", job.warmup)
	}
	if cfg.Topology == topologyAggregate {
		args = append(args, "--dlq", job.dlq, "--store", cfg.KStreamsStore,
			"--window-ms", strconv.FormatInt(aggregateWindow.Milliseconds(), 10),
			"--grace-ms", strconv.FormatInt(aggregateGrace.Milliseconds(), 10))
	}
	return args
}

func startKStreams(ctx context.Context, cfg *Config, brokers []string, job copyJob, onEvent func(pipeline.Event)) (copiers, error) {
	stateDir, err := os.MkdirTemp("", "eosbench-kstreams-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	f := &kstreamsFleet{started: make(chan struct{}), polled: make(chan struct{}), stateDir: stateDir}
	for i := range job.workers {
		args := jvmArgs(cfg, brokers, job, stateDir, i)
		// CPU is counted from the first record the measured instance
		// processes or from RUNNING, whichever comes first: the JVM's
		// start (class loading, the warm-up, the topology's build, the
		// group join) is not the drain, but a Kafka Streams thread given
		// its tasks processes while the client is still REBALANCING (one
		// run did 16% of its backlog so). The peer runs as java itself,
		// so its pid is the child's. Lines come in order on one goroutine.
		counted := false
		from := func(pid int) {
			if counted {
				return
			}
			counted = true
			f.cpuMu.Lock()
			f.cpu0 += supervise.ProcessCPU(pid)
			f.cpuMu.Unlock()
		}
		parse := func(line []byte) {
			var l peerLine
			if json.Unmarshal(line, &l) != nil {
				return
			}
			if l.Kind == "processing" {
				from(l.PID)
				return
			}
			if l.Kind != "started" {
				return
			}
			if l.Threads != job.threads {
				onEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventStopped,
					Err: fmt.Sprintf("%s worker %d runs %d threads, not the %d it was given", job.mode, i, l.Threads, job.threads)})
			}
			// The Java loop consumes nothing until every loop has joined
			// and prints no processing line: work before this line would
			// escape its CPU figure.
			if l.Consumed > 0 && !job.mode.kstreams() {
				onEvent(pipeline.Event{Time: time.Now(), Kind: pipeline.EventStopped,
					Err: fmt.Sprintf("%s worker %d had consumed %d records before it reported started; its CPU figure would leave them out", job.mode, i, l.Consumed)})
			}
			f.settingsMu.Lock()
			if f.settings == nil && l.Producer != nil {
				s := peerSettings(l.Producer, l.Consumer)
				f.settings = &s
			}
			f.settingsMu.Unlock()
			from(l.PID)
			f.once.Do(func() { f.startedT = time.Now(); close(f.started) })
		}
		pc := supervise.Config{Name: fmt.Sprintf("%s worker %d", job.mode, i), Bin: "java", Args: args, OnLine: parse}
		if err := f.start(ctx, pc, onEvent); err != nil {
			f.children.stop()
			_ = os.RemoveAll(stateDir)
			return nil, err
		}
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		f.children.stop()
		_ = os.RemoveAll(stateDir)
		return nil, fmt.Errorf("bench: kstreams progress client: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	go func() {
		defer close(f.polled)
		defer cl.Close()
		f.poll(pctx, kadm.NewClient(cl), job.app, job.inputs, onEvent, cfg.Logger)
	}()
	return f, nil
}

// poll turns increases of group's committed offsets on topics (the backlog
// and the live topic, which start at offset 0 and hold no transaction
// markers, so that offsets count records) into committed events until ctx
// ends. The first event's transaction begins when the
// first JVM reached RUNNING.
func (f *kstreamsFleet) poll(ctx context.Context, adm *kadm.Client, group string, topics []string, onEvent func(pipeline.Event), logger interface{ Warn(string, ...any) }) {
	select {
	case <-f.started:
	case <-ctx.Done():
		return
	}
	last, prev := f.startedT, int64(0)
	tick := time.NewTicker(kstreamsPoll)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			if ctx.Err() == nil && !warned && !errors.Is(err, context.Canceled) {
				logger.Warn("reading the kstreams group's committed offsets failed; retrying", "group", group, "err", err)
				warned = true
			}
			continue
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) {
			if slices.Contains(topics, o.Topic) && o.At > 0 {
				sum += o.At
			}
		})
		if sum <= prev {
			continue
		}
		now := time.Now()
		onEvent(pipeline.Event{Time: now, Kind: pipeline.EventCommitted, App: group,
			Consumed: int(sum - prev), Duration: now.Sub(last)})
		last, prev = now, sum
	}
}

// reported returns the client settings the first JVM reported, nil if none
// did.
func (f *kstreamsFleet) reported() *pipeline.ClientSettings {
	f.settingsMu.Lock()
	defer f.settingsMu.Unlock()
	return f.settings
}

// cpu is the JVMs' CPU since each processed its first record or reached
// RUNNING, whichever came first.
func (f *kstreamsFleet) cpu() time.Duration {
	f.cpuMu.Lock()
	defer f.cpuMu.Unlock()
	return f.children.cpu() - f.cpu0
}

func (f *kstreamsFleet) stop() (int64, error) {
	f.cancel()
	<-f.polled
	peak, err := f.children.stop()
	_ = os.RemoveAll(f.stateDir)
	return peak, err
}

// produceWarmups writes the JVM peers' warm-up inputs once, each drained by
// every JVM run in its own JVM before the measured backlog (see
// Config.WarmupRecords): per size, WarmupRecords records of that size; for
// the aggregate, a aggcheck.Input of WarmupRecords regular orders of
// another seed (its windows never close, as no heartbeats follow: the
// warm-up runs the parse, repartition and aggregate path, not the emission
// of results).
func (b *bencher) produceWarmups(ctx context.Context) error {
	b.warmups = map[int]string{}
	w := b.cfg.WarmupRecords
	if w <= 0 || !slices.ContainsFunc(b.cfg.Modes, Mode.jvm) {
		return nil
	}
	if b.cfg.Topology == topologyAggregate {
		topic := b.prefix + "-warmup-aggregate"
		b.topics = append(b.topics, topic)
		if err := b.createTopic(ctx, topic, false); err != nil {
			return err
		}
		if err := aggcheck.NewInput(topic, int(w), aggregateSeed+1).Produce(ctx, b.adm, 0); err != nil {
			return fmt.Errorf("bench: producing the JVM peers' warm-up input: %w", err)
		}
		b.warmups[0] = topic
		return nil
	}
	for _, size := range b.cfg.Sizes {
		topic := fmt.Sprintf("%s-warmup-%d", b.prefix, size)
		b.topics = append(b.topics, topic)
		if _, err := datagen.Produce(ctx, b.adm, datagen.Config{Topic: topic, Count: w, Size: size, Partitions: b.cfg.Partitions}); err != nil {
			return fmt.Errorf("bench: producing the JVM peers' %d-byte warm-up input: %w", size, err)
		}
		b.warmups[size] = topic
	}
	return nil
}
