// Package broker runs the embedded Kafka-protocol cluster that eos uses by
// default, for trying eos, for tests and for benchmarks: franz-go's kfake,
// listening on real TCP ports, optionally persisted to a directory so that
// topics, committed offsets and transaction state survive a restart.
//
// The embedded cluster is a convenience for trying eos and for its tests. It
// speaks the same protocol as Apache Kafka, so everything that works against
// it is expected to work against a real cluster named as the brokers; what it
// does not have is replication across machines, so it proves nothing about
// durability when a disk dies.
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Config describes an embedded cluster. The zero value is usable: one node on
// a random loopback port, in memory, with no injected latency.
type Config struct {
	// Listen is host:port of the first node; node i listens on port+i.
	// A port of 0 picks random free ports. Empty means 127.0.0.1:0.
	Listen string

	// Nodes is the number of brokers; 0 means 1.
	Nodes int

	// DataDir persists the cluster's state; empty keeps it in memory.
	DataDir string
	// SyncWrites fsyncs every write to DataDir. Without it, a broker killed
	// with SIGKILL can lose its most recent writes, as a single Kafka
	// broker without replication can.
	SyncWrites bool

	// RTT is a round-trip time injected on every connection: each response
	// is held back by RTT before it is written, without slowing the bytes
	// themselves. Loopback round trips are microseconds, which hides the
	// per-transaction cost that eos exists to minimise; an RTT makes the
	// embedded cluster behave like a network.
	RTT time.Duration

	// MinSessionTimeout lowers the smallest group session timeout the
	// brokers accept (Kafka's group.min.session.timeout.ms, 6s by default),
	// so that tests and demos can expire members quickly. 0 keeps 6s.
	MinSessionTimeout time.Duration

	// BrokerConfigs are passed through as broker-level configs, for example
	// transaction.max.timeout.ms.
	BrokerConfigs map[string]string

	// Logger receives the cluster's own warnings and errors; nil discards.
	Logger *slog.Logger

	// RawLeaderEpochs leaves OffsetForLeaderEpoch to kfake alone, defect
	// included, on a cluster of several nodes (see EpochGuard). Tests that
	// show the defect set it.
	RawLeaderEpochs bool

	// RawCrashRecovery leaves the recovery of a DataDir after a crash to
	// kfake alone, defect included: no ABORT markers for the transactions
	// the crash interrupted (see recover.go). Tests that show the defect
	// set it.
	RawCrashRecovery bool

	// Faults, if set, can break connections right after the broker has
	// handled a request (see Faults). Tests use it.
	Faults *Faults

	// Opts are further kfake options, applied last (fault injection, SASL,
	// TLS and ACLs in tests).
	Opts []kfake.Opt
}

func (cfg Config) logger() *slog.Logger {
	if cfg.Logger != nil {
		return cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Broker is a running embedded cluster.
type Broker struct {
	c     *kfake.Cluster
	cfg   Config
	guard *EpochGuard // nil on one node or with RawLeaderEpochs
	lock  *dirLock    // nil without a data directory
}

// Start's errors about the configuration itself (a malformed listen
// address, a node count out of range) are *eos.ConfigError: bad input
// rather than a failure to start.

// Start starts the cluster and returns once every node is listening.
func Start(cfg Config) (*Broker, error) {
	host, port, err := splitListen(cfg.Listen)
	if err != nil {
		return nil, err
	}
	nodes := cfg.Nodes
	if nodes == 0 {
		nodes = 1
	}
	if nodes < 0 || nodes > 16 {
		return nil, eos.BadConfig("broker.Config.Nodes", "must be between 1 and 16, got %d", nodes)
	}
	if cfg.RTT < 0 {
		return nil, eos.BadConfig("broker.Config.RTT", "must not be negative, got %s", cfg.RTT)
	}

	ports := make([]int, nodes)
	if port != 0 {
		for i := range ports {
			ports[i] = port + i
		}
	}
	opts := []kfake.Opt{
		kfake.Ports(ports...),
		kfake.ClusterID("eos-embedded"),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(addr)
			ln, err := net.Listen(network, net.JoinHostPort(host, p))
			if err != nil {
				return nil, fmt.Errorf("broker: listening on %s: %w", net.JoinHostPort(host, p), err)
			}
			return &wrapListener{Listener: ln, rtt: cfg.RTT, faults: cfg.Faults}, nil
		}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
		if cfg.SyncWrites {
			opts = append(opts, kfake.SyncWrites())
		}
	}
	if cfg.MinSessionTimeout > 0 {
		opts = append(opts, kfake.GroupMinSessionTimeout(cfg.MinSessionTimeout))
	}
	if len(cfg.BrokerConfigs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(cfg.BrokerConfigs))
	}
	if cfg.Logger != nil {
		opts = append(opts, kfake.WithLogger(slogLogger{cfg.Logger}))
	}
	opts = append(opts, cfg.Opts...)

	var lock *dirLock
	if cfg.DataDir != "" {
		if lock, err = lockDataDir(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	if cfg.DataDir != "" && !cfg.RawCrashRecovery {
		if err := recoverInterrupted(cfg, nodes, cfg.logger()); err != nil {
			lock.release(true)
			return nil, fmt.Errorf("broker: recovering transactions interrupted by a crash in %s: %w", cfg.DataDir, err)
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		lock.release(true)
		return nil, fmt.Errorf("broker: starting embedded cluster: %w", err)
	}
	b := &Broker{c: c, cfg: cfg, lock: lock}
	if nodes > 1 && !cfg.RawLeaderEpochs {
		if b.guard, err = newEpochGuard(c); err != nil {
			c.Close()
			lock.release(true)
			return nil, fmt.Errorf("broker: %w", err)
		}
	}
	return b, nil
}

// EpochGuard returns the guard that corrects OffsetForLeaderEpoch answers
// after leader moves, or nil if the cluster has none.
func (b *Broker) EpochGuard() *EpochGuard { return b.guard }

// Addrs returns the host:port of every node, in node order.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Cluster exposes the underlying kfake cluster for fault injection
// (Control, Fault, MoveTopicPartition, ...). Tests use it; production code
// should not need it.
func (b *Broker) Cluster() *kfake.Cluster { return b.c }

// RTT returns the injected round-trip time.
func (b *Broker) RTT() time.Duration { return b.cfg.RTT }

// Close stops the cluster. With a DataDir it first writes the state to disk,
// so a later Start on the same directory resumes where this one stopped.
func (b *Broker) Close() {
	b.c.Close()
	if b.guard != nil {
		b.guard.close()
	}
	b.lock.release(false) // after the state is written
}

// FreeAddr returns a loopback host:port that nothing listens on right now,
// for a broker (or a metrics endpoint) that must be restarted on the same
// address. Another process may take it first; the caller's listen fails
// then.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func splitListen(listen string) (host string, port int, err error) {
	if listen == "" {
		return "127.0.0.1", 0, nil
	}
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, eos.BadConfig("broker.Config.Listen", "%q is not host:port: %w", listen, err)
	}
	if h == "" {
		h = "127.0.0.1"
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, eos.BadConfig("broker.Config.Listen", "%q has an invalid port", listen)
	}
	return h, port, nil
}

// slogLogger adapts slog to kfake's logger. Only warnings and errors are
// forwarded: kfake's info level logs every request.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		s.l.Error(fmt.Sprintf(msg, args...), "component", "broker")
	case kfake.LogLevelWarn:
		s.l.Warn(fmt.Sprintf(msg, args...), "component", "broker")
	}
}

var errClosed = errors.New("broker: connection closed")
