// Package testbroker gives tests a Kafka cluster to run against: the
// embedded broker (package broker, on kfake) by default, or real Apache
// Kafka with EOS_TEST_BROKER=kafka. It is for tests only.
//
// With EOS_TEST_BROKER=kafka, Start hands every test of a test binary one
// shared 3-node cluster started through internal/kafkacluster (or the
// cluster at EOS_TEST_BROKERS=host:port,... when given), emptied of every
// topic and group before each test (kafkacluster.Clear), so each test
// starts as on a fresh embedded broker. EOS_TEST_BROKERS must therefore
// name a throwaway cluster. A test that
// needs a fault on the brokers' side (broker.Config.Faults) or a setting the
// shared cluster lacks gets a cluster of its own. What the embedded broker
// offers and Apache Kafka cannot (kfake options, injected RTT, persistence
// tricks) fails the test with a message saying so: it must get a real-Kafka
// form, never a silent skip.
package testbroker

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/kafkacluster"
)

// Cluster is what tests need of either broker.
type Cluster interface {
	// Addrs are the seed brokers, in node order.
	Addrs() []string
}

// Kind says which broker the tests run against.
type Kind string

const (
	EmbeddedBroker Kind = "embedded" // kfake, in-process
	ApacheKafka    Kind = "kafka"    // Apache Kafka, as processes
)

// FromEnv returns the broker EOS_TEST_BROKER selects; anything other than
// "kafka" (including unset) is the embedded one.
func FromEnv() Kind {
	if strings.EqualFold(os.Getenv("EOS_TEST_BROKER"), "kafka") {
		return ApacheKafka
	}
	return EmbeddedBroker
}

// IsKafka reports whether the tests run against Apache Kafka.
func IsKafka() bool { return FromEnv() == ApacheKafka }

// SharedConfigs are the settings of the shared Apache Kafka test cluster on
// top of the launcher's: long transaction timeouts allowed, for the
// hanging-transaction drills.
var SharedConfigs = map[string]string{
	"transaction.max.timeout.ms": "3600000",
	// The aggregate tests' event times are in 2023 (aggcheck.Input)
	// and a window's result carries its end as its timestamp, so with
	// Kafka's default retention.ms (7 days) the retention check, every 5
	// minutes, deleted output segments between the write and the judge's
	// read: whole partitions' windows missing (1,480 of 8,000 in one CI
	// run). Nothing here tests time-based retention.
	"log.retention.ms": "-1",
}

var shared struct {
	once sync.Once
	c    *kafkacluster.Cluster
	ext  []string // EOS_TEST_BROKERS
	err  error
}

// external is a cluster given by address.
type external []string

func (e external) Addrs() []string { return e }

// Start returns a cluster for t, stopped when t ends (the shared one stays
// until Stop). On the embedded broker it is broker.Start(cfg).
func Start(t testing.TB, cfg broker.Config) Cluster {
	t.Helper()
	if !IsKafka() {
		return Embedded(t, cfg)
	}
	if why := embeddedOnly(cfg); why != "" {
		t.Fatalf("this test asks the broker for %s, which only the embedded broker offers; it needs a real-Kafka form (EOS_TEST_BROKER=kafka)", why)
	}
	if cfg.Faults != nil || !within(cfg.BrokerConfigs, SharedConfigs) {
		return Own(t, kafkacluster.Config{Faults: cfg.Faults, BrokerConfigs: cfg.BrokerConfigs})
	}
	return Shared(t)
}

// Embedded starts the embedded broker whatever EOS_TEST_BROKER says, for a
// test whose fault only kfake can make (a coordinator that forgets its
// transactions, answered through kfake's request control). The test's doc
// comment must say why; RELIABILITY.md lists such faults.
func Embedded(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// Shared returns the test binary's shared Apache Kafka cluster, starting it
// on first use.
func Shared(t testing.TB) Cluster {
	t.Helper()
	shared.once.Do(func() {
		if addrs := os.Getenv("EOS_TEST_BROKERS"); addrs != "" {
			shared.ext = strings.Split(addrs, ",")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.c, shared.err = kafkacluster.Start(ctx, kafkacluster.Config{BrokerConfigs: SharedConfigs, Logf: logf})
	})
	if shared.err != nil {
		t.Fatalf("starting the shared Apache Kafka cluster: %v", shared.err)
	}
	var c Cluster = shared.c
	if shared.ext != nil {
		c = external(shared.ext)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := kafkacluster.Clear(ctx, c.Addrs()); err != nil {
		t.Fatalf("emptying the shared Apache Kafka cluster for this test: %v", err)
	}
	return c
}

// Own starts an Apache Kafka cluster for t alone, stopped when t ends: for
// tests that kill, freeze or cut off brokers, or need other settings.
func Own(t testing.TB, cfg kafkacluster.Config) *kafkacluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	merged := maps.Clone(SharedConfigs)
	maps.Copy(merged, cfg.BrokerConfigs)
	cfg.BrokerConfigs = merged
	c, err := kafkacluster.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("starting an Apache Kafka cluster for this test: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Stop stops the shared cluster, if one was started. TestMain calls it
// after m.Run; the JVMs would die with the test binary anyway, but their
// directory would stay.
func Stop() {
	if shared.c != nil {
		shared.c.Stop()
	}
}

// Main is a TestMain for packages with no other set-up: it runs the tests
// and stops the shared cluster.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// embeddedOnly names what cfg asks for that Apache Kafka cannot give.
func embeddedOnly(cfg broker.Config) string {
	switch {
	case len(cfg.Opts) > 0:
		return "kfake options (SASL, TLS, ACLs or request control)"
	case cfg.RTT > 0:
		return "an injected round-trip time"
	case cfg.DataDir != "":
		return "a data directory to restart from"
	case cfg.Nodes > 3:
		return fmt.Sprintf("%d nodes", cfg.Nodes)
	}
	return ""
}

// within reports whether every setting in want is already in have.
func within(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testbroker: "+format+"\n", args...)
}
