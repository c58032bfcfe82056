package eos.peers;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The hand-written Java transactional copy loop of eosctl bench's javaloop mode (issue #21): what the
 * Java clients alone do, without Kafka Streams, as bench's bare mode is what franz-go alone does.
 * Each of --threads loops owns a KafkaConsumer (read_committed, auto-commit off) in group --app-id and
 * a KafkaProducer with transactional.id APP-loop-N, and:
 *
 * <ul>
 *   <li>polls, opens a transaction with the first record, and sends every record as it is (key, value,
 *       headers, timestamp) to the same partition of --output;</li>
 *   <li>once the transaction is --commit-interval-ms old (from its first record), sends the consumer's
 *       positions with its group metadata (sendOffsetsToTransaction) and commits;</li>
 *   <li>on partitions being revoked, commits the open transaction first (they are still its own);</li>
 *   <li>on a fenced producer or member, an out-of-order sequence or an authorization error, stops: they
 *       cannot be recovered by this incarnation; on any other Kafka error, aborts the transaction and
 *       rewinds every assigned partition to its committed offset (or the beginning), so that what the
 *       aborted transaction had read is read again.</li>
 * </ul>
 *
 * stdout carries the lines of the Kafka Streams peer but "processing": "warmed" (with --warmup-input), "started"
 * (once every loop has joined the group, with the effective producer and consumer settings and the records
 * consumed so far, 0: a loop consumes nothing until every loop has joined), "stopped".
 */
public final class JavaLoop {
    private static final Logger log = LoggerFactory.getLogger(JavaLoop.class);

    private JavaLoop() {}

    public static void main(String[] args) {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        KStreamsPeer.Flags f;
        try {
            f = KStreamsPeer.Flags.parse(args);
            if (!f.help && !f.topology.equals("passthrough")) {
                throw new KStreamsPeer.UsageException("the Java loop copies: --topology passthrough only");
            }
        } catch (KStreamsPeer.UsageException e) {
            System.err.println("javaloop: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (f.help) {
            out.print("Usage: java -cp kstreams-peer.jar eos.peers.JavaLoop (the flags of the Kafka Streams peer, --topology passthrough)\n");
            System.exit(0);
        }
        System.exit(run(f, out));
    }

    static int run(KStreamsPeer.Flags f, PrintStream out) {
        CountDownLatch stop = new CountDownLatch(1);
        for (String sig : new String[] {"TERM", "INT"}) {
            sun.misc.Signal.handle(new sun.misc.Signal(sig), s -> stop.countDown());
        }
        try {
            if (f.warmupInput != null) {
                long t0 = System.nanoTime();
                KStreamsPeer.Flags w = f.warmup();
                KStreamsPeer.prepareTopics(w);
                Fleet warm = Fleet.start(w);
                long records;
                try {
                    records = Clients.awaitCommitted(w.bootstrap, w.appId, w.inputs(), () -> warm.failure.get() != null
                        ? String.valueOf(warm.failure.get()) : stop.getCount() == 0 ? "stopped by a signal" : null);
                } finally {
                    if (warm.close() != 0) {
                        return 1;
                    }
                }
                out.println("{\"kind\":\"warmed\",\"records\":" + records + ",\"seconds\":" + (System.nanoTime() - t0) / 1e9 + "}");
            }
            int partitions = KStreamsPeer.prepareTopics(f);
            Fleet fleet = Fleet.start(f);
            fleet.joined.await();
            Loop first = fleet.loops.get(0);
            out.println("{\"kind\":\"started\",\"topology\":\"passthrough\",\"app_id\":" + KStreamsPeer.quote(f.appId)
                + ",\"input\":" + KStreamsPeer.quote(f.input) + ",\"output\":" + KStreamsPeer.quote(f.output)
                + ",\"partitions\":" + partitions + ",\"threads\":" + f.threads + ",\"commit_interval_ms\":" + f.commitIntervalMs
                + ",\"producer\":" + Clients.effective(first.producerConfig, true)
                + ",\"consumer\":" + Clients.effective(first.consumerConfig, false)
                + ",\"consumed\":" + fleet.consumed() + ",\"pid\":" + ProcessHandle.current().pid() + "}");
            // Until a signal, or a loop's end (a failure).
            while (stop.getCount() > 0 && fleet.failure.get() == null) {
                stop.await(100, java.util.concurrent.TimeUnit.MILLISECONDS);
            }
            int rc = fleet.close();
            if (rc == 0) {
                out.println("{\"kind\":\"stopped\",\"consumed\":" + fleet.consumed() + ",\"produced\":" + fleet.consumed() + "}");
            }
            return rc;
        } catch (Exception e) {
            System.err.println("javaloop: " + e);
            return 1;
        }
    }

    /** The --threads loops of one group. */
    static final class Fleet {
        final List<Loop> loops = new ArrayList<>();
        final List<Thread> threads = new ArrayList<>();
        final CountDownLatch joined;
        final AtomicReference<Throwable> failure = new AtomicReference<>();

        private Fleet(int n) {
            joined = new CountDownLatch(n);
        }

        static Fleet start(KStreamsPeer.Flags f) {
            Fleet fl = new Fleet(f.threads);
            for (int i = 0; i < f.threads; i++) {
                Loop l = new Loop(f, i, fl);
                fl.loops.add(l);
                Thread t = new Thread(l, f.appId + "-loop-" + i);
                fl.threads.add(t);
                t.start();
            }
            return fl;
        }

        long consumed() {
            return loops.stream().mapToLong(l -> l.consumed).sum();
        }

        /** Stops every loop (each commits what it holds and closes its clients); 0 if none failed. */
        int close() throws InterruptedException {
            loops.forEach(l -> l.stopping.set(true));
            for (Thread t : threads) {
                t.join();
            }
            Throwable t = failure.get();
            if (t != null) {
                System.err.println("javaloop: a loop failed: " + t);
                return 1;
            }
            return 0;
        }
    }

    static final class Loop implements Runnable, ConsumerRebalanceListener {
        final KStreamsPeer.Flags f;
        final Fleet fleet;
        final Map<String, Object> producerConfig = new HashMap<>(), consumerConfig = new HashMap<>();
        final AtomicBoolean stopping = new AtomicBoolean();
        final long intervalNanos;
        KafkaConsumer<byte[], byte[]> consumer;
        KafkaProducer<byte[], byte[]> producer;
        boolean inTxn, joined;
        long began;
        volatile long consumed;

        Loop(KStreamsPeer.Flags f, int i, Fleet fleet) {
            this.f = f;
            this.fleet = fleet;
            intervalNanos = Duration.ofMillis(f.commitIntervalMs).toNanos();
            // The bench's settings first, then what exactly-once needs, which they cannot change.
            consumerConfig.putAll(Clients.under(f.clientConfig, "consumer."));
            consumerConfig.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, f.bootstrap);
            consumerConfig.put(ConsumerConfig.GROUP_ID_CONFIG, f.appId);
            consumerConfig.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            consumerConfig.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            consumerConfig.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            consumerConfig.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
            consumerConfig.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
            producerConfig.putAll(Clients.under(f.clientConfig, "producer."));
            producerConfig.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, f.bootstrap);
            producerConfig.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, f.appId + "-loop-" + i);
            producerConfig.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
            producerConfig.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
        }

        @Override
        public void run() {
            try {
                producer = new KafkaProducer<>(producerConfig);
                consumer = new KafkaConsumer<>(consumerConfig);
                producer.initTransactions();
                consumer.subscribe(f.inputs(), this);
                loop();
                if (inTxn) {
                    commit();
                }
            } catch (Throwable t) {
                log.error("loop failed", t);
                fleet.failure.compareAndSet(null, t);
            } finally {
                if (!joined) {
                    fleet.joined.countDown(); // so that run does not wait for it
                }
                if (producer != null) {
                    producer.close(Duration.ofSeconds(30));
                }
                if (consumer != null) {
                    consumer.close(); // leaves the group
                }
            }
        }

        private void loop() {
            while (!stopping.get() && fleet.failure.get() == null) {
                if (fleet.joined.getCount() == 0 && !consumer.paused().isEmpty()) {
                    consumer.resume(consumer.paused()); // every loop has joined: the measured drain starts
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(100));
                try {
                    if (!recs.isEmpty()) {
                        if (!inTxn) {
                            producer.beginTransaction();
                            inTxn = true;
                            began = System.nanoTime();
                        }
                        for (ConsumerRecord<byte[], byte[]> r : recs) {
                            producer.send(new ProducerRecord<>(f.output, r.partition(), r.timestamp(), r.key(), r.value(), r.headers()));
                        }
                        consumed += recs.count();
                    }
                    if (inTxn && System.nanoTime() - began >= intervalNanos) {
                        commit();
                    }
                } catch (ProducerFencedException | FencedInstanceIdException | OutOfOrderSequenceException
                    | AuthorizationException | UnsupportedVersionException e) {
                    throw e; // not recoverable by this incarnation
                } catch (KafkaException e) {
                    log.warn("transaction failed; aborting and rewinding to the committed offsets", e);
                    abortAndRewind();
                }
            }
        }

        /** Sends the positions of every assigned partition with the group metadata, and commits. */
        private void commit() {
            Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
            for (TopicPartition tp : consumer.assignment()) {
                positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
            }
            producer.sendOffsetsToTransaction(positions, consumer.groupMetadata());
            producer.commitTransaction();
            inTxn = false;
        }

        /**
         * Aborts the open transaction and seeks every assigned partition back to its committed offset
         * (its beginning if none): the records the aborted transaction had read are read again.
         */
        private void abortAndRewind() {
            if (inTxn) {
                producer.abortTransaction();
                inTxn = false;
            }
            Set<TopicPartition> assigned = consumer.assignment();
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
            for (TopicPartition tp : assigned) {
                OffsetAndMetadata c = committed.get(tp);
                if (c != null) {
                    consumer.seek(tp, c.offset());
                } else {
                    consumer.seekToBeginning(List.of(tp));
                }
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            // Called inside poll, on this thread: the open transaction still owns what it read of them.
            if (!inTxn || partitions.isEmpty()) {
                return;
            }
            try {
                commit();
            } catch (ProducerFencedException | FencedInstanceIdException | OutOfOrderSequenceException e) {
                throw e;
            } catch (KafkaException e) {
                log.warn("commit before revocation failed; aborting (the next owner reads from the committed offsets)", e);
                abortAndRewind();
            }
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            // No longer ours: whatever the open transaction holds must not commit.
            if (inTxn) {
                producer.abortTransaction();
                inTxn = false;
            }
        }

        /**
         * Counts this loop as joined and, until every loop has, pauses what it was given. Without the pause
         * the first loop to join drains the backlog while the others are still joining (a broker with
         * group.initial.rebalance.delay.ms=0 assigns it every partition at once), before the started line
         * from which eosctl bench counts the JVM's CPU: that work would be left out of the figures.
         */
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            if (!joined) {
                joined = true;
                fleet.joined.countDown();
            }
            if (fleet.joined.getCount() > 0) {
                consumer.pause(partitions);
            }
        }
    }
}
