// Package admin holds the few cluster operations every eos command needs
// before it does its real work: checking that the brokers answer, and
// finding or creating topics.
package admin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrUnreachable is eos.ErrUnreachable, wrapped when no broker answers
// within the timeout.
var ErrUnreachable = eos.ErrUnreachable

// ErrNoTopic is eos.ErrNoTopic, wrapped when a topic a command reads from
// does not exist.
var ErrNoTopic = eos.ErrNoTopic

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

// startGrace is how long Ping retries refused connections: a broker being
// started next to the command.
const startGrace = 3 * time.Second

// Ping waits up to timeout for the cluster to answer a metadata request.
// Its error names the likely cause (see [explain]): nothing listening, a
// listener that never answers, a TLS mismatch, SASL on one side only, or
// rejected credentials. It returns within timeout: if the cluster is slow
// to answer, it asks the first seed broker directly at the same time,
// rather than after the wait.
func Ping(ctx context.Context, cl *kgo.Client, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	pctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// A broker started a moment ago (`eosctl broker &` and the next
		// command) may not listen yet: a refused connection counts only
		// after startGrace, so a wrong port still fails in seconds.
		grace := time.Now().Add(min(startGrace, timeout/2))
		for {
			_, err := kadm.NewClient(cl).BrokerMetadata(pctx)
			if err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(grace) && pctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			done <- err
			return
		}
	}()
	var err error
	var probed <-chan probeResult
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
	case <-time.After(timeout / 2):
		probed = startProbe(cl, deadline)
		if err = <-done; err == nil {
			return nil
		}
	}
	seeds := strings.Join(cl.OptValue(kgo.SeedBrokers).([]string), ",")
	if ctx.Err() != nil {
		return fmt.Errorf("cannot reach brokers %s: %w", seeds, ctx.Err())
	}
	if probed == nil {
		probed = startProbe(cl, deadline)
	}
	return &unreachableError{msg: "cannot reach brokers " + seeds + ": " + explain(cl, err, <-probed, timeout), err: err}
}

// Partitions returns the partition count of topic once every partition has
// a leader, wrapping ErrNoTopic if the topic does not exist. It issues its
// own metadata request rather than kadm.ListTopics, whose answers kgo caches
// for MetadataMinAge (5s by default): a cached "unknown topic" from before a
// create would otherwise stall whoever waits for the new topic.
func Partitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("describing topic %q: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return 0, fmt.Errorf("topic %q: %w", topic, ErrNoTopic)
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return 0, fmt.Errorf("topic %q: %w", topic, ErrNoTopic)
		}
		return 0, fmt.Errorf("describing topic %q: %w", topic, err)
	}
	if len(t.Partitions) == 0 {
		return 0, fmt.Errorf("topic %q has no partitions yet: %w", topic, kerr.LeaderNotAvailable)
	}
	for _, p := range t.Partitions {
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return 0, fmt.Errorf("topic %q partition %d: %w", topic, p.Partition, err)
		}
		if p.Leader < 0 {
			return 0, fmt.Errorf("topic %q partition %d has no leader: %w", topic, p.Partition, kerr.LeaderNotAvailable)
		}
	}
	return int32(len(t.Partitions)), nil
}

// EnsureTopic creates topic with the given partition count (replication
// factor: the broker's default) unless it exists, waits until every
// partition has a leader that serves it, and returns the partition count
// and whether it created the topic. An existing topic is used as it is.
func EnsureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, configs map[string]*string) (int32, bool, error) {
	if err := fencing.ValidateName("topic", topic); err != nil {
		return 0, false, err
	}
	n, err := Partitions(ctx, cl, topic)
	switch {
	case err == nil:
		return n, false, nil
	case !errors.Is(err, ErrNoTopic):
		return 0, false, err
	}
	created := false
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		created = true
	case errors.Is(err, kerr.TopicAlreadyExists): // lost a race; use theirs
	default:
		return 0, false, fmt.Errorf("creating topic %q with %d partitions: %w", topic, partitions, err)
	}
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if n, err = Partitions(ctx, cl, topic); err == nil {
			err = servedByLeaders(ctx, cl, topic)
		}
		if err == nil {
			return n, created, nil
		}
		select {
		case <-ctx.Done():
			return 0, created, fmt.Errorf("waiting for topic %q to become ready: %w (last error: %w)", topic, ctx.Err(), err)
		case <-time.After(backoff):
		}
	}
}

// servedByLeaders lists the end offsets of every partition of topic: on a
// cluster, the broker that answered metadata can name a partition's leader
// before that leader has loaded the partition, and a request to it (the
// first produce, a listing) is then answered UNKNOWN_TOPIC_OR_PARTITION
// for a moment. EnsureTopic waits that moment out.
func servedByLeaders(ctx context.Context, cl *kgo.Client, topic string) error {
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the offsets of topic %q: %w", topic, err)
	}
	return nil
}

// WaitOngoing polls the transaction coordinator until transactionalID has an
// open transaction, for at most within, and reports whether it saw one. The
// fault drills use it to make sure a kill lands mid-transaction.
func WaitOngoing(ctx context.Context, cl *kgo.Client, transactionalID string, within time.Duration) bool {
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		d, err := adm.DescribeTransactions(ctx, transactionalID)
		if t, ok := d[transactionalID]; err == nil && ok && t.Err == nil && t.State == "Ongoing" {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// TopicConfigs returns the values of the named configs of topic as the
// broker reports them (set on the topic or inherited from the broker's
// defaults). A config the broker does not report is absent from the map.
func TopicConfigs(ctx context.Context, cl *kgo.Client, topic string, names ...string) (map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = topic
	rr.ConfigNames = names
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("describing the configs of topic %q: %w", topic, err)
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("describing the configs of topic %q: %d resources in the answer", topic, len(resp.Resources))
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return nil, fmt.Errorf("describing the configs of topic %q: %w", topic, err)
	}
	out := make(map[string]string, len(r.Configs))
	for _, c := range r.Configs {
		if c.Value != nil {
			out[c.Name] = *c.Value
		}
	}
	return out, nil
}

// DeleteTopics deletes topics and waits until no broker's metadata lists any
// of them. Kafka deletes a topic asynchronously: the controller accepts the
// request at once, and each broker drops the topic from its metadata when it
// applies the change, so a listing sent right after the deletion can still
// name it. A command that promises to leave nothing behind (eosctl bench on
// someone's cluster) must not exit before that. A topic that does not exist
// counts as deleted. The error names every topic that could not be deleted.
func DeleteTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	resps, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("deleting topics %s: %w", strings.Join(topics, ", "), err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("deleting topic %q: %w", r.Topic, r.Err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for backoff := 20 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		left, err := listedByAnyBroker(ctx, cl, topics)
		if err == nil && len(left) == 0 {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("still listed: %s", strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the deletion of topics %s: %w (last: %w)", strings.Join(topics, ", "), ctx.Err(), err)
		case <-time.After(backoff):
		}
	}
}

// listedByAnyBroker asks every known broker for the metadata of topics and
// returns those that at least one broker still lists.
func listedByAnyBroker(ctx context.Context, cl *kgo.Client, topics []string) ([]string, error) {
	meta, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		return nil, err
	}
	still := map[string]bool{}
	for _, b := range meta.Brokers {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = false
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return nil, fmt.Errorf("asking broker %d for metadata: %w", b.NodeID, err)
		}
		for _, t := range resp.Topics {
			if t.Topic != nil && t.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				still[*t.Topic] = true
			}
		}
	}
	var left []string
	for _, t := range topics {
		if still[t] {
			left = append(left, t)
		}
	}
	return left, nil
}
