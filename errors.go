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
