package eos.peers;

import java.util.Optional;
import java.util.Set;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;

/**
 * passthrough: every input record to the output unchanged (key, value, headers, timestamp), into
 * the partition it was read from, as eos's passthrough topology copies it.
 */
final class Passthrough {
    private Passthrough() {}

    /**
     * The input partition of the record being forwarded. The sink calls its partitioner on the same
     * thread, synchronously inside forward, so the step before it hands the partition over here:
     * Kafka Streams' StreamPartitioner sees key, value and headers but not the input partition.
     */
    private static final ThreadLocal<Integer> inputPartition = new ThreadLocal<>();

    static Topology build(KStreamsPeer.Flags f) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(f.inputs(), Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()).withName("input"))
            .processValues(() -> new FixedKeyProcessor<byte[], byte[], byte[]>() {
                private FixedKeyProcessorContext<byte[], byte[]> ctx;

                @Override
                public void init(FixedKeyProcessorContext<byte[], byte[]> context) {
                    ctx = context;
                }

                @Override
                public void process(FixedKeyRecord<byte[], byte[]> r) {
                    KStreamsPeer.consumedOne();
                    inputPartition.set(ctx.recordMetadata().map(m -> m.partition()).orElse(null));
                    try {
                        ctx.forward(r);
                    } finally {
                        inputPartition.remove();
                    }
                    KStreamsPeer.produced.incrementAndGet();
                }
            }, Named.as("copy"))
            .to(f.output, Produced.with(Serdes.ByteArray(), Serdes.ByteArray())
                .withStreamPartitioner(new SamePartition()).withName("output"));
        return b.build();
    }

    static final class SamePartition implements StreamPartitioner<byte[], byte[]> {
        @Override
        public Optional<Set<Integer>> partitions(String topic, byte[] key, byte[] value, int numPartitions) {
            Integer p = inputPartition.get();
            if (p == null) {
                return Optional.empty(); // the default partitioner
            }
            return Optional.of(Set.of(p % numPartitions));
        }
    }
}
