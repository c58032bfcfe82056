package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/txn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// selfFenced reports whether a producer fence was raised by the coordinator
// against this instance itself rather than by another incarnation.
//
// Under Kafka 4's transactions (KIP-890, transaction.version 2) the epoch
// moves on every EndTxn and when the coordinator aborts a transaction that
// outlived transaction.timeout.ms. A worker whose EndTxn response was lost
// (a broker restart at the wrong moment) or whose transaction timed out then
// meets PRODUCER_FENCED although nobody replaced it. The group tells the two
// apart: an incarnation that replaced this one took over its static
// group.instance.id, so the group registers a different member id for it.
// If the group still lists this instance with this client's own member id,
// the fence is self-inflicted and the safe reaction is the one for an unknown
// outcome: re-initialise (which fences any stale producer in turn) and resume
// from the committed offsets. The same holds when no member has the instance
// id at all. A different member id, or a failed lookup, is a real fence.
//
// Guessing wrong costs no correctness, only churn: every write is
// transactional, so of two incarnations at most one can commit, and the one
// the group does not know is fenced through the group (FENCED_INSTANCE_ID).
func (w *Worker) selfFenced(ctx context.Context, sess *txn.Session, err error) bool {
	var fe *fencing.FencedError
	if !errors.As(err, &fe) || fe.Reason != fencing.ReasonProducerEpoch || w.cfg.GroupProtocol != "classic" {
		return false
	}
	member := sess.MemberID()
	if member == "" {
		w.log.Info("fence check: this client has no group member id")
		return false
	}
	// A replacement initialises its producer (the fence) before it joins
	// the group, so right after the fence the group may still list this
	// client: on Apache Kafka the zombie then re-initialised and fenced
	// its own replacement. Only a verdict that holds after a grace period
	// long enough for a replacement to join counts as self-inflicted.
	grace := min(3*time.Second, w.cfg.SessionTimeout)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second+grace)
	defer cancel()
	cl, cerr := kgo.NewClient(w.cfg.ClientOpts...)
	if cerr != nil {
		return false
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for look := range 2 {
		if look > 0 {
			select {
			case <-time.After(grace):
			case <-ctx.Done():
				return false
			}
		}
		// This client's member id as of now: it may rejoin during the
		// grace and get a new one, which is still this instance.
		if m := sess.MemberID(); m != "" {
			member = m
		}
		if !w.groupStillListsUs(ctx, adm, member) {
			return false
		}
	}
	return true
}

// groupStillListsUs reports whether the group lists this instance id with
// member, or with no member at all; false on a different member or a
// failed lookup.
func (w *Worker) groupStillListsUs(ctx context.Context, adm *kadm.Client, member string) bool {
	groups, derr := adm.DescribeGroups(ctx, w.cfg.App)
	if derr != nil {
		return false
	}
	g, ok := groups[w.cfg.App]
	if !ok || g.Err != nil {
		return false
	}
	for _, m := range g.Members {
		if m.InstanceID != nil && *m.InstanceID == w.id {
			if m.MemberID != member {
				w.log.Info("fence check: the group registers another member for this instance", "ours", member, "registered", m.MemberID)
			}
			return m.MemberID == member
		}
	}
	// No member holds this instance id: nobody has taken the slot over (a
	// replacement joins the group right after initialising its producer,
	// and would then fence this client through the group in any case).
	// This is what a broker restart that lost the group's members looks
	// like, or this client's own session expiring.
	w.log.Info("fence check: no member holds this instance id", "group_state", g.State, "members", len(g.Members))
	return true
}
