package eos.peers;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Kafka Streams peer of eos (issue #14): the same topologies as eos's passthrough and aggregate,
 * written idiomatically with the Kafka Streams DSL and run with exactly_once_v2, so that the two
 * can be measured on the same cluster and judged by the same verifiers. See README.md.
 *
 * <p>stdout carries JSON lines: {"kind":"warmed",...} after the warm-up (with --warmup-input),
 * {"kind":"processing","pid":N} when the measured instance processes its first record,
 * {"kind":"started",...} once Kafka Streams first reaches RUNNING, and {"kind":"stopped",...} after a
 * clean close; everything else goes to stderr. A stream thread given its tasks runs them while the client
 * is still REBALANCING, so "processing" may come well before "started": eosctl bench counts the JVM's CPU
 * from whichever comes first.
 */
public final class KStreamsPeer {
    static final String KAFKA_STREAMS_VERSION = "4.4.0";
    private static final Logger log = LoggerFactory.getLogger(KStreamsPeer.class);

    /** Counts for the stopped line. They count records as processed, aborted attempts included. */
    static final AtomicLong consumed = new AtomicLong();
    static final AtomicLong produced = new AtomicLong();
    static final AtomicLong deadLettered = new AtomicLong();

    /** Where the measured instance's first record is announced; null while the warm-up runs. */
    static volatile PrintStream measuring;

    /**
     * Counts a record a processor consumed and, for the measured instance's first, prints the processing
     * line (on the stream thread, once).
     */
    static void consumedOne() {
        if (consumed.incrementAndGet() == 1) {
            PrintStream o = measuring;
            if (o != null) {
                o.println("{\"kind\":\"processing\",\"pid\":" + ProcessHandle.current().pid() + "}");
            }
        }
    }

    static final String USAGE = String.join("\n",
        "Usage: java -jar kstreams-peer.jar --bootstrap HOST:PORT --app-id APP --input TOPIC --output TOPIC",
        "                                   --topology passthrough|aggregate [flags]",
        "",
        "Runs a Kafka Streams " + KAFKA_STREAMS_VERSION + " application with processing.guarantee=exactly_once_v2",
        "until SIGTERM or SIGINT, then closes it cleanly (committing) and exits 0.",
        "",
        "Flags:",
        "  --bootstrap HOST:PORT[,...]   brokers (required)",
        "  --app-id APP                  application.id: consumer group, transactional id prefix,",
        "                                internal topic prefix (required)",
        "  --input TOPIC[,TOPIC...]      input topics; must exist, with the same partition count (required)",
        "  --output TOPIC                output topic; created with the input's partition count if missing (required)",
        "  --topology NAME               passthrough (copy every record, same partition) or aggregate (required)",
        "  --dlq TOPIC                   dead-letter topic, aggregate only (required there); created like --output",
        "  --commit-interval-ms N        commit.interval.ms (default 100)",
        "  --threads N                   num.stream.threads (default 1)",
        "  --state-dir DIR               state.dir (default /tmp/kafka-streams)",
        "  --window-ms N                 aggregate: tumbling window size (default 5000, as aggcheck.Config)",
        "  --grace-ms N                  aggregate: grace period (default 600000, as aggcheck.Config)",
        "  --store rocksdb|memory        aggregate: RocksDB stores with suppress(untilWindowCloses) (default), or",
        "                                in-memory stores with emitStrategy(onWindowClose)",
        "  --client-config K=V[,K=V...]  client settings, each key prefixed producer. or consumer.",
        "                                (e.g. producer.linger.ms=10); unset keys keep Kafka Streams' defaults",
        "  --warmup-input TOPIC          first drain TOPIC in this JVM (app id APP-warmup, output OUTPUT-warmup)",
        "                                until its group has committed all of it, then close that instance and",
        "                                start the measured one: the JIT is warm when \"started\" is printed",
        "  --help                        this text",
        "");

    /** Bad flags: one line on stderr, exit 2. */
    static final class UsageException extends Exception {
        UsageException(String msg) {
            super(msg);
        }
    }

    static final class Flags {
        String bootstrap, appId, input, output, topology, dlq, warmupInput;
        String store = "rocksdb";
        Map<String, String> clientConfig = new HashMap<>();
        String stateDir = "/tmp/kafka-streams";
        long commitIntervalMs = 100;
        int threads = 1;
        long windowMs = 5000;
        long graceMs = 600_000;
        boolean help;

        /**
         * The flags of the warm-up instance: the warm-up input alone, and the app id, output, dead-letter
         * topic and state directory suffixed -warmup, so that nothing of it is shared with the measured one.
         */
        Flags warmup() {
            Flags w = new Flags();
            w.bootstrap = bootstrap;
            w.appId = appId + "-warmup";
            w.input = warmupInput;
            w.output = output + "-warmup";
            w.topology = topology;
            w.dlq = dlq == null ? null : dlq + "-warmup";
            w.store = store;
            w.clientConfig = clientConfig;
            w.stateDir = stateDir + "-warmup";
            w.commitIntervalMs = commitIntervalMs;
            w.threads = threads;
            w.windowMs = windowMs;
            w.graceMs = graceMs;
            return w;
        }

        /** The input topics: --input split at commas (eosctl bench gives the backlog and a live topic). */
        List<String> inputs() {
            List<String> out = new ArrayList<>();
            for (String t : input.split(",")) {
                if (!t.isBlank()) {
                    out.add(t.trim());
                }
            }
            return out;
        }

        static Flags parse(String[] args) throws UsageException {
            Flags f = new Flags();
            Map<String, String> seen = new HashMap<>();
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                if (a.equals("--help") || a.equals("-h")) {
                    f.help = true;
                    continue;
                }
                if (!a.startsWith("--")) {
                    throw new UsageException("unexpected argument " + quote(a) + ": every setting is a flag, e.g. --input TOPIC");
                }
                String name = a.substring(2), value;
                int eq = name.indexOf('=');
                if (eq >= 0) {
                    value = name.substring(eq + 1);
                    name = name.substring(0, eq);
                } else {
                    if (i + 1 >= args.length) {
                        throw new UsageException("flag --" + name + " needs a value");
                    }
                    value = args[++i];
                }
                if (seen.put(name, value) != null) {
                    throw new UsageException("flag --" + name + " given twice");
                }
                switch (name) {
                    case "bootstrap" -> f.bootstrap = nonEmpty(name, value);
                    case "app-id" -> f.appId = nonEmpty(name, value);
                    case "input" -> f.input = nonEmpty(name, value);
                    case "output" -> f.output = nonEmpty(name, value);
                    case "topology" -> f.topology = value;
                    case "dlq" -> f.dlq = nonEmpty(name, value);
                    case "state-dir" -> f.stateDir = nonEmpty(name, value);
                    case "commit-interval-ms" -> f.commitIntervalMs = number(name, value, 0, Long.MAX_VALUE);
                    case "threads" -> f.threads = (int) number(name, value, 1, 64);
                    case "window-ms" -> f.windowMs = number(name, value, 1, Long.MAX_VALUE / 4);
                    case "grace-ms" -> f.graceMs = number(name, value, 0, Long.MAX_VALUE / 4);
                    case "store" -> {
                        if (!value.equals("rocksdb") && !value.equals("memory")) {
                            throw new UsageException("--store: want rocksdb or memory, got " + quote(value));
                        }
                        f.store = value;
                    }
                    case "client-config" -> f.clientConfig = Clients.parse(value);
                    case "warmup-input" -> f.warmupInput = nonEmpty(name, value);
                    default -> throw new UsageException("unknown flag --" + name + " (see --help)");
                }
            }
            if (f.help) {
                return f;
            }
            for (String[] req : new String[][] {{"bootstrap", f.bootstrap}, {"app-id", f.appId}, {"input", f.input},
                {"output", f.output}, {"topology", f.topology}}) {
                if (req[1] == null) {
                    throw new UsageException("missing --" + req[0] + " (see --help)");
                }
            }
            switch (f.topology) {
                case "passthrough" -> {
                    if (f.dlq != null) {
                        throw new UsageException("--dlq is for --topology aggregate only: passthrough rejects no record");
                    }
                    if (seen.containsKey("window-ms") || seen.containsKey("grace-ms") || seen.containsKey("store")) {
                        throw new UsageException("--window-ms, --grace-ms and --store are for --topology aggregate only");
                    }
                }
                case "aggregate" -> {
                    if (f.dlq == null) {
                        throw new UsageException("--topology aggregate needs --dlq TOPIC for late records and malformed JSON");
                    }
                }
                default -> throw new UsageException("--topology: want passthrough or aggregate, got " + quote(f.topology));
            }
            Set<String> topics = new java.util.HashSet<>();
            if (f.inputs().isEmpty()) {
                throw new UsageException("--input names no topic");
            }
            List<String> named = new ArrayList<>(f.inputs());
            named.add(f.output);
            if (f.dlq != null) {
                named.add(f.dlq);
            }
            if (f.warmupInput != null) {
                named.add(f.warmupInput);
            }
            for (String t : named) {
                if (!topics.add(t)) {
                    throw new UsageException("topic " + quote(t) + " is named twice among --input, --output and --dlq");
                }
            }
            return f;
        }

        private static String nonEmpty(String name, String v) throws UsageException {
            if (v.isBlank()) {
                throw new UsageException("--" + name + " is empty");
            }
            return v;
        }

        private static long number(String name, String v, long lo, long hi) throws UsageException {
            long n;
            try {
                n = Long.parseLong(v);
            } catch (NumberFormatException e) {
                throw new UsageException("--" + name + ": want a whole number, got " + quote(v));
            }
            if (n < lo || n > hi) {
                throw new UsageException("--" + name + ": want " + lo + ".." + hi + ", got " + n);
            }
            return n;
        }
    }

    static String quote(String s) {
        return Json.string(s);
    }

    public static void main(String[] args) {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        Flags f;
        try {
            f = Flags.parse(args);
        } catch (UsageException e) {
            System.err.println("kstreams-peer: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (f.help) {
            out.print(USAGE);
            System.exit(0);
        }
        System.exit(run(f, out));
    }

    static int run(Flags f, PrintStream out) {
        for (String sig : new String[] {"TERM", "INT"}) {
            // SIGTERM and SIGINT stop the application through the main thread, which closes Streams and
            // exits 0, rather than through a shutdown hook, which could only exit 143.
            sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> {
                log.info("SIG{}: closing", sig);
                stop.countDown();
            });
        }
        if (f.warmupInput != null) {
            long t0 = System.nanoTime();
            Flags w = f.warmup();
            Instance warm;
            try {
                warm = Instance.start(w);
            } catch (Exception e) {
                System.err.println("kstreams-peer: warm-up: " + e.getMessage());
                return 1;
            }
            long records;
            try {
                records = Clients.awaitCommitted(w.bootstrap, w.appId, w.inputs(), () -> warm.failure.get() != null
                    ? String.valueOf(warm.failure.get()) : stop.getCount() == 0 ? "stopped by a signal" : null);
            } catch (Exception e) {
                warm.close();
                System.err.println("kstreams-peer: warm-up: " + e);
                return 1;
            }
            if (warm.close() != 0) {
                return 1;
            }
            out.println("{\"kind\":\"warmed\",\"records\":" + records + ",\"seconds\":" + (System.nanoTime() - t0) / 1e9 + "}");
            consumed.set(0);
            produced.set(0);
            deadLettered.set(0);
        }
        Instance measured;
        measuring = out;
        try {
            measured = Instance.start(f);
        } catch (Exception e) {
            System.err.println("kstreams-peer: " + e.getMessage());
            return 1;
        }
        try {
            measured.awaitRunning(out);
        } catch (RuntimeException e) {
            System.err.println("kstreams-peer: reporting the started line: " + e);
            measured.close();
            return 1;
        }
        try {
            stop.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (measured.close() != 0) {
            return 1;
        }
        out.println("{\"kind\":\"stopped\",\"consumed\":" + consumed.get() + ",\"produced\":" + produced.get()
            + (f.dlq != null ? ",\"dead_letters\":" + deadLettered.get() : "") + "}");
        return 0;
    }

    /** Counted down by SIGTERM or SIGINT, or when an instance fails. */
    static final CountDownLatch stop = new CountDownLatch(1);

    /** One KafkaStreams instance of the peer: the warm-up's or the measured one. */
    static final class Instance {
        final Flags f;
        final int partitions;
        final KafkaStreams streams;
        final Clients.Capture clients = new Clients.Capture();
        final CountDownLatch running = new CountDownLatch(1);
        final AtomicReference<Throwable> failure = new AtomicReference<>();

        private Instance(Flags f, int partitions) {
            this.f = f;
            this.partitions = partitions;
            Topology topology = switch (f.topology) {
                case "passthrough" -> Passthrough.build(f);
                default -> Aggregate.build(f);
            };
            log.info("topology:\n{}", topology.describe());
            streams = new KafkaStreams(topology, props(f), clients);
        }

        static Instance start(Flags f) throws Exception {
            Instance in = new Instance(f, prepareTopics(f));
            in.streams.setUncaughtExceptionHandler(e -> {
                log.error("stream thread failed; shutting down", e);
                in.failure.compareAndSet(null, e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            in.streams.setStateListener((now, before) -> {
                log.info("{}: state {} -> {}", f.appId, before, now);
                if (now == KafkaStreams.State.RUNNING) {
                    in.running.countDown();
                }
                if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
                    in.failure.compareAndSet(null, new IllegalStateException("Kafka Streams went to state " + now));
                    in.running.countDown();
                    stop.countDown();
                }
            });
            in.streams.start();
            return in;
        }

        /**
         * Prints the started line once Kafka Streams first reaches RUNNING, with the effective settings of
         * the producer and main consumer it built.
         */
        void awaitRunning(PrintStream out) {
            while (true) {
                try {
                    if (running.await(100, TimeUnit.MILLISECONDS) || stop.getCount() == 0) {
                        break;
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
            if (failure.get() != null || clients.producer == null || clients.consumer == null) {
                return;
            }
            out.println("{\"kind\":\"started\",\"topology\":" + quote(f.topology) + ",\"app_id\":" + quote(f.appId)
                + ",\"input\":" + quote(f.input) + ",\"output\":" + quote(f.output)
                + (f.dlq != null ? ",\"dlq\":" + quote(f.dlq) + ",\"store\":" + quote(f.store) : "")
                + ",\"partitions\":" + partitions + ",\"threads\":" + f.threads
                + ",\"commit_interval_ms\":" + f.commitIntervalMs + ",\"kafka_streams\":\"" + KAFKA_STREAMS_VERSION
                + "\",\"producer\":" + Clients.effective(clients.producer, true)
                + ",\"consumer\":" + Clients.effective(clients.consumer, false)
                + ",\"consumed\":" + consumed.get() + ",\"pid\":" + ProcessHandle.current().pid() + "}");
        }

        /** Closes the instance, leaving the group; 0 if it closed cleanly without a failure. */
        int close() {
            // Leave the group, so a restart with the same --app-id need not wait out the session timeout.
            boolean closed = streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                .withTimeout(Duration.ofSeconds(60)));
            Throwable t = failure.get();
            if (t != null) {
                System.err.println("kstreams-peer: " + f.appId + " failed: " + t);
                return 1;
            }
            if (!closed) {
                System.err.println("kstreams-peer: Kafka Streams did not close within 60s");
                return 1;
            }
            return 0;
        }
    }

    /** The Streams configuration of f: exactly_once_v2, then --client-config over Streams' defaults. */
    static Properties props(Flags f) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, f.appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, f.bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, f.commitIntervalMs);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, f.threads);
        p.put(StreamsConfig.STATE_DIR_CONFIG, f.stateDir);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.ACKS_CONFIG), "all");
        if (f.store.equals("memory")) {
            // emitStrategy(onWindowClose) emits closed windows at most once a second of wall-clock time, and
            // only while processing a record: the windows closed by the last records (the bench's heartbeats)
            // would wait for a record that never comes. Kafka Streams' private setting: emit at every record.
            p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
        }
        p.putAll(f.clientConfig);
        return p;
    }

    /**
     * Checks that the inputs exist with one partition count and creates the output (and dead-letter)
     * topics with it if they are missing. Returns the inputs' partition count.
     */
    static int prepareTopics(Flags f) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, f.bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30_000);
        try (Admin admin = Admin.create(p)) {
            int n = -1;
            for (String t : f.inputs()) {
                TopicDescription in;
                try {
                    in = admin.describeTopics(List.of(t)).allTopicNames().get(30, TimeUnit.SECONDS).get(t);
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof UnknownTopicOrPartitionException) {
                        throw new Exception("input topic " + quote(t) + " does not exist");
                    }
                    throw new Exception("describing input topic " + quote(t) + ": " + e.getCause());
                }
                int tn = in.partitions().size();
                if (n >= 0 && tn != n) {
                    throw new Exception("input topic " + quote(t) + " has " + tn + " partitions, the first input " + n
                        + ": every input must have as many");
                }
                n = tn;
            }
            List<NewTopic> create = new ArrayList<>();
            for (String t : f.dlq == null ? List.of(f.output) : List.of(f.output, f.dlq)) {
                create.add(new NewTopic(t, Optional.of(n), Optional.empty()));
            }
            for (var e : admin.createTopics(create).values().entrySet()) {
                try {
                    e.getValue().get(30, TimeUnit.SECONDS);
                    log.info("created topic {} with {} partitions", e.getKey(), n);
                } catch (ExecutionException x) {
                    if (!(x.getCause() instanceof TopicExistsException)) {
                        throw new Exception("creating topic " + quote(e.getKey()) + ": " + x.getCause());
                    }
                }
            }
            if (f.topology.equals("passthrough")) {
                int outN = admin.describeTopics(List.of(f.output)).allTopicNames().get(30, TimeUnit.SECONDS)
                    .get(f.output).partitions().size();
                if (outN != n) {
                    throw new Exception("output topic " + quote(f.output) + " has " + outN + " partitions, the input "
                        + n + ": passthrough keeps each record's partition, so they must match");
                }
            }
            return n;
        }
    }
}
