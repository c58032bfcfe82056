package admin

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A command started right after `eosctl broker &` finds the broker even if
// it listens a second later; nothing listening at all still fails in
// seconds, naming the cause, well before the timeout.
func TestPingWaitsBrieflyForABrokerBeingStarted(t *testing.T) {
	addr := freeAddr(t)
	started := make(chan *broker.Broker, 1)
	go func() {
		time.Sleep(time.Second)
		b, err := broker.Start(broker.Config{Listen: addr})
		if err != nil {
			t.Error(err)
		}
		started <- b
	}()
	cl, err := Connect(context.Background(), 10*time.Second, kgo.SeedBrokers(addr))
	if b := <-started; b != nil {
		defer b.Close()
	}
	if err != nil {
		t.Fatalf("a broker listening 1s after the command: %v", err)
	}
	cl.Close()

	start := time.Now()
	_, err = Connect(context.Background(), 10*time.Second, kgo.SeedBrokers(freeAddr(t)))
	if err == nil || !strings.Contains(err.Error(), "nothing listens there") {
		t.Fatalf("nothing listening: %v, want the cause named", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("nothing listening took %s to fail, want about %s (the start grace), not the 10s timeout", d, startGrace)
	}
}

// A listener with SASL that does not enable the client's mechanism answers
// SaslHandshake with UNSUPPORTED_SASL_MECHANISM; Ping says so instead of
// blaming the user or password, which it never got to.
func TestPingNamesAnUnsupportedSASLMechanism(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.ControlKey(int16(kmsg.SASLHandshake), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		resp := kreq.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		resp.SupportedMechanisms = []string{"SCRAM-SHA-512"}
		return resp, nil, true
	})
	start := time.Now()
	_, err = Connect(context.Background(), 5*time.Second, kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(plain.Auth{User: "admin", Pass: "pw"}.AsMechanism()))
	if err == nil || !strings.Contains(err.Error(), "the broker does not enable this SASL mechanism") || strings.Contains(err.Error(), "password") {
		t.Fatalf("a mechanism the broker does not enable: %v, want it named as such", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Fatalf("took %s, want within the 5s timeout", d)
	}
	t.Log(err)
}
