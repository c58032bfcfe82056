package pipeline

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A restore that meets a changelog partition without a leader (its node
// just died and the controller has not elected another yet) waits for the
// election instead of failing: on Apache Kafka each failure made the worker
// re-initialise its producer and restore again, every few hundred
// milliseconds until the election (20 times in one chaos drill). The broker
// here answers every ListOffsets of the changelog with
// NOT_LEADER_OR_FOLLOWER for a while; the second worker must restore the
// first one's state exactly, without a re-initialisation.
func TestRestoreWaitsOutAChangelogLeaderElection(t *testing.T) {
	const n, keys = 3000, 30
	e := newStateEnv(t)
	ks, vs := keyed(n, keys)
	produced := e.produce("st-in", 3, ks, vs)
	a := e.worker(&counter{}, nil)
	la := &lastCommitted{w: a}
	a.cfg.OnEvent = la.hook
	if err := e.run(a, written(produced)); err != nil {
		t.Fatal(err)
	}

	const leaderless = 1500 * time.Millisecond
	var refused atomic.Int64
	var until atomic.Int64 // unix nanos; 0: not armed
	c := e.b.Cluster()
	c.ControlKey(kmsg.ListOffsets.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl() // this function answers every ListOffsets
		req := kreq.(*kmsg.ListOffsetsRequest)
		if u := until.Load(); u == 0 || time.Now().UnixNano() > u {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		hit := false
		for _, rt := range req.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				if rt.Topic == "st-counts-changelog" {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
					hit = true
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !hit {
			return nil, nil, false
		}
		refused.Add(1)
		return nil, errors.New("leader lost"), true
	})

	b := e.worker(&counter{}, nil)
	restored := restoredState(b)
	until.Store(time.Now().Add(leaderless).UnixNano())
	deadline := time.Now().Add(30 * time.Second)
	if err := e.run(b, func() bool { return len(restored()) == 3 || time.Now().After(deadline) }); err != nil {
		t.Fatal(err)
	}
	if len(restored()) != 3 {
		t.Fatalf("the worker restored %d of 3 partitions within 30s (%d re-initialisations)", len(restored()), b.stats.Reinits.Load())
	}
	if refused.Load() == 0 {
		t.Fatal("no ListOffsets of the changelog was refused: the test proved nothing")
	}
	if got := b.stats.Reinits.Load(); got != 0 {
		t.Fatalf("the worker re-initialised %d time(s) while the changelog had no leader, want 0: the restore must wait for the election", got)
	}
	if !sameState(restored(), la.get()) {
		t.Fatalf("restored state differs from the state last committed:\nrestored  %v\ncommitted %v", restored(), la.get())
	}
	t.Logf("%d ListOffsets of the changelog refused over %s; restored %d partitions, 0 re-initialisations", refused.Load(), leaderless, len(restored()))
}
