// Package txn owns the lifecycle of one worker's transactions, for package
// pipeline's Worker: opening the
// transactional client, beginning and ending transactions, and deciding what
// an error means for exactly-once. It is internal because a Go user runs
// transactions through pipeline, whose errors carry these classes.
//
// The classification is the heart of it. Most Kafka errors are retried inside
// the client; the ones that reach this package fall in four classes, and each
// has exactly one safe reaction:
//
//   - Fenced: another incarnation owns the transactional.id. Stop. Never retry.
//   - Auth: the principal lacks an ACL. Stop with the resource named.
//   - Unknown: the outcome of the transaction is not known (EndTxn timed out,
//     the connection broke, a produce failed, the retry budget ran out).
//     Re-initialise the producer before anything else is produced, which
//     bumps the epoch and makes the coordinator finish or abort whatever is
//     still open, and resume from the offsets the broker has committed, not
//     the ones this process believes it committed. Aborting and carrying on
//     is what tears transactions (KAFKA-17754).
//   - Fatal: a configuration or protocol problem that retrying cannot fix.
package txn

import (
	"context"
	"errors"
	"fmt"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrOutcomeUnknown marks an error whose only safe reaction is to
// re-initialise the producer and resume from the committed offsets.
var ErrOutcomeUnknown = errors.New("transaction outcome unknown")

// Class is what an error means for the worker.
type Class int

const (
	// Unknown means the transaction's outcome is unknown or the session is
	// no longer trustworthy; reopen the session.
	Unknown Class = iota
	// Fenced means this instance has been replaced; stop.
	Fenced
	// Auth means an authorization failure; stop.
	Auth
	// Fatal means an error that retrying will not fix; stop.
	Fatal
	// Canceled means the caller's context ended.
	Canceled
)

// String returns the class's name as logs and events show it: "fenced",
// "authorization", "fatal", "canceled" or "unknown-outcome".
func (c Class) String() string {
	switch c {
	case Fenced:
		return "fenced"
	case Auth:
		return "authorization"
	case Fatal:
		return "fatal"
	case Canceled:
		return "canceled"
	}
	return "unknown-outcome"
}

// Classify maps an error from the client to its Class.
func Classify(err error) Class {
	if _, ok := fencing.IsFenced(err); ok {
		return Fenced
	}
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		// Marked by whoever knew a context error left an outcome
		// unknown (Session.End), which the next case would call
		// Canceled.
		return Unknown
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Canceled
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed),
		errors.Is(err, kerr.TopicAuthorizationFailed),
		errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.SaslAuthenticationFailed):
		return Auth
	case errors.Is(err, kerr.InvalidTransactionTimeout),
		errors.Is(err, kerr.UnsupportedVersion),
		errors.Is(err, kerr.InvalidConfig),
		errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.MessageTooLarge):
		return Fatal
	}
	return Unknown
}

// AuthError names an authorization failure by the operation and resource an
// ACL must grant, as Kafka's errors do not: TOPIC_AUTHORIZATION_FAILED alone
// does not say which topic, nor whether reading or writing was refused.
type AuthError struct {
	Operation    string // READ, WRITE, DESCRIBE, CREATE, IDEMPOTENT_WRITE
	ResourceType string // Topic, Group, TransactionalId, Cluster
	Resource     string
	Err          error
}

// Error names what was denied and says to grant it with an ACL.
func (e *AuthError) Error() string {
	return fmt.Sprintf("not authorized: %s on %s %q was denied; grant it with an ACL for this principal (%v)", e.Operation, e.ResourceType, e.Resource, e.Err)
}

// Unwrap returns Kafka's error.
func (e *AuthError) Unwrap() error { return e.Err }

// Is reports whether target is eos.ErrAuth, the library's word for this.
func (e *AuthError) Is(target error) bool { return target == eos.ErrAuth }

// Denied wraps err in an AuthError naming op on the resource if err is an
// authorization failure, and returns err unchanged otherwise. A failure that
// is already an AuthError is kept as it is.
func Denied(err error, op, resourceType, resource string) error {
	var ae *AuthError
	if err == nil || Classify(err) != Auth || errors.As(err, &ae) {
		return err
	}
	switch {
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed) && resourceType != "TransactionalId":
		return err // named by the caller that knows the id
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return &AuthError{Operation: "IDEMPOTENT_WRITE", ResourceType: "Cluster", Resource: "kafka-cluster", Err: err}
	}
	return &AuthError{Operation: op, ResourceType: resourceType, Resource: resource, Err: err}
}

// Word returns the library's word (eos.ErrFenced, eos.ErrAuth) for a raw
// Kafka error that has not been wrapped in one yet, such as an admin
// request's TOPIC_AUTHORIZATION_FAILED, and nil for any other error: so a
// caller's errors.Is table covers the errors that come straight from
// franz-go too, classified here, in the one place that classifies them.
func Word(err error) error {
	switch Classify(err) {
	case Fenced:
		return eos.ErrFenced
	case Auth:
		return eos.ErrAuth
	}
	return nil
}
