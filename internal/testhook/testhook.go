// Package testhook carries the library's test-only hooks in a context, for
// the tests and eosctl's hidden test flags: no production Config has a field
// for them, and a library user cannot set them.
package testhook

import "context"

type abortKey struct{}

// WithAbortFraction returns a context under which a pipeline.Worker's Run
// aborts that fraction (in [0, 1)) of its transactions on purpose instead
// of committing them: the tests' way to show that aborted work is never
// visible and never skipped.
func WithAbortFraction(ctx context.Context, f float64) context.Context {
	return context.WithValue(ctx, abortKey{}, f)
}

// AbortFraction is the fraction WithAbortFraction set in ctx, or 0.
func AbortFraction(ctx context.Context) float64 {
	f, _ := ctx.Value(abortKey{}).(float64)
	return f
}
