package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/txn"
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
// id at all. A different member id is a real fence. A look that cannot tell
// is taken again until the check's deadline, when the fence counts as real.
//
// Guessing wrong costs no correctness, only churn: every write is
// transactional, so of two incarnations at most one can commit, and the one
// the group does not know is fenced through the group (FENCED_INSTANCE_ID).
func (w *Worker) selfFenced(ctx context.Context, sess *txn.Session, err error) bool {
	var fe *fencing.FencedError
	if !errors.As(err, &fe) || fe.Reason != fencing.ReasonProducerEpoch || w.cfg.GroupProtocol != "classic" {
		return false
	}
	// A replacement initialises its producer (the fence) before it joins
	// the group, so right after the fence the group may still list this
	// client: on Apache Kafka the zombie then re-initialised and fenced
	// its own replacement. Only a verdict that holds over a grace period
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
	// A look that cannot tell (the lookup failed, or this client is
	// between a lost membership and its rejoin, with no member id) is
	// taken again: the fences that need this check come with broker
	// restarts and leader moves, when both are common, and taking them
	// for a real fence stopped workers nobody had replaced.
	var first time.Time       // when the group first listed this instance as us
	held := map[string]bool{} // the member ids this client has held during the check
	for {
		if m := sess.MemberID(); m != "" {
			held[m] = true
		}
		switch w.groupListsUs(ctx, adm, sess.MemberID(), held) {
		case lookOther:
			return false
		case lookUs:
			if first.IsZero() {
				first = time.Now()
			} else if time.Since(first) >= grace {
				return true
			}
		}
		select {
		case <-time.After(min(250*time.Millisecond, grace)):
		case <-ctx.Done():
			w.log.Warn("fence check: no verdict in time; taking the fence for a replacement", "grace", grace)
			return false
		}
	}
}

// look is what one look at the group says of this instance.
type look int

const (
	lookUnknown look = iota // the lookup failed, or this client has no member id
	lookUs                  // the group lists this instance with this client's member id, or nobody
	lookOther               // the group lists this instance with another member id
)

// groupListsUs looks at the group once. member is this client's member id
// as of now ("" if it has none) and held every id it has held during the
// check: a client may rejoin meanwhile and get a new one, which is still
// this instance, and a group restored by a restarted broker may list an
// earlier one.
func (w *Worker) groupListsUs(ctx context.Context, adm *kadm.Client, member string, held map[string]bool) look {
	groups, derr := adm.DescribeGroups(ctx, w.cfg.App)
	if derr != nil {
		w.log.Info("fence check: describing the group failed; looking again", "err", derr)
		return lookUnknown
	}
	g, ok := groups[w.cfg.App]
	if !ok || g.Err != nil {
		w.log.Info("fence check: describing the group failed; looking again", "err", g.Err)
		return lookUnknown
	}
	for _, m := range g.Members {
		if m.InstanceID != nil && *m.InstanceID == w.id {
			switch {
			case held[m.MemberID]:
				return lookUs
			case member == "":
				w.log.Info("fence check: this client is rejoining (no member id), and the group lists another for this instance; looking again", "registered", m.MemberID)
				return lookUnknown
			}
			w.log.Warn("fence check: the group registers another member for this instance", "ours", member, "registered", m.MemberID)
			return lookOther
		}
	}
	// No member holds this instance id: nobody has taken the slot over (a
	// replacement joins the group right after initialising its producer,
	// and would then fence this client through the group in any case).
	// This is what a broker restart that lost the group's members looks
	// like, or this client's own session expiring.
	w.log.Info("fence check: no member holds this instance id", "group_state", g.State, "members", len(g.Members))
	return lookUs
}
