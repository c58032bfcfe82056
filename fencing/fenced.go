package fencing

import (
	"errors"
	"fmt"

	"github.com/eosctl/eos"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Reason says which fence stopped a worker.
type Reason string

const (
	// ReasonProducerEpoch: another producer initialised the same
	// transactional.id with a higher epoch (PRODUCER_FENCED, or
	// INVALID_PRODUCER_EPOCH on a produce).
	ReasonProducerEpoch Reason = "producer-epoch"
	// ReasonInstanceID: another consumer joined the group with the same
	// static group.instance.id (FENCED_INSTANCE_ID).
	ReasonInstanceID Reason = "group-instance-id"
)

// IsFenced reports whether err is one of the errors by which Kafka tells a
// zombie it has been replaced, and which fence it is. A fenced worker must
// stop: retrying would at best fight its replacement and at worst commit
// stale work. A FencedError is a fence whatever Kafka error revealed it (a
// commit the coordinator had already aborted answers INVALID_TXN_STATE). A
// stale group generation on its own (ILLEGAL_GENERATION) is not a fence: it
// is the normal outcome of committing across a rebalance, and the
// transaction is aborted and redone by the same, still valid, producer.
func IsFenced(err error) (Reason, bool) {
	var fe *FencedError
	switch {
	case err == nil:
		return "", false
	case errors.As(err, &fe):
		return fe.Reason, true
	case errors.Is(err, kerr.ProducerFenced), errors.Is(err, kerr.InvalidProducerEpoch):
		return ReasonProducerEpoch, true
	case errors.Is(err, kerr.FencedInstanceID):
		return ReasonInstanceID, true
	}
	return "", false
}

// FencedError is returned by a worker that has been fenced: another
// incarnation took over, and this one must stop without committing. Its
// message is a one-line explanation fit for an operator.
type FencedError struct {
	TransactionalID string
	Reason          Reason
	ProducerID      int64
	Epoch           int16 // the epoch this worker held
	CurrentEpoch    int16 // the epoch now registered at the coordinator; -1 if unknown
	Err             error
}

// Error is the one-line explanation: which id, which epoch, what replaced
// it, and that nothing was committed.
func (e *FencedError) Error() string {
	cur := "unknown"
	if e.CurrentEpoch >= 0 {
		cur = fmt.Sprint(e.CurrentEpoch)
	}
	what := "another producer initialised the same transactional.id (or the coordinator aborted this instance's transaction when it outlived transaction.timeout.ms)"
	if e.Reason == ReasonInstanceID {
		what = "another consumer joined the group with the same group.instance.id"
	}
	return fmt.Sprintf("fenced: transactional.id %q (producer id %d, epoch %d) was replaced: %s (current epoch %s); this instance stopped without committing: %v",
		e.TransactionalID, e.ProducerID, e.Epoch, what, cur, e.Err)
}

// Unwrap returns the Kafka error that revealed the fencing.
func (e *FencedError) Unwrap() error { return e.Err }

// Is reports whether target is eos.ErrFenced, the library's word for this.
func (e *FencedError) Is(target error) bool { return target == eos.ErrFenced }
