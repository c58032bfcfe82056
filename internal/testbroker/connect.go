package testbroker

import (
	"context"
	"testing"
	"time"

	"github.com/eosctl/eos/internal/admin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Conn is a test's connection to a cluster: the options its clients start
// from (the seed brokers, then any TLS or SASL options), a client for
// setting up and checking, and a context bounding the test. Connect
// releases them when the test ends, before the cluster stops.
type Conn struct {
	Opts   []kgo.Opt
	Client *kgo.Client
	Ctx    context.Context
}

// Connect connects to c, waiting up to 10s for it to answer (a failure ends
// the test), with opts after the seed brokers. Ctx ends after bound, which
// is a bound, not a target: Apache Kafka on a busy 2-core machine is slower
// than the embedded broker.
func Connect(t testing.TB, c Cluster, bound time.Duration, opts ...kgo.Opt) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	all := append([]kgo.Opt{kgo.SeedBrokers(c.Addrs()...)}, opts...)
	cl, err := admin.Connect(ctx, 10*time.Second, all...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); cancel() })
	return &Conn{Opts: all, Client: cl, Ctx: ctx}
}
