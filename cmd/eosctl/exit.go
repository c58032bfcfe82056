package main

import (
	"context"
	"errors"
	"strings"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/txn"
	"github.com/eosctl/eos/sink"
)

// Exit codes, documented in docs/cli.md and in `eosctl --help`.
const (
	exitOK      = 0 // success
	exitFailure = 1 // the command ran and failed: verify found a problem, brokers unreachable, a runtime error
	exitUsage   = 2 // bad input: unknown flag or topology, invalid value, missing topic
	exitFenced  = 3 // a worker was fenced by another instance with the same transactional.id
	exitAuth    = 4 // authorization or authentication failure
	// exitDiscrepancies: reconcile ran and found the topic and the table
	// differ; told apart from 1 so that a cron job can page on it alone.
	exitDiscrepancies = 5
	// exitInterrupted: SIGINT or SIGTERM stopped a command before it was
	// done (128 + SIGINT, as shells report it); its line says what was
	// done. A worker stopped so is not interrupted: stopping is how it ends.
	exitInterrupted = 130
)

// usageError marks errors caused by the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usage(err error) error { return usageError{err} }

// verifyFailed is returned by commands whose check failed after running
// correctly; its message has already been printed.
type verifyFailed struct{ msg string }

func (e verifyFailed) Error() string { return e.msg }

func exitCode(err error) int {
	var ue usageError
	var fe *fencing.FencedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(discrepancies)):
		return exitDiscrepancies
	case errors.As(err, &fe):
		return exitFenced
	case isFenced(err):
		return exitFenced
	case errors.As(err, &ue), errors.Is(err, eos.ErrConfig), errors.Is(err, fencing.ErrInvalidName), errors.Is(err, eos.ErrNoTopic):
		return exitUsage
	case errors.Is(err, sink.ErrAuth):
		return exitAuth
	case txn.Classify(err) == txn.Auth:
		return exitAuth
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitFailure
}

// oneLine keeps error output to one line, as every eosctl error promises.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func isFenced(err error) bool {
	_, ok := fencing.IsFenced(err)
	return ok
}
