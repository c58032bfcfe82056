package inspect

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinatorNotAvailable makes the embedded broker answer the next n
// OffsetFetch requests (all of them if n < 0) with COORDINATOR_NOT_AVAILABLE,
// as Apache Kafka does right after a cluster starts, while __consumer_offsets
// is being created, and counts the refusals.
func coordinatorNotAvailable(b *broker.Broker, n int64) *atomic.Int64 {
	var refused atomic.Int64
	b.Cluster().ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if n >= 0 && refused.Load() >= n {
			return nil, nil, false
		}
		b.Cluster().KeepControl()
		refused.Add(1)
		r := req.(*kmsg.OffsetFetchRequest)
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	return &refused
}

// Lag waits out a group coordinator that is not available yet, rather than
// failing with the raw error the first time (eosctl lag right after
// scripts/kafka started the cluster), and when it stays unavailable past
// ctx's deadline, says what that means. Embedded only: Apache Kafka's
// coordinator cannot be held unavailable on demand.
func TestLagWaitsForTheGroupCoordinator(t *testing.T) {
	b := testbroker.Embedded(t, broker.Config{})
	c := newClusterOn(t, b)
	c.topic(t, "in", 1)
	c.produce(t, "in", 0, 5)
	commit(t, c, "g", "in", 0, 2)

	refused := coordinatorNotAvailable(b, 3)
	gl, err := Lag(c.ctx, c.adm, "g")
	if err != nil || len(gl.Partitions) != 1 || gl.TotalLag != 3 || refused.Load() != 3 {
		t.Fatalf("Lag = %+v, %v after %d refusals; want a lag of 3 once the coordinator answers", gl, err, refused.Load())
	}

	coordinatorNotAvailable(b, -1)
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	defer cancel()
	_, err = Lag(ctx, c.adm, "g")
	if err == nil || !strings.Contains(err.Error(), "the group coordinator was not available within the timeout") || !strings.Contains(err.Error(), "COORDINATOR_NOT_AVAILABLE") {
		t.Fatalf("Lag with the coordinator never available: %v; want an error saying what COORDINATOR_NOT_AVAILABLE means", err)
	}
}
