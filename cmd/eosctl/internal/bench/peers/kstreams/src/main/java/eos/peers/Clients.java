package eos.peers;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.streams.KafkaClientSupplier;
import org.apache.kafka.streams.processor.internals.DefaultKafkaClientSupplier;

/**
 * What both peers share: the client settings eosctl bench hands them (--client-config), the report of
 * the settings their clients were really built with, and the wait for a warm-up backlog to be drained.
 */
final class Clients {
    private Clients() {}

    /** The keys of the "producer" and "consumer" objects of the started line, as eosctl bench reads them. */
    static final List<String> PRODUCER_KEYS = List.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, ProducerConfig.BATCH_SIZE_CONFIG,
        ProducerConfig.LINGER_MS_CONFIG, ProducerConfig.ACKS_CONFIG, ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
        ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG);
    static final List<String> CONSUMER_KEYS = List.of(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG,
        ConsumerConfig.FETCH_MAX_BYTES_CONFIG, ConsumerConfig.FETCH_MIN_BYTES_CONFIG, ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG,
        ConsumerConfig.ISOLATION_LEVEL_CONFIG);

    /**
     * Parses --client-config: KEY=VALUE pairs separated by commas, each KEY prefixed producer. or
     * consumer. (Kafka Streams' own prefixes), e.g. producer.linger.ms=10,consumer.fetch.max.bytes=8388608.
     */
    static Map<String, String> parse(String s) throws KStreamsPeer.UsageException {
        Map<String, String> out = new LinkedHashMap<>();
        if (s == null) {
            return out;
        }
        for (String kv : s.split(",")) {
            if (kv.isBlank()) {
                continue;
            }
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new KStreamsPeer.UsageException("--client-config: want KEY=VALUE, got " + KStreamsPeer.quote(kv));
            }
            String k = kv.substring(0, eq).trim();
            if (!k.startsWith("producer.") && !k.startsWith("consumer.")) {
                throw new KStreamsPeer.UsageException("--client-config: key " + KStreamsPeer.quote(k) + " must start with producer. or consumer.");
            }
            out.put(k, kv.substring(eq + 1).trim());
        }
        return out;
    }

    /** The entries of cfg under prefix ("producer." or "consumer."), without it. */
    static Map<String, Object> under(Map<String, String> cfg, String prefix) {
        Map<String, Object> out = new HashMap<>();
        cfg.forEach((k, v) -> {
            if (k.startsWith(prefix)) {
                out.put(k.substring(prefix.length()), v);
            }
        });
        return out;
    }

    /**
     * The effective values of keys in a producer's (or consumer's) configuration map, as the client
     * resolves it (defaults filled in), as a JSON object of strings.
     */
    static String effective(Map<String, Object> config, boolean producer) {
        // Kafka Streams hands its clients no (de)serializers (it passes them to the constructors), which the
        // config classes require: add byte-array ones, which change none of the settings reported.
        Map<String, Object> c = new HashMap<>(config);
        c.putIfAbsent(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        c.putIfAbsent(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        c.putIfAbsent(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        c.putIfAbsent(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
        if (producer) {
            c.keySet().removeIf(k -> k.endsWith("deserializer"));
        } else {
            c.keySet().removeIf(k -> k.endsWith(".serializer"));
        }
        Map<String, ?> values = producer ? new ProducerConfig(c).values() : new ConsumerConfig(c).values();
        StringBuilder b = new StringBuilder("{");
        for (String k : producer ? PRODUCER_KEYS : CONSUMER_KEYS) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(Json.string(k)).append(':').append(Json.string(String.valueOf(values.get(k))));
        }
        return b.append('}').toString();
    }

    /**
     * Kafka Streams' default client supplier that keeps the configuration of the last producer and
     * main consumer it built: what the stream threads' clients really run with, after Streams' own
     * overrides and the producer./consumer. settings.
     */
    static final class Capture implements KafkaClientSupplier {
        private final DefaultKafkaClientSupplier d = new DefaultKafkaClientSupplier();
        volatile Map<String, Object> producer, consumer;

        @Override
        public Admin getAdmin(Map<String, Object> config) {
            return d.getAdmin(config);
        }

        @Override
        public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
            producer = new HashMap<>(config);
            return d.getProducer(config);
        }

        @Override
        public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
            consumer = new HashMap<>(config);
            return d.getConsumer(config);
        }

        @Override
        public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
            return d.getRestoreConsumer(config);
        }

        @Override
        public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
            return d.getGlobalConsumer(config);
        }
    }

    /**
     * Waits until group has committed every record of topics as they stand now (their end offsets),
     * polling every 100 ms: the end of a warm-up drain. The topics hold no transaction markers (eosctl
     * bench writes them without transactions), so their end offsets count records. Returns the records;
     * throws once failed says the drain failed or was stopped, so that a dead warm-up is not waited for.
     */
    static long awaitCommitted(String bootstrap, String group, List<String> topics, java.util.function.Supplier<String> failed)
        throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (var d : admin.describeTopics(topics).allTopicNames().get(30, TimeUnit.SECONDS).values()) {
                d.partitions().forEach(pi -> latest.put(new TopicPartition(d.name(), pi.partition()), OffsetSpec.latest()));
            }
            Map<TopicPartition, Long> end = new HashMap<>();
            for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                : admin.listOffsets(latest).all().get(30, TimeUnit.SECONDS).entrySet()) {
                end.put(e.getKey(), e.getValue().offset());
            }
            long total = end.values().stream().mapToLong(Long::longValue).sum();
            while (true) {
                Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(30, TimeUnit.SECONDS);
                List<TopicPartition> behind = new ArrayList<>();
                end.forEach((tp, off) -> {
                    OffsetAndMetadata c = committed.get(tp);
                    if (off > 0 && (c == null || c.offset() < off)) {
                        behind.add(tp);
                    }
                });
                if (behind.isEmpty()) {
                    return total;
                }
                String why = failed.get();
                if (why != null) {
                    throw new Exception("the warm-up stopped before its group had committed all of " + topics + ": " + why);
                }
                Thread.sleep(100);
            }
        }
    }
}
