// Package admin holds the few cluster operations every eos command needs
// before it does its real work: checking that the brokers answer, and
// finding or creating topics.
package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eosctl/eos/fencing"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrUnreachable is wrapped when no broker answers within the timeout.
var ErrUnreachable = errors.New("brokers unreachable")

// ErrNoTopic is wrapped when a topic a command reads from does not exist.
var ErrNoTopic = errors.New("topic does not exist")

// Connect creates a client from opts and waits up to timeout for a broker to
// answer a metadata request, so that a wrong --brokers fails fast with a clear
// message instead of hanging in the client's retry loop.
func Connect(ctx context.Context, timeout time.Duration, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	if err := Ping(ctx, cl, timeout); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// Ping waits up to timeout for the cluster to answer a metadata request.
func Ping(ctx context.Context, cl *kgo.Client, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no broker of %s answered within %s: %w", strings.Join(cl.OptValue(kgo.SeedBrokers).([]string), ","), timeout, ErrUnreachable)
	}
	return fmt.Errorf("connecting to %s: %w", strings.Join(cl.OptValue(kgo.SeedBrokers).([]string), ","), err)
}

// Partitions returns the partition count of topic, wrapping ErrNoTopic if it
// does not exist.
func Partitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describing topic %q: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("topic %q: %w", topic, ErrNoTopic)
	}
	if d.Err != nil {
		return 0, fmt.Errorf("describing topic %q: %w", topic, d.Err)
	}
	return int32(len(d.Partitions)), nil
}

// EnsureTopic creates topic with the given partition count (replication
// factor: the broker's default) unless it exists, and returns its partition
// count and whether it was created. An existing topic is left as it is.
func EnsureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, configs map[string]*string) (int32, bool, error) {
	if err := fencing.ValidateName("topic", topic); err != nil {
		return 0, false, err
	}
	n, err := Partitions(ctx, cl, topic)
	if err == nil {
		return n, false, nil
	}
	if !errors.Is(err, ErrNoTopic) {
		return 0, false, err
	}
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) { // raced with another creator
		n, err := Partitions(ctx, cl, topic)
		return n, false, err
	}
	if err != nil {
		return 0, false, fmt.Errorf("creating topic %q with %d partitions: %w", topic, partitions, err)
	}
	return partitions, true, nil
}
