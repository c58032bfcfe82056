package eos.peers;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

/**
 * aggregate: eos's aggregate topology under aggcheck.Config, in the Kafka Streams DSL.
 *
 * <pre>
 * input ─ parse (re-key by user, timestamp := ts) ─┬─ malformed/missing/bad field ─→ dlq
 *                                                  └─ repartition "windows" (APP-windows-repartition)
 *   ─ late gate (stream time per task, in a changelogged store) ─┬─ late ─→ dlq
 *                                                                └─ groupByKey ─ tumbling windows (size, grace)
 *   ─ aggregate count/sum/min/max ─ suppress(untilWindowCloses) ─ to JSON ─→ output
 *   (--store memory: in-memory stores, and emitStrategy(onWindowClose) instead of suppress)
 * </pre>
 *
 * Results are aggcheck.Window JSON keyed by the group; dead letters are the input records
 * unchanged (key, value, timestamp, headers) with eos's eos-dlq-* headers naming the input record.
 */
final class Aggregate {
    private Aggregate() {}

    // eos's header names (pipeline/deadletter.go, pipeline/collector.go).
    static final String REASON = "eos-dlq-reason";
    static final String ERROR = "eos-dlq-error";
    static final String TOPIC = "eos-dlq-topic";
    static final String PARTITION = "eos-dlq-partition";
    static final String OFFSET = "eos-dlq-offset";
    static final String TOPOLOGY = "eos-dlq-topology";
    static final String IDEMPOTENCY_KEY = "eos-idempotency-key";
    /** Carried through the repartition topic: "topic/partition/offset" of the input record. */
    static final String SOURCE = "eos-source";

    static final String REPARTITION = "windows"; // -> <app>-windows-repartition, as eos names its own
    static final String STREAM_TIME_STORE = "stream-time";
    static final String WINDOW_STORE = "windows-store";

    static Topology build(KStreamsPeer.Flags f) {
        long size = f.windowMs, grace = f.graceMs;
        StreamsBuilder b = new StreamsBuilder();

        KStream<String, Staged> parsed = b
            .stream(f.inputs(), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()).withName("input"))
            .process(Parse::new, Named.as("parse"));

        // Stage one's dead letters: the record as read, with eos's headers.
        Produced<byte[], byte[]> toDlq = Produced.with(Serdes.ByteArray(), Serdes.ByteArray());
        KStream<String, Staged> good = parsed.split(Named.as("parsed-"))
            .branch((k, v) -> v.dead, Branched.withConsumer(s -> deadLetters(s, "parse-dlq").to(f.dlq, toDlq.withName("parse-dlq-sink"))))
            .defaultBranch(Branched.as("ok"))
            .get("parsed-ok");

        boolean memory = f.store.equals("memory");
        StoreBuilder<KeyValueStore<String, Long>> streamTime = Stores.keyValueStoreBuilder(
            memory ? Stores.inMemoryKeyValueStore(STREAM_TIME_STORE) : Stores.persistentKeyValueStore(STREAM_TIME_STORE),
            Serdes.String(), Serdes.Long());
        b.addStateStore(streamTime);

        KStream<String, Staged> gated = good
            .repartition(Repartitioned.with(Serdes.String(), StagedSerde.serde()).withName(REPARTITION))
            .processValues(() -> new LateGate(size, grace), Named.as("late-gate"), STREAM_TIME_STORE);

        KStream<String, Staged> onTime = gated.split(Named.as("gated-"))
            .branch((k, v) -> v.dead, Branched.withConsumer(s -> deadLetters(s, "late-dlq").to(f.dlq, toDlq.withName("late-dlq-sink"))))
            .defaultBranch(Branched.as("ok"))
            .get("gated-ok");

        TimeWindowedKStream<String, Double> windowed = onTime
            .mapValues(v -> v.amount, Named.as("amount"))
            .groupByKey(Grouped.with(Serdes.String(), Serdes.Double()))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)));
        KStream<Windowed<String>, Acc> results;
        if (memory) {
            // In-memory window store (changelogged, restored into the heap) and the aggregate's own
            // final-result emission: each window once, when stream time passes its end plus grace.
            results = windowed
                .emitStrategy(EmitStrategy.onWindowClose())
                .aggregate(Acc::new, (k, amount, acc) -> acc.add(amount), Named.as("aggregate"),
                    Materialized.<String, Acc>as(Stores.inMemoryWindowStore(WINDOW_STORE, Duration.ofMillis(size + grace),
                            Duration.ofMillis(size), false))
                        .withKeySerde(Serdes.String()).withValueSerde(AccSerde.serde()))
                .toStream(Named.as("results"));
        } else {
            results = windowed
                .aggregate(Acc::new, (k, amount, acc) -> acc.add(amount), Named.as("aggregate"),
                    Materialized.<String, Acc, WindowStore<Bytes, byte[]>>as(WINDOW_STORE)
                        .withKeySerde(Serdes.String()).withValueSerde(AccSerde.serde()))
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final"))
                .toStream(Named.as("results"));
        }
        results
            .process(ToJson::new, Named.as("to-json"))
            .to(f.output, Produced.with(Serdes.String(), Serdes.String()).withName("output"));
        return b.build();
    }

    /** The dead letters of a branch, as (input key, input value), counted. */
    private static KStream<byte[], byte[]> deadLetters(KStream<String, Staged> s, String name) {
        return s.map((k, v) -> {
            KStreamsPeer.deadLettered.incrementAndGet();
            return KeyValue.pair(v.origKey, v.origValue);
        }, Named.as(name));
    }

    /**
     * What stage one passes on: either a dead letter (dead; its headers are already on the record),
     * or a parsed record with its input key, value and timestamp, for a late dead letter after the
     * repartition.
     */
    static final class Staged {
        boolean dead;
        long ts;
        double amount;
        long origTimestamp;
        byte[] origKey;
        byte[] origValue;
    }

    /** On the repartition topic: version 1, ts, amount, input timestamp, key length (-1: null), key, value. */
    static final class StagedSerde {
        static Serde<Staged> serde() {
            return Serdes.serdeFrom(StagedSerde::serialize, StagedSerde::deserialize);
        }

        static byte[] serialize(String topic, Staged s) {
            int kl = s.origKey == null ? -1 : s.origKey.length;
            int vl = s.origValue == null ? 0 : s.origValue.length;
            ByteBuffer b = ByteBuffer.allocate(1 + 8 + 8 + 8 + 4 + Math.max(kl, 0) + vl);
            b.put((byte) 1).putLong(s.ts).putDouble(s.amount).putLong(s.origTimestamp).putInt(kl);
            if (kl > 0) {
                b.put(s.origKey);
            }
            if (vl > 0) {
                b.put(s.origValue);
            }
            return b.array();
        }

        static Staged deserialize(String topic, byte[] data) {
            ByteBuffer b = ByteBuffer.wrap(data);
            if (b.get() != 1) {
                throw new IllegalArgumentException("repartition record of an unknown version " + data[0]);
            }
            Staged s = new Staged();
            s.ts = b.getLong();
            s.amount = b.getDouble();
            s.origTimestamp = b.getLong();
            int kl = b.getInt();
            if (kl >= 0) {
                s.origKey = new byte[kl];
                b.get(s.origKey);
            }
            s.origValue = new byte[b.remaining()];
            b.get(s.origValue);
            return s;
        }

    }

    /** A field the topology needs is absent or of the wrong type: a dead letter with eos's reason. */
    static final class Reject extends Exception {
        final String reason;

        Reject(String reason, String msg) {
            super(msg);
            this.reason = reason;
        }
    }

    private static final JsonFactory JSON = JsonFactory.builder()
        .streamReadConstraints(StreamReadConstraints.defaults()).build();

    /**
     * Stage one: parses the value ({"user": ..., "ts": ..., "amount": ...}), re-keys by user and sets
     * the record's timestamp to ts, the event time Kafka Streams' windows use. A value that is not a
     * JSON object is "malformed-json", one lacking user, ts or amount "missing-field", one whose
     * fields have the wrong type "expression-error", as eos rejects them.
     */
    static final class Parse implements Processor<byte[], byte[], String, Staged> {
        private ProcessorContext<String, Staged> ctx;

        @Override
        public void init(ProcessorContext<String, Staged> context) {
            ctx = context;
        }

        @Override
        public void process(Record<byte[], byte[]> r) {
            KStreamsPeer.consumedOne();
            var md = ctx.recordMetadata().orElseThrow();
            String source = md.topic() + "/" + md.partition() + "/" + md.offset();
            Staged s = new Staged();
            s.origKey = r.key();
            s.origValue = r.value();
            s.origTimestamp = r.timestamp();
            String user;
            try {
                user = parse(r.value(), s);
            } catch (Reject e) {
                s.dead = true;
                ctx.forward(r.withKey((String) null).withValue(s)
                    .withHeaders(deadLetterHeaders(r.headers(), e.reason, e.getMessage(), md.topic(), md.partition(), md.offset())));
                return;
            }
            Headers hs = withoutInternal(r.headers());
            hs.add(SOURCE, source.getBytes(StandardCharsets.UTF_8));
            ctx.forward(new Record<>(user, s, s.ts, hs));
        }

        /** Fills s.ts and s.amount and returns the group. */
        static String parse(byte[] value, Staged s) throws Reject {
            String user = null;
            boolean hasTs = false, hasAmount = false;
            String badUser = null, badTs = null, badAmount = null;
            try (JsonParser p = JSON.createParser(value == null ? new byte[0] : value)) {
                if (p.nextToken() != JsonToken.START_OBJECT) {
                    throw new Reject("malformed-json", "the value is not a JSON object");
                }
                for (JsonToken t = p.nextToken(); t != JsonToken.END_OBJECT; t = p.nextToken()) {
                    if (t == null) {
                        throw new Reject("malformed-json", "unexpected end of JSON input");
                    }
                    String name = p.currentName();
                    JsonToken v = p.nextToken();
                    switch (name) {
                        case "user" -> {
                            if (v == JsonToken.VALUE_STRING) {
                                user = p.getText();
                            } else if (v == JsonToken.VALUE_NUMBER_INT) {
                                user = p.getText();
                            } else {
                                badUser = v.asString() == null ? v.name() : v.asString();
                                p.skipChildren();
                            }
                        }
                        case "ts" -> {
                            hasTs = true;
                            if (v == JsonToken.VALUE_NUMBER_INT) {
                                s.ts = p.getLongValue();
                            } else if (v == JsonToken.VALUE_NUMBER_FLOAT) {
                                s.ts = (long) p.getDoubleValue();
                            } else if (v == JsonToken.VALUE_STRING) {
                                try {
                                    s.ts = Instant.parse(p.getText()).toEpochMilli();
                                } catch (Exception e) {
                                    badTs = p.getText();
                                }
                            } else {
                                badTs = v.name();
                                p.skipChildren();
                            }
                        }
                        case "amount" -> {
                            hasAmount = true;
                            if (v == JsonToken.VALUE_NUMBER_INT || v == JsonToken.VALUE_NUMBER_FLOAT) {
                                s.amount = p.getDoubleValue();
                                if (!Double.isFinite(s.amount)) {
                                    badAmount = p.getText();
                                }
                            } else {
                                badAmount = v.name();
                                p.skipChildren();
                            }
                        }
                        default -> p.skipChildren();
                    }
                }
                if (p.nextToken() != null) {
                    throw new Reject("malformed-json", "data after the JSON object");
                }
            } catch (com.fasterxml.jackson.core.JacksonException e) {
                throw new Reject("malformed-json", e.getOriginalMessage());
            } catch (IOException e) {
                throw new Reject("malformed-json", e.getMessage());
            }
            if (user == null && badUser == null) {
                throw new Reject("missing-field", "field \"user\" is missing");
            }
            if (!hasTs) {
                throw new Reject("missing-field", "field \"ts\" is missing");
            }
            if (!hasAmount) {
                throw new Reject("missing-field", "field \"amount\" is missing");
            }
            if (badUser != null) {
                throw new Reject("expression-error", "group_by gave " + badUser + ", want a string or number");
            }
            if (badTs != null) {
                throw new Reject("expression-error", "time gave " + badTs + ", want Unix milliseconds or RFC 3339 text");
            }
            if (badAmount != null) {
                throw new Reject("expression-error", "amount gave " + badAmount + ", want a finite number");
            }
            return user;
        }
    }

    /**
     * Stage two, before the windows: eos's late rule. Each task (one repartition partition) keeps its
     * stream time, the largest event time it has let through, in a changelogged store, so that it is
     * restored with the task; a record whose window [start, start+size) has end + grace <= stream time
     * is a "late-record" dead letter. The DSL's windowed aggregate would drop such a record silently
     * (and its own stream time is not restored after a restart).
     */
    static final class LateGate implements FixedKeyProcessor<String, Staged, Staged> {
        private static final String KEY = "st";
        private final long size, grace;
        private FixedKeyProcessorContext<String, Staged> ctx;
        private KeyValueStore<String, Long> store;

        LateGate(long size, long grace) {
            this.size = size;
            this.grace = grace;
        }

        @Override
        public void init(FixedKeyProcessorContext<String, Staged> context) {
            ctx = context;
            store = context.getStateStore(STREAM_TIME_STORE);
        }

        @Override
        public void process(FixedKeyRecord<String, Staged> r) {
            Staged s = r.value();
            Long st = store.get(KEY);
            long start = Math.floorDiv(s.ts, size) * size;
            if (st != null && start + size + grace <= st) {
                String src = header(r.headers(), SOURCE);
                String[] parts = src == null ? new String[0] : src.split("/");
                int n = parts.length;
                String topic = n >= 3 ? String.join("/", java.util.Arrays.copyOf(parts, n - 2)) : "";
                int partition = n >= 3 ? Integer.parseInt(parts[n - 2]) : -1;
                long offset = n >= 3 ? Long.parseLong(parts[n - 1]) : -1;
                String msg = "every window of its event time closed before it arrived: the last, [" + Instant.ofEpochMilli(start)
                    + ", " + Instant.ofEpochMilli(start + size) + "), closed with its grace period (" + Duration.ofMillis(grace)
                    + ") when the partition's stream time reached " + Instant.ofEpochMilli(start + size + grace)
                    + ", and stream time is " + Instant.ofEpochMilli(st);
                s.dead = true;
                ctx.forward(r.withTimestamp(s.origTimestamp)
                    .withHeaders(deadLetterHeaders(r.headers(), "late-record", msg, topic, partition, offset)));
                return;
            }
            if (st == null || s.ts > st) {
                store.put(KEY, s.ts);
            }
            ctx.forward(r);
        }
    }

    static String header(Headers hs, String key) {
        Header h = hs.lastHeader(key);
        return h == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    }

    /** The record's headers without eos's internal ones (as eos drops them before writing). */
    static Headers withoutInternal(Headers in) {
        RecordHeaders out = new RecordHeaders();
        for (Header h : in) {
            if (!h.key().equals(SOURCE) && !h.key().equals(IDEMPOTENCY_KEY) && !h.key().startsWith("eos-dlq-")) {
                out.add(h);
            }
        }
        return out;
    }

    /** eos's dead-letter headers (pipeline/deadletter.go) after the record's own. */
    static Headers deadLetterHeaders(Headers in, String reason, String error, String topic, int partition, long offset) {
        Headers out = withoutInternal(in);
        out.add(REASON, utf8(reason));
        out.add(ERROR, utf8(reason + ": " + error));
        out.add(TOPIC, utf8(topic));
        out.add(PARTITION, utf8(Integer.toString(partition)));
        out.add(OFFSET, utf8(Long.toString(offset)));
        out.add(TOPOLOGY, utf8("aggregate"));
        out.add(IDEMPOTENCY_KEY, utf8(topic + "/" + partition + "/" + offset + "/0"));
        return out;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A window's accumulator: count, sum, min, max of amount. */
    static final class Acc {
        long count;
        double sum;
        double min = Double.POSITIVE_INFINITY;
        double max = Double.NEGATIVE_INFINITY;

        Acc add(double v) {
            count++;
            sum += v;
            min = Math.min(min, v);
            max = Math.max(max, v);
            return this;
        }
    }

    static final class AccSerde {
        static Serde<Acc> serde() {
            return Serdes.serdeFrom(AccSerde::serialize, AccSerde::deserialize);
        }

        static byte[] serialize(String topic, Acc a) {
            if (a == null) {
                return null;
            }
            return ByteBuffer.allocate(32).putLong(a.count).putDouble(a.sum).putDouble(a.min).putDouble(a.max).array();
        }

        static Acc deserialize(String topic, byte[] data) {
            if (data == null) {
                return null;
            }
            ByteBuffer b = ByteBuffer.wrap(data);
            Acc a = new Acc();
            a.count = b.getLong();
            a.sum = b.getDouble();
            a.min = b.getDouble();
            a.max = b.getDouble();
            return a;
        }

    }

    /**
     * A closed window's final result as aggcheck.Window JSON, keyed by the group and stamped
     * with the window's end, as eos emits it; the input's headers are not carried over.
     */
    static final class ToJson implements Processor<Windowed<String>, Acc, String, String> {
        private ProcessorContext<String, String> ctx;

        @Override
        public void init(ProcessorContext<String, String> context) {
            ctx = context;
        }

        @Override
        public void process(Record<Windowed<String>, Acc> r) {
            String group = r.key().key();
            long start = r.key().window().start(), end = r.key().window().end();
            Acc a = r.value();
            String json = "{\"key\":" + Json.string(group) + ",\"start\":" + start + ",\"end\":" + end
                + ",\"orders\":" + a.count + ",\"total\":" + Json.number(a.sum) + ",\"smallest\":" + Json.number(a.min)
                + ",\"biggest\":" + Json.number(a.max) + ",\"mean\":" + Json.number(a.sum / a.count) + ",\"final\":true}";
            ctx.forward(new Record<>(group, json, end, new RecordHeaders()));
            KStreamsPeer.produced.incrementAndGet();
        }
    }
}
