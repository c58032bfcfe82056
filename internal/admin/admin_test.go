package admin

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
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

// Kafka deletes topics asynchronously: a broker can list a deleted topic
// for a while after the controller accepted the deletion. DeleteTopics
// returns only once no broker lists any of them, so that a command that
// cleans up after itself (eosctl bench) leaves nothing a listing can see.
// A topic that never existed counts as deleted; one the cluster refuses to
// delete is named in the error.
func TestDeleteTopicsReturnsOnceNoBrokerListsThem(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(2, "a", "b", "keep"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// After the deletion, one broker still lists "a" in its next 5
	// metadata answers.
	var deleted atomic.Bool
	var stale atomic.Int32
	stale.Store(5)
	c.ControlKey(int16(kmsg.DeleteTopics), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		deleted.Store(true)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !deleted.Load() || c.CurrentNode() != 1 || stale.Load() <= 0 {
			return nil, nil, false
		}
		req := kreq.(*kmsg.MetadataRequest)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, rt := range req.Topics {
			if rt.Topic != nil && *rt.Topic == "a" {
				stale.Add(-1)
				st := kmsg.NewMetadataResponseTopic()
				st.Topic = kmsg.StringPtr("a")
				resp.Topics = append(resp.Topics, st)
			}
		}
		return resp, nil, true
	})
	if err := DeleteTopics(ctx, cl, "a", "b", "never-existed"); err != nil {
		t.Fatalf("deleting a, b and a topic that never existed: %v", err)
	}
	if n := stale.Load(); n > 0 {
		t.Fatalf("DeleteTopics returned while broker 1 would still list topic a %d more times", n)
	}

	c.ControlKey(int16(kmsg.DeleteTopics), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.DeleteTopicsRequest)
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDeleteTopicsResponseTopic()
			st.Topic = rt.Topic
			st.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	err = DeleteTopics(ctx, cl, "keep")
	if err == nil || !strings.Contains(err.Error(), `"keep"`) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("a refused deletion: %v, want an error naming topic keep and TOPIC_AUTHORIZATION_FAILED", err)
	}
}
