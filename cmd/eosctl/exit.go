package main

import (
	"context"
	"errors"
	"strings"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/txn"
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

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == errUsage }

func usage(err error) error { return usageError{err} }

// errUsage is matched by every usageError.
var errUsage = errors.New("bad command line")

// verifyFailed is returned by commands whose check failed after running
// correctly; its message has already been printed.
type verifyFailed struct{ msg string }

func (e verifyFailed) Error() string { return e.msg }

// exitCodes maps the library's error vocabulary (package eos) and the
// command's own errors to exit codes: the first match wins, anything else
// is exitFailure. Fenced comes before the configuration errors because a
// fenced worker's error can carry a config-shaped cause.
var exitCodes = []struct {
	is   error
	code int
}{
	{errDiscrepancies, exitDiscrepancies},
	{eos.ErrFenced, exitFenced},
	{errUsage, exitUsage},
	{eos.ErrConfig, exitUsage},
	{eos.ErrNoTopic, exitUsage},
	{eos.ErrAuth, exitAuth},
	{context.Canceled, exitInterrupted},
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if word := txn.Word(err); word != nil {
		err = errors.Join(err, word) // a raw Kafka error from franz-go
	}
	for _, c := range exitCodes {
		if errors.Is(err, c.is) {
			return c.code
		}
	}
	return exitFailure
}

// oneLine keeps error output to one line, as every eosctl error promises.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
