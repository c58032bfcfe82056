// Package fencing derives the fixed transactional.id of a worker instance and
// recognises the errors by which Kafka fences a zombie, for package pipeline
// and for callers that must tell a fenced worker from a failed one.
//
// Exactly-once across restarts rests on one rule: an instance of an app always
// uses the same transactional.id. When a replacement calls InitProducerId with
// that id, the transaction coordinator bumps the producer epoch, aborts the
// transaction the old incarnation left open, and rejects everything the old
// incarnation sends afterwards. A random or regenerated id defeats this: the
// coordinator sees two unrelated producers, the zombie's open transaction
// stays open until it times out (pinning the last stable offset of every
// partition it touched), and its late commit can still land.
//
// The scheme is therefore deliberately boring: transactional.id =
// "<app>-<instance>", where app is also the consumer group id and instance
// names one slot of the app (0, 1, 2... or a StatefulSet pod name such as
// "eos-2", which is a Kubernetes StatefulSet pod's hostname). The same string is the static group member id
// (group.instance.id), so a restarted instance reclaims its partitions without
// a rebalance.
package fencing

import (
	"fmt"

	"github.com/eosctl/eos"
)

// MaxNameLen is the longest name Kafka accepts for a topic, and the bound eos
// applies to group ids and transactional ids so they can be used anywhere.
const MaxNameLen = 249

// ErrInvalidName is wrapped by every validation error from this package;
// it matches eos.ErrConfig too.
var ErrInvalidName = eos.Sentinel("invalid name", eos.ErrConfig)

// ValidateName checks that s is a legal Kafka resource name: 1 to 249 bytes
// of ASCII letters, digits, '.', '_' and '-', and not "." or "..". what names
// the thing being checked ("app name", "topic") for the error message.
func ValidateName(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty: %w", what, ErrInvalidName)
	case len(s) > MaxNameLen:
		return fmt.Errorf("%s is %d bytes long, more than Kafka's limit of %d: %w", what, len(s), MaxNameLen, ErrInvalidName)
	case s == "." || s == "..":
		return fmt.Errorf("%s %q is not allowed by Kafka: %w", what, s, ErrInvalidName)
	}
	for i := 0; i < len(s); i++ {
		if !legal(s[i]) {
			return fmt.Errorf("%s %q has the character %q at byte %d; Kafka allows only letters, digits, '.', '_' and '-': %w", what, s, s[i], i, ErrInvalidName)
		}
	}
	return nil
}

func legal(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// TransactionalID returns the fixed transactional.id of one instance of an
// app, "<app>-<instance>", after validating both parts. The same value is
// used as the static group instance id.
//
// Two apps can collide only if one app's name, plus a dash, is a prefix of
// the other's ("a" instance "b-0" and "a-b" instance "0"); give apps names
// that are not dash-extensions of each other, as Kafka Streams users already
// must for application.id.
func TransactionalID(app, instance string) (string, error) {
	if err := ValidateName("app name", app); err != nil {
		return "", err
	}
	if err := ValidateName("instance id", instance); err != nil {
		return "", err
	}
	id := ID(app, instance)
	if len(id) > MaxNameLen {
		return "", fmt.Errorf("transactional.id %q (from the app name and the instance id) is %d bytes long, more than %d: %w", id, len(id), MaxNameLen, ErrInvalidName)
	}
	return id, nil
}

// ID is the transactional.id of instance of app, unvalidated: the one place
// that knows its shape, "APP-INSTANCE", for labels and log lines about
// workers whose names TransactionalID has already accepted. Use
// TransactionalID for a name that came from a user.
func ID(app, instance string) string { return app + "-" + instance }
