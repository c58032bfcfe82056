package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EpochGuard corrects one known defect of the embedded cluster, so that
// partition leaders can move without every client reporting data loss.
//
// kfake keeps no leader-epoch cache: it finds where an epoch ends by looking
// for the first batch written in a later epoch. A leader change
// (ShufflePartitionLeaders, MoveTopicPartition, AddNode, RemoveNode, an
// ElectLeaders request) bumps the partition's epoch without writing
// anything, so until the new epoch's first batch is appended,
// OffsetForLeaderEpoch for the previous epoch answers UNDEFINED (-1, -1).
// Kafka starts a new leader's epoch at its log end offset when it is
// elected, so the right answer is (E, log end offset). A client validating
// its position after the move (KIP-320) takes kfake's answer for a
// truncation: kgo reports ErrDataLoss and resets the partition by its
// ConsumeResetOffset, which for a consumer reading from the start means
// reading everything again.
//
// The guard answers each OffsetForLeaderEpoch by asking kfake the same
// question on a connection of its own, and replaces a partition's answer
// only when it is provably wrong: the requested epoch E is below the
// partition's current epoch, the node asked leads it, and kfake answered an
// undefined end offset or an epoch above E. The partition's state is read
// before the probe, while kfake serves no client request (control functions
// run between requests); anything appended after that read carries an epoch
// above E, so an undefined answer proves nothing was appended in between and
// the log end offset read is exactly where every epoch after E begins. The
// guard never invents an offset the log does not have: a consumer really
// ahead of the log still gets its data loss.
//
// Start installs a guard on every cluster of more than one node (leaders
// only move between nodes) unless Config.RawLeaderEpochs is set. If the
// probe fails (a cluster that requires SASL or TLS, which the probe does not
// speak), kfake's own answer goes out unchanged.
type EpochGuard struct {
	c     *kfake.Cluster
	probe *kgo.Client

	answered  atomic.Int64
	corrected atomic.Int64
}

// probeReplicaID marks the guard's own requests, which it lets kfake
// answer. Kafka accepts -2 (a debugging consumer) wherever -1 (a consumer)
// is; kfake rejects only broker ids (>= 0).
const probeReplicaID = -2

func newEpochGuard(c *kfake.Cluster) (*EpochGuard, error) {
	probe, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		return nil, err
	}
	g := &EpochGuard{c: c, probe: probe}
	c.ControlKey(kmsg.OffsetForLeaderEpoch.Int16(), g.control)
	return g, nil
}

// Answered is how many OffsetForLeaderEpoch requests the guard answered.
func (g *EpochGuard) Answered() int64 { return g.answered.Load() }

// Corrected is how many partition answers it corrected.
func (g *EpochGuard) Corrected() int64 { return g.corrected.Load() }

func (g *EpochGuard) close() { g.probe.Close() }

// epochAt is a partition's state when a request arrived.
type epochAt struct {
	epoch, leader int32
	end           int64 // log end offset (kfake does not replicate: the high watermark)
}

func (g *EpochGuard) control(kreq kmsg.Request) (kmsg.Response, error, bool) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	if req.ReplicaID == probeReplicaID {
		return nil, nil, false
	}
	node := g.c.CurrentNode()
	state := g.snapshot(req)
	answer, err := g.ask(node, req)
	if err != nil || answer == nil {
		return nil, nil, false // kfake answers as it would have
	}
	g.c.KeepControl()
	g.answered.Add(1)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Version, resp.ThrottleMillis, resp.Topics = req.Version, answer.ThrottleMillis, answer.Topics
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			e := requestedEpoch(req, t.Topic, p.Partition)
			s, ok := state[t.Topic][p.Partition]
			if !ok || p.ErrorCode != 0 || e < 0 || e >= s.epoch || s.leader != node {
				continue
			}
			if p.EndOffset < 0 || p.LeaderEpoch > e {
				p.LeaderEpoch, p.EndOffset = e, s.end
				g.corrected.Add(1)
			}
		}
	}
	return resp, nil, true
}

// snapshot reads the state of every partition req asks about.
func (g *EpochGuard) snapshot(req *kmsg.OffsetForLeaderEpochRequest) map[string]map[int32]epochAt {
	state := map[string]map[int32]epochAt{}
	for _, t := range req.Topics {
		m := map[int32]epochAt{}
		for _, p := range g.c.PartitionInfos(t.Topic) {
			m[p.Partition] = epochAt{p.Epoch, p.Leader, p.HighWatermark}
		}
		state[t.Topic] = m
	}
	return state
}

// ask sends req to node on the probe's connection and returns kfake's
// answer. The control function sleeps meanwhile, so that the cluster serves
// the probe; a nil answer without an error means the cluster is closing.
func (g *EpochGuard) ask(node int32, req *kmsg.OffsetForLeaderEpochRequest) (*kmsg.OffsetForLeaderEpochResponse, error) {
	type result struct {
		resp kmsg.Response
		err  error
	}
	done := make(chan result, 1)
	probe := *req
	probe.ReplicaID = probeReplicaID
	var once sync.Once
	g.c.SleepControl(func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			resp, err := g.probe.Broker(int(node)).Request(ctx, &probe)
			done <- result{resp, err}
		})
	})
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		return r.resp.(*kmsg.OffsetForLeaderEpochResponse), nil
	default:
		return nil, nil
	}
}

func requestedEpoch(req *kmsg.OffsetForLeaderEpochRequest, topic string, partition int32) int32 {
	for _, t := range req.Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition == partition {
				return p.LeaderEpoch
			}
		}
	}
	return -1
}
