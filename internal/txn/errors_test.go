package txn

import (
	"context"
	"fmt"
	"testing"

	"github.com/eosctl/eos/fencing"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A context error is Canceled, unless whoever saw it knew it left a
// transaction's outcome unknown: an EndTxn or flush whose deadline passed
// while the process was paused must re-initialise, not stop the worker. A
// fence still wins over everything.
func TestClassifyOutcomeUnknownBeforeCanceled(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Class
	}{
		{context.DeadlineExceeded, Canceled},
		{fmt.Errorf("polling: %w", context.Canceled), Canceled},
		{fmt.Errorf("txn: ending transaction of %q (commit=true): %w (%w)", "a-0", context.DeadlineExceeded, ErrOutcomeUnknown), Unknown},
		{fmt.Errorf("txn: flushing the transaction of %q: %w (%w)", "a-0", context.DeadlineExceeded, ErrOutcomeUnknown), Unknown},
		{fmt.Errorf("%w (%w)", kerr.ProducerFenced, ErrOutcomeUnknown), Fenced},
		{kerr.TopicAuthorizationFailed, Auth},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
	if _, ok := fencing.IsFenced(kerr.ProducerFenced); !ok {
		t.Fatal("fencing.IsFenced does not recognise PRODUCER_FENCED; the table above tests nothing for it")
	}
}
