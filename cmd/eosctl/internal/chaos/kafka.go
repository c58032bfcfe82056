package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/kafkacluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// KafkaConfigs are the broker settings the scenarios need on Apache Kafka:
// classic members expire in seconds, KIP-848 members too (the kip848
// drill restarts a static member, refused until its old session ends),
// and the coordinator aborts an expired transaction within a second of its
// timeout (txn-timeout) instead of after up to 10 s.
var KafkaConfigs = map[string]string{
	"group.consumer.session.timeout.ms":                           "6000",
	"group.consumer.heartbeat.interval.ms":                        "500",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
	"transaction.max.timeout.ms":                                  "3600000",
	// The aggregate rows' results carry 2023 event times (their window's
	// end): with the default retention.ms of 7 days, the retention check
	// deleted output segments before the judge read them.
	"log.retention.ms": "-1",
}

// StartKafka starts the 3-node Apache Kafka cluster the scenarios run
// against (RF 3, min ISR 2, with fault proxies in front of every node).
// One cluster serves every scenario in turn; each scenario leaves it whole.
func StartKafka(ctx context.Context, logf func(string, ...any)) (*kafkacluster.Cluster, error) {
	return kafkacluster.Start(ctx, kafkacluster.Config{Nodes: 3, Proxy: true, BrokerConfigs: KafkaConfigs, Logf: logf})
}

// useKafka points the harness at the real cluster, with its proxies'
// faults reset and every node running and reachable.
func (h *harness) useKafka(ctx context.Context) error {
	c := h.kafka
	c.Faults().Reset()
	for _, n := range c.Nodes() {
		n.Proxy().Cut(false)
		if n.Exited() {
			if err := c.RestartNode(ctx, n.ID); err != nil {
				return err
			}
		}
	}
	// Scenarios reuse app names (bounce in the clean and the hard bounce):
	// each starts from an empty cluster, as on a fresh embedded broker.
	if err := kafkacluster.Clear(ctx, c.Addrs()); err != nil {
		return err
	}
	return h.connect(ctx, c.Addrs())
}

// faultsOr returns the injector a scenario arms: embedded, the one it gave
// the embedded broker, or on Apache Kafka the proxies'.
func (h *harness) faultsOr(embedded *broker.Faults) *broker.Faults {
	if h.kafka != nil {
		return h.kafka.Faults()
	}
	return embedded
}

// bounceNode stops node id of the Apache Kafka cluster, with SIGKILL if
// hard (at whatever instant the signal lands: Kafka's transaction log must
// make that safe) and SIGTERM otherwise, keeps it down for down, starts it
// again and waits until the cluster names every node.
func (h *harness) bounceNode(ctx context.Context, id int32, down time.Duration, hard bool) (time.Time, error) {
	if err := h.kafka.StopNode(id, hard); err != nil {
		return time.Time{}, err
	}
	time.Sleep(down)
	if err := h.kafka.RestartNode(ctx, id); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// txnCoordinator returns the node coordinating transactionalID.
func (h *harness) txnCoordinator(ctx context.Context, transactionalID string) (int32, error) {
	for _, r := range kadm.NewClient(h.Client).FindTxnCoordinators(ctx, transactionalID) {
		if r.Err != nil {
			return -1, r.Err
		}
		return r.NodeID, nil
	}
	return -1, errors.New("no coordinator found")
}

// partitionLeader returns the leader of topic's partition p.
func (h *harness) partitionLeader(ctx context.Context, topic string, p int32) (int32, error) {
	md, err := kadm.NewClient(h.Client).Metadata(ctx, topic)
	if err != nil {
		return -1, err
	}
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok {
		return -1, fmt.Errorf("no partition %s[%d] in metadata", topic, p)
	}
	return pd.Leader, nil
}

// rotateLeaders moves the leader of every partition of app's topics to the
// next replica, as an operator does: reassign the partition with its
// replica list rotated, then elect the preferred (first) replica.
func (h *harness) rotateLeaders(ctx context.Context, app string) error {
	adm := kadm.NewClient(h.Client)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("listing topics to move: %w", err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	elect := kadm.TopicsSet{}
	for _, t := range topics.Sorted() {
		if !strings.HasPrefix(t.Topic, app+"-") {
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			if len(p.Replicas) < 2 {
				continue
			}
			rot := append(slices.Clone(p.Replicas[1:]), p.Replicas[0])
			req.Assign(t.Topic, p.Partition, rot)
			elect.Add(t.Topic, p.Partition)
		}
	}
	if _, err := adm.AlterPartitionAssignments(ctx, req); err != nil {
		return fmt.Errorf("reassigning partitions: %w", err)
	}
	// The reassignment only reorders replicas that are all in sync, so it
	// completes at once; the election then moves each leader.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, elect)
		if err == nil {
			pending := 0
			for _, ps := range rs {
				for _, r := range ps {
					if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
						pending++
					}
				}
			}
			if pending == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("electing the rotated leaders: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// randomNode picks a node of the Apache Kafka cluster.
func (h *harness) randomNode() int32 {
	ns := h.kafka.Nodes()
	return ns[h.rng.IntN(len(ns))].ID
}

// moveKafkaLeaders is moveLeaders on Apache Kafka: how 0 and 2 rotate the
// leaders of app's partitions by reassignment and election; how 1 kills
// the node leading app-out[0] (SIGKILL), so every partition it led fails
// over to an in-sync follower, and starts it again.
func (h *harness) moveKafkaLeaders(ctx context.Context, app string, how int) error {
	if how != 1 {
		return h.rotateLeaders(ctx, app)
	}
	leader, err := h.partitionLeader(ctx, app+"-out", 0)
	if err != nil {
		return err
	}
	_, err = h.bounceNode(ctx, leader, 500*time.Millisecond, true)
	return err
}

// nodeBounce is brokerBounce on Apache Kafka: nodes stopped in turn with
// SIGTERM (a rolling restart) or SIGKILLed at random instants, 500ms down
// each, while the input is copied. With RF 3 and min ISR 2 one node down
// stops nothing; the drill shows that the workers' transactions survive
// the loss of whichever node led their partitions or coordinated them.
func nodeBounce(ctx context.Context, h *harness, sz Size, res *Result, w workload, hard bool) error {
	produced, err := w.produce(ctx, h, "bounce-in", 6, sz.Records, 0)
	if err != nil {
		return err
	}
	if err := <-produced; err != nil {
		return err
	}
	how := "SIGTERMs in turn (rolling restart)"
	if hard {
		how = "SIGKILLs of random nodes at arbitrary instants"
	}
	var bounces []time.Time
	var killed []int32
	sz.Records = 0
	err = runWith(ctx, h, sz, res, w, "bounce", 6, 2, []string{"--max-txn-records", "50"}, func() error {
		for i := range sz.Faults {
			time.Sleep(time.Second)
			id := h.kafka.Nodes()[i%len(h.kafka.Nodes())].ID
			if hard {
				id = h.randomNode()
			}
			at, err := h.bounceNode(ctx, id, 500*time.Millisecond, hard)
			if err != nil {
				return err
			}
			killed = append(killed, id)
			bounces = append(bounces, at)
		}
		return nil
	})
	res.Faults = fmt.Sprintf("%d node %s, 500ms down each (nodes %v)", sz.Faults, how, killed)
	for _, at := range bounces {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	if err == nil && len(res.Recovery) < sz.Faults {
		err = fmt.Errorf("only %d worker commits followed the %d bounces: the copy finished before the faults, so they proved nothing", len(res.Recovery), sz.Faults)
	}
	return err
}

// coordinatorLoss is coordinatorMoves on Apache Kafka: the node that
// coordinates a worker's transactions is SIGKILLed while the worker has a
// transaction open, so a follower of that __transaction_state partition
// takes over and must finish or abort what the old coordinator had begun.
func coordinatorLoss(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	var losses []time.Time
	var nodes []int32
	err := runWith(ctx, h, sz, res, w, "moves", 6, 2, nil, func() error {
		for i := range sz.Faults {
			time.Sleep(spread(sz, sz.Faults))
			id := fencing.ID("moves", strconv.Itoa(i%2))
			admin.WaitOngoing(ctx, h.Client, id, 2*time.Second)
			node, err := h.txnCoordinator(ctx, id)
			if err != nil {
				return fmt.Errorf("finding the coordinator of %s: %w", id, err)
			}
			at, err := h.bounceNode(ctx, node, 500*time.Millisecond, true)
			if err != nil {
				return err
			}
			nodes = append(nodes, node)
			losses = append(losses, at)
		}
		return nil
	})
	res.Faults = fmt.Sprintf("%d SIGKILLs of the transaction coordinator's node mid-transaction (nodes %v)", sz.Faults, nodes)
	for _, at := range losses {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	return err
}

// networkPartition isolates the node coordinating a worker's transactions
// (clients, replication and quorum alike) for longer than the session and
// request timeouts, then heals it. Cut off, the node is fenced by the
// controller, its partitions and coordinators move to the others, and the
// worker must finish its transaction with the new coordinator or abort and
// rewind; the node's own view of a transaction it can no longer finish
// must not leak when it comes back.
func networkPartition(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return err
	}
	const cut = 12 * time.Second
	paced := sz
	paced.Rate = max(1, min(sz.Rate, int(float64(sz.Records)/(time.Duration(sz.Faults)*(cut+6*time.Second)).Seconds())))
	var healed []time.Time
	var nodes []int32
	err := runWith(ctx, h, paced, res, w, "partition", 6, 2, []string{"--request-timeout", "5s"}, func() error {
		for i := range sz.Faults {
			time.Sleep(2 * time.Second)
			id := fencing.ID("partition", strconv.Itoa(i%2))
			admin.WaitOngoing(ctx, h.Client, id, 2*time.Second)
			node, err := h.txnCoordinator(ctx, id)
			if err != nil {
				return fmt.Errorf("finding the coordinator of %s: %w", id, err)
			}
			n := h.kafka.Node(node)
			n.Isolate(true)
			time.Sleep(cut)
			n.Isolate(false)
			nodes = append(nodes, node)
			healed = append(healed, time.Now())
			if err := h.kafka.WaitReady(ctx, time.Minute); err != nil {
				return err
			}
		}
		return nil
	})
	res.Faults = fmt.Sprintf("%d isolations of the transaction coordinator's node for %s (nodes %v); input paced to last through them", sz.Faults, cut, nodes)
	for _, at := range healed {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	return err
}

// transactionVersionSwitch downgrades the cluster's transaction.version
// feature from 2 (KIP-890: implicit partition adds, an epoch bump at every
// commit) to 1 and upgrades it back, in turn, while the workers copy. A
// client chooses its protocol per request from the versions it negotiated,
// and the coordinator must finish under the new version what began under
// the old one.
func transactionVersionSwitch(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return err
	}
	adm := kadm.NewClient(h.Client)
	defer adm.UpdateFeatures(context.WithoutCancel(ctx), false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	var switches []time.Time
	var levels []int16
	err := runWith(ctx, h, sz, res, w, "tvswitch", 6, 2, nil, func() error {
		for i := range sz.Faults {
			time.Sleep(spread(sz, sz.Faults))
			level, upgrade := int16(1), int8(2) // a safe downgrade
			if i%2 == 1 {
				level, upgrade = 2, 1
			}
			r, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: upgrade})
			if err == nil {
				err = r.Error()
			}
			if err != nil {
				return fmt.Errorf("setting transaction.version to %d: %w", level, err)
			}
			levels = append(levels, level)
			switches = append(switches, time.Now())
		}
		return nil
	})
	res.Faults = fmt.Sprintf("%d switches of transaction.version, to %v in turn", len(levels), levels)
	for _, at := range switches {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	return err
}
