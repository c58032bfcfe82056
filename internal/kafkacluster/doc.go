// Package kafkacluster starts a real Apache Kafka cluster on loopback, from
// the jars Maven Central serves, with no Docker and nothing installed by
// hand. The tests use it to run the exactly-once suite against the broker
// users run (EOS_TEST_BROKER=kafka), and `scripts/kafka` (make kafka) wraps
// it for people who want a cluster to point eosctl at.
//
// What it does, in order:
//
//  1. Resolve: Maven copies kafka_2.13, kafka-tools and a log4j2 binding
//     with their runtime dependencies into a cache outside the repository
//     (~/.cache/eos/kafka-<version>/libs, or $EOS_KAFKA_CACHE). A second
//     start reuses it; a lock file keeps concurrent test binaries from
//     resolving twice.
//  2. Format: KRaft storage for every node with one cluster id
//     (kafka.tools.StorageTool format).
//  3. Start: N combined broker+controller JVMs (kafka.Kafka), each with its
//     own log directory, small heaps, and the settings production clusters
//     use for exactly-once (replication factor 3 and min ISR 2 for the
//     transaction and offsets logs on 3 nodes).
//  4. Wait until the cluster answers metadata naming every node.
//
// Each node has three listeners: CLIENT (what eosctl and the tests use),
// INTERNAL (replication) and CONTROLLER (the KRaft quorum). With
// Config.Proxy the CLIENT listener is advertised at a fault proxy in front of
// it, so a test can drop or delay chosen responses (broker.Faults) or cut a
// node off from its clients while replication and the quorum carry on.
//
// What can go wrong: no java or mvn on PATH (ErrMissingTool names which);
// Maven Central unreachable (the Maven output is in the error); a port
// taken before the JVM binds it (a *PortTakenError with Kafka's log line:
// a port the launcher chose is chosen again and the start repeated, one of
// Config.Ports is the caller's to change). Processes are stopped by PID: Stop sends SIGTERM and then
// SIGKILL after a grace period.
package kafkacluster
