package kafkacluster

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Clear deletes every topic and consumer group of the cluster at addrs
// (Kafka's internal topics stay) and waits until the topics are gone, so
// that tests sharing one cluster each start from an empty one, as they
// would on a fresh embedded broker. It destroys data: point it only at a
// throwaway cluster.
//
// opts are further client options (TLS, SASL) for a secured cluster.
func Clear(ctx context.Context, addrs []string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("kafkacluster: listing groups to clear: %w", err)
	}
	if len(groups) > 0 {
		if _, err := adm.DeleteGroups(ctx, groups.Groups()...); err != nil {
			return fmt.Errorf("kafkacluster: deleting groups: %w", err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return fmt.Errorf("kafkacluster: listing topics to clear: %w", err)
		}
		if len(topics) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kafkacluster: topics %v still exist a minute after their deletion", topics.Names())
		}
		adm.DeleteTopics(ctx, topics.Names()...)
		time.Sleep(300 * time.Millisecond)
	}
}
