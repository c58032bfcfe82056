package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// PartitionLag is one partition of a group's lag, in the columns of
// `eosctl lag`.
type PartitionLag struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, or -1 if it has none.
	Committed int64 `json:"committed"`
	LSO       int64 `json:"last_stable_offset"`
	HWM       int64 `json:"high_watermark"`
	// Lag is LSO minus the committed offset (minus the log start offset if
	// nothing is committed): what the group could read but has not
	// committed yet. Never negative.
	Lag int64 `json:"lag"`
	// Unstable is HWM minus LSO: offsets nobody reading read_committed can
	// see yet, because a transaction is open or hanging on the partition.
	Unstable int64 `json:"unstable"`
	// Member is the group member the partition is assigned to (its
	// group.instance.id if static, else its member id), or "" if none.
	Member string `json:"member,omitempty"`
}

// GroupLag is a consumer group's lag on every partition of the topics it
// has committed offsets for (or of the topics asked for).
type GroupLag struct {
	Group string `json:"group"`
	// State is the group's state (Stable, Empty, ...), or "" if it could
	// not be described.
	State      string         `json:"state,omitempty"`
	Members    int            `json:"members"`
	Partitions []PartitionLag `json:"partitions"`
	TotalLag   int64          `json:"total_lag"`
	// TotalUnstable sums Unstable over the partitions.
	TotalUnstable int64     `json:"total_unstable"`
	At            time.Time `json:"time"`
}

// ErrNoCommits is wrapped when a group has committed nothing and no topics
// were named, so there is nothing to measure its lag against.
var ErrNoCommits = errors.New("group has no committed offsets")

// Lag measures group's lag against the last stable offset. With no topics
// it covers every topic the group has committed offsets for; a named topic
// that does not exist is an error wrapping eos.ErrNoTopic. The group's
// offsets are fetched after the partition offsets, so Lag is never
// understated by a commit that lands in between.
//
// A retriable error (COORDINATOR_NOT_AVAILABLE while a cluster that just
// started creates __consumer_offsets, a leader moving) is retried until ctx
// ends; one that lasts that long is returned with what it means.
func Lag(ctx context.Context, adm *kadm.Client, group string, topics ...string) (*GroupLag, error) {
	var refused error // the last retriable error an attempt returned
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		gl, err := lagOnce(ctx, adm, group, topics...)
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) { // an attempt ctx's end cut short
			return nil, ended(ctx.Err(), err, refused)
		}
		// A missing topic is retriable to Kafka (it may be being
		// created) and final to the user, who named it.
		if err == nil || !kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, eos.ErrNoTopic) {
			return gl, err
		}
		refused = err
		select {
		case <-ctx.Done():
			return nil, ended(ctx.Err(), err, refused)
		case <-time.After(backoff):
		}
	}
}

// ended says what it means that Lag's ctx ended (cause: ctx.Err()) with
// err the last attempt's error and refused the last retriable error an
// attempt returned. A cancel (Ctrl-C) is not a wait that ran out: it is
// returned as the cancel, with the cluster's last answer if it was not
// the cancel itself. A deadline is explained. The client retries a
// coordinator's refusals itself, so a refusal reaches Lag only when the
// client gives up; when the deadline ends while a request is in flight,
// the client returns ctx's error and whatever the broker said before is
// lost. The last refusal Lag saw is named if there was one; otherwise the
// error says only what is known: nothing answered in time.
func ended(cause, err, refused error) error {
	switch {
	case !errors.Is(cause, context.DeadlineExceeded) && errors.Is(err, cause):
		return err
	case !errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%w (the cluster's last answer: %w)", cause, err)
	case refused != nil:
		return retriableMeaning(refused)
	}
	return fmt.Errorf("no answer within the timeout: the group coordinator may not be available yet (a cluster that has just started is still creating __consumer_offsets or electing its leaders), or a broker is down or overloaded; try again in a moment: %w", err)
}

// retriableMeaning says what a retriable error that outlasted the caller's
// wait means.
func retriableMeaning(err error) error {
	switch {
	case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.NotCoordinator):
		return fmt.Errorf("the group coordinator was not available within the timeout: a cluster that has just started is still creating __consumer_offsets or electing its leaders, or a broker is down; try again in a moment: %w", err)
	}
	return fmt.Errorf("the cluster kept answering with a retriable error until the timeout (a leader moving, a broker restarting); try again in a moment: %w", err)
}

func lagOnce(ctx context.Context, adm *kadm.Client, group string, topics ...string) (*GroupLag, error) {
	if len(topics) == 0 {
		committed, err := adm.FetchOffsets(ctx, group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			committed, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
		}
		for t := range committed {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		if len(topics) == 0 {
			return nil, fmt.Errorf("group %q: %w; name the topics to measure", group, ErrNoCommits)
		}
	}
	offs, err := ReadOffsets(ctx, adm, topics...)
	if err != nil {
		return nil, err
	}
	committed, err := adm.FetchOffsetsForTopics(ctx, group, topics...)
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}
	gl := &GroupLag{Group: group, At: time.Now()}
	members := describeMembers(ctx, adm, gl)
	for _, o := range offs.Sorted() {
		c := int64(-1)
		if r, ok := committed.Lookup(o.Topic, o.Partition); ok && r.Err == nil && r.At >= 0 {
			c = r.At
		}
		pl := PartitionLag{
			Topic: o.Topic, Partition: o.Partition, Committed: c,
			LSO: o.LSO, HWM: o.HWM, Lag: LagOf(o, c), Unstable: o.Unstable(),
			Member: members[o.Topic][o.Partition],
		}
		gl.Partitions = append(gl.Partitions, pl)
		gl.TotalLag += pl.Lag
		gl.TotalUnstable += pl.Unstable
	}
	return gl, nil
}

// LagOf is LSO minus the committed offset (-1: none), counting from the log
// start when nothing is committed; 0 if the commit is past the LSO (a
// read_uncommitted group can commit there).
func LagOf(o PartitionOffsets, committed int64) int64 {
	from := committed
	if from < 0 {
		from = o.Start
	}
	return max(o.LSO-from, 0)
}

// describeMembers fills gl's state and member count and returns who owns
// which partition. It is best effort: a group that cannot be described
// (not a consumer-protocol group, not authorized) just has no members.
func describeMembers(ctx context.Context, adm *kadm.Client, gl *GroupLag) map[string]map[int32]string {
	out := map[string]map[int32]string{}
	ds, err := adm.DescribeGroups(ctx, gl.Group)
	if err != nil {
		return out
	}
	d, ok := ds[gl.Group]
	if !ok || d.Err != nil {
		if ok && errors.Is(d.Err, kerr.GroupIDNotFound) {
			gl.State = "Dead"
		}
		return out
	}
	gl.State, gl.Members = d.State, len(d.Members)
	for _, m := range d.Members {
		name := m.MemberID
		if m.InstanceID != nil && *m.InstanceID != "" {
			name = *m.InstanceID
		}
		ca, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, t := range ca.Topics {
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]string{}
			}
			for _, p := range t.Partitions {
				out[t.Topic][p] = name
			}
		}
	}
	return out
}

// FormatPartitions renders partitions by topic as "t[0,1] u[3]", sorted, or
// "-" when there are none.
func FormatPartitions(parts map[string][]int32) string {
	if len(parts) == 0 {
		return "-"
	}
	set := kadm.TopicsSet{}
	for t, ps := range parts {
		set.Add(t, ps...)
	}
	return partitionsString(set)
}

// partitionsString renders the partitions of topics for error messages.
func partitionsString(ts kadm.TopicsSet) string {
	var parts []string
	for _, t := range ts.Sorted() {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = fmt.Sprint(p)
		}
		parts = append(parts, fmt.Sprintf("%s[%s]", t.Topic, strings.Join(s, ",")))
	}
	return strings.Join(parts, " ")
}
