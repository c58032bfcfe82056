package pipeline

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A worker that starts while its transaction coordinator cannot be reached
// (its node just died and the controller has not moved the coordinator
// yet) waits for it instead of exiting: on Apache Kafka both workers of a
// chaos drill started during a node's SIGKILL, ran out of the client's
// own InitProducerId retries and exited 1. Here the broker drops the
// connection of every InitProducerId for a while, and the client gives up
// after one retry; the worker must still start and consume everything.
func TestWorkerStartedWhileItsCoordinatorIsDownWaitsForIt(t *testing.T) {
	const n, keys, retries = 600, 20, 1
	e := newStateEnv(t)
	ks, vs := keyed(n, keys)
	produced := e.produce("st-in", 3, ks, vs)

	down := time.Now().Add(2 * time.Second)
	var refused atomic.Int64
	c := e.b.Cluster()
	c.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl() // this function sees every InitProducerId
		if time.Now().After(down) {
			return nil, nil, false
		}
		refused.Add(1)
		return nil, errors.New("coordinator down"), true
	})

	w := e.worker(&counter{}, func(c *Config) {
		c.ClientOpts = append(slices.Clip(c.ClientOpts), kgo.RequestRetries(retries))
	})
	started := make(chan struct{}, 1)
	w.cfg.OnEvent = func(ev Event) {
		if ev.Kind == EventStarted {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}
	if err := e.run(w, written(produced)); err != nil {
		t.Fatalf("the worker stopped: %v (InitProducerId refused %d times)", err, refused.Load())
	}
	select {
	case <-started:
	default:
		t.Fatal("the worker never started")
	}
	// The client alone gives up after 1+retries attempts: more refusals
	// mean the worker tried again after the client had given up.
	if got := refused.Load(); got <= retries+1 {
		t.Fatalf("InitProducerId was refused %d times; the drill needs more than the client's %d attempts", got, retries+1)
	}
	t.Logf("InitProducerId refused %d times before the worker started", refused.Load())
}
