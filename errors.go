package eos

import (
	"errors"
	"fmt"
)

// ErrNoTopic is wrapped by every error about a topic that does not exist
// (or a partition it does not have), from any package of the library.
var ErrNoTopic = errors.New("topic does not exist")

// ConfigError is a configuration mistake found before any work started:
// which setting, and why. Every package of the library reports a bad Config
// (or Options, or mapping) with one, so a caller tells configuration
// mistakes from runtime failures with errors.As, whatever package it came
// from.
//
// Setting is the Go name of what is wrong, qualified by its package and
// type, e.g. "pipeline.Config.Output"; a program that took the value from
// somewhere else (a command-line flag, a file) maps it back to its own
// name for it. Reason says what is wrong and, where one is known, what
// would be right.
type ConfigError struct {
	Setting string
	Reason  string
	Err     error // the cause, if any (a parse error, an unreadable file)
}

// Error says "invalid SETTING: REASON", in the library's own terms.
func (e *ConfigError) Error() string {
	if e.Setting == "" {
		return "invalid configuration: " + e.Reason
	}
	return "invalid " + e.Setting + ": " + e.Reason
}

// Unwrap returns the cause, if any, for errors.Is and errors.As.
func (e *ConfigError) Unwrap() error { return e.Err }

// BadConfig returns a *ConfigError for setting, its Reason formatted as
// fmt.Errorf would (a %w verb makes the wrapped error its Err).
func BadConfig(setting, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &ConfigError{Setting: setting, Reason: err.Error(), Err: errors.Unwrap(err)}
}

// ErrConfig matches every *ConfigError with errors.Is, for callers that only
// need to know that the configuration was wrong.
var ErrConfig = errors.New("invalid configuration")

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// The library's error vocabulary. Every package wraps the one that applies
// with %w (or returns an error type whose Is reports it), so a program
// decides what to do with errors.Is alone, whatever package the error came
// from, and without importing franz-go's error codes:
//
//   - ErrConfig: a setting is wrong (see ConfigError); fix it, do not retry.
//   - ErrNoTopic: a topic or partition does not exist.
//   - ErrUnreachable: no broker answered within the timeout; retrying later
//     may work. The message names the likely cause (wrong port, TLS against
//     plaintext, SASL mismatch).
//   - ErrFenced: another incarnation took over this worker's transactional.id
//     (or group.instance.id). Stop and never retry with the same identity:
//     the other one is now the live instance.
//   - ErrAuth: Kafka or a database refused authentication or authorization;
//     the message names what an ACL or a credential must grant.
var (
	ErrUnreachable = errors.New("brokers unreachable")
	ErrFenced      = errors.New("fenced by another instance")
	ErrAuth        = errors.New("authentication or authorization refused")
)

// Sentinel returns an error that reads msg and matches is with errors.Is:
// for a package's own sentinel that is one case of the shared vocabulary
// (fencing.ErrInvalidName is an ErrConfig), without putting the shared
// word into every message.
func Sentinel(msg string, is error) error { return &sentinel{msg, is} }

type sentinel struct {
	msg string
	is  error
}

func (s *sentinel) Error() string        { return s.msg }
func (s *sentinel) Is(target error) bool { return target == s.is }
