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
 * <p>stdout carries exactly two JSON lines, {"kind":"started",...} once Kafka Streams first reaches
 * RUNNING and {"kind":"stopped",...} after a clean close; everything else goes to stderr.
 */
public final class KStreamsPeer {
    static final String KAFKA_STREAMS_VERSION = "4.4.0";
    private static final Logger log = LoggerFactory.getLogger(KStreamsPeer.class);

    /** Counts for the stopped line. They count records as processed, aborted attempts included. */
    static final AtomicLong consumed = new AtomicLong();
    static final AtomicLong produced = new AtomicLong();
    static final AtomicLong deadLettered = new AtomicLong();

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
        "  --window-ms N                 aggregate: tumbling window size (default 5000, as verify.AggregateConfig)",
        "  --grace-ms N                  aggregate: grace period (default 600000, as verify.AggregateConfig)",
        "  --help                        this text",
        "");

    /** Bad flags: one line on stderr, exit 2. */
    static final class UsageException extends Exception {
        UsageException(String msg) {
            super(msg);
        }
    }

    static final class Flags {
        String bootstrap, appId, input, output, topology, dlq;
        String stateDir = "/tmp/kafka-streams";
        long commitIntervalMs = 100;
        int threads = 1;
        long windowMs = 5000;
        long graceMs = 600_000;
        boolean help;

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
                    if (seen.containsKey("window-ms") || seen.containsKey("grace-ms")) {
                        throw new UsageException("--window-ms and --grace-ms are for --topology aggregate only");
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
        int partitions;
        try {
            partitions = prepareTopics(f);
        } catch (Exception e) {
            System.err.println("kstreams-peer: " + e.getMessage());
            return 1;
        }
        Topology topology = switch (f.topology) {
            case "passthrough" -> Passthrough.build(f);
            default -> Aggregate.build(f);
        };
        log.info("topology:\n{}", topology.describe());

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

        KafkaStreams streams = new KafkaStreams(topology, p);
        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicReference<Boolean> started = new AtomicReference<>(false);
        streams.setUncaughtExceptionHandler(e -> {
            log.error("stream thread failed; shutting down", e);
            failure.compareAndSet(null, e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            log.info("state {} -> {}", before, now);
            if (now == KafkaStreams.State.RUNNING && started.compareAndSet(false, true)) {
                out.println("{\"kind\":\"started\",\"topology\":" + quote(f.topology) + ",\"app_id\":" + quote(f.appId)
                    + ",\"input\":" + quote(f.input) + ",\"output\":" + quote(f.output)
                    + (f.dlq != null ? ",\"dlq\":" + quote(f.dlq) : "")
                    + ",\"partitions\":" + partitions + ",\"threads\":" + f.threads
                    + ",\"commit_interval_ms\":" + f.commitIntervalMs + ",\"kafka_streams\":\"" + KAFKA_STREAMS_VERSION
                    + "\",\"pid\":" + ProcessHandle.current().pid() + "}");
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
                failure.compareAndSet(null, new IllegalStateException("Kafka Streams went to state " + now));
                done.countDown();
            }
        });
        // SIGTERM and SIGINT stop the application through the main thread, which closes Streams and
        // exits 0, rather than through a shutdown hook, which could only exit 143.
        for (String sig : new String[] {"TERM", "INT"}) {
            sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> {
                log.info("SIG{}: closing", sig);
                done.countDown();
            });
        }
        streams.start();
        try {
            done.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        // Leave the group, so a restart with the same --app-id need not wait out the session timeout.
        boolean closed = streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
            .withTimeout(Duration.ofSeconds(60)));
        Throwable t = failure.get();
        if (t != null) {
            System.err.println("kstreams-peer: failed: " + t);
            return 1;
        }
        if (!closed) {
            System.err.println("kstreams-peer: Kafka Streams did not close within 60s");
            return 1;
        }
        out.println("{\"kind\":\"stopped\",\"consumed\":" + consumed.get() + ",\"produced\":" + produced.get()
            + (f.dlq != null ? ",\"dead_letters\":" + deadLettered.get() : "") + "}");
        return 0;
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
