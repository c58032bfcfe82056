package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the benchmark needs of the embedded broker's injected RTT: every
// response comes back one RTT after the request, and responses pipelined on
// one connection do not queue behind each other's delay, so the RTT adds
// latency to each round trip without capping the request rate (bandwidth).
func TestInjectedRTTDelaysEachResponseWithoutSerialisingThem(t *testing.T) {
	const rtt = 50 * time.Millisecond
	b, err := broker.Start(broker.Config{RTT: rtt})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < rtt {
		t.Fatalf("a round trip took %s, less than the injected %s", d, rtt)
	}
	const n = 20
	var wg sync.WaitGroup
	start = time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// Serialised, 20 round trips would take a second; pipelined, about one.
	if d := time.Since(start); d > 5*rtt {
		t.Fatalf("%d concurrent round trips took %s: the injected RTT serialises responses (want about %s)", n, d, rtt)
	}
}
