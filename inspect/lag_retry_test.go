package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// coordinatorNotAvailable makes the embedded broker answer the next n
// OffsetFetch requests (all of them if n < 0) with COORDINATOR_NOT_AVAILABLE,
// as Apache Kafka does right after a cluster starts, while __consumer_offsets
// is being created, and counts the refusals.
func coordinatorNotAvailable(b *broker.Broker, n int64) *atomic.Int64 {
	var refused atomic.Int64
	b.Cluster().ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if n >= 0 && refused.Load() >= n {
			return nil, nil, false
		}
		b.Cluster().KeepControl()
		refused.Add(1)
		return refusal(req), nil, true
	})
	return &refused
}

// refusal answers an OffsetFetch request with COORDINATOR_NOT_AVAILABLE for
// every group it names.
func refusal(req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.OffsetFetchRequest)
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	for _, g := range r.Groups {
		rg := kmsg.NewOffsetFetchResponseGroup()
		rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorNotAvailable.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// groupLaggingBy3 starts an embedded broker whose group g has committed
// offset 2 of in's 5 records.
func groupLaggingBy3(t *testing.T) (*broker.Broker, *cluster) {
	b := testbroker.Embedded(t, broker.Config{})
	c := newClusterOn(t, b)
	c.topic(t, "in", 1)
	c.produce(t, "in", 0, 5)
	commit(t, c, "g", "in", 0, 2)
	return b, c
}

// Lag waits out a group coordinator that is not available yet, rather than
// failing with the raw error the first time (eosctl lag right after
// scripts/kafka started the cluster), and when it stays unavailable past
// ctx's deadline, says what that means. Embedded only: Apache Kafka's
// coordinator cannot be held unavailable on demand.
func TestLagWaitsForTheGroupCoordinator(t *testing.T) {
	b, c := groupLaggingBy3(t)

	refused := coordinatorNotAvailable(b, 3)
	gl, err := Lag(c.ctx, c.adm, "g")
	if err != nil || len(gl.Partitions) != 1 || gl.TotalLag != 3 || refused.Load() != 3 {
		t.Fatalf("Lag = %+v, %v after %d refusals; want a lag of 3 once the coordinator answers", gl, err, refused.Load())
	}

	coordinatorNotAvailable(b, -1)
	ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
	defer cancel()
	_, err = Lag(ctx, c.adm, "g")
	// The deadline ends either in the client's backoff, and the refusal
	// surfaces, or with a request in flight, and all that is known is
	// that nothing answered (CI has seen both).
	refusedMeaning := errors.Is(err, kerr.CoordinatorNotAvailable) && strings.Contains(err.Error(), "the group coordinator was not available within the timeout")
	if !refusedMeaning && !isNoAnswer(err) {
		t.Fatalf("Lag with the coordinator never available: %v; want an error saying what COORDINATOR_NOT_AVAILABLE means, or that nothing answered in time", err)
	}
}

// isNoAnswer reports whether err is Lag's error for a deadline that cut an
// attempt before any refusal reached it.
func isNoAnswer(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "no answer within the timeout: the group coordinator may not be available yet") && strings.Contains(err.Error(), "__consumer_offsets")
}

// When ctx ends while a request is in flight, the client answers with
// ctx's error and the refusal it retried before is lost: Lag says what is
// known, that nothing answered in time, not a bare "context deadline
// exceeded" (which CI once printed) and not a refusal it did not see.
func TestLagSaysNothingAnsweredWhenItsDeadlineCutsARequest(t *testing.T) {
	b, c := groupLaggingBy3(t)

	// The first OffsetFetch is refused; every later one is held until the
	// test ends, far past Lag's deadline.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var seen atomic.Int64
	b.Cluster().ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		if seen.Add(1) > 1 {
			b.Cluster().SleepControl(func() { <-release })
			return nil, nil, false
		}
		return refusal(req), nil, true
	})
	ctx, cancel := context.WithTimeout(c.ctx, time.Second)
	defer cancel()
	_, err := Lag(ctx, c.adm, "g")
	if seen.Load() < 2 {
		t.Fatalf("only %d OffsetFetch requests reached the broker; the test needs one refused and one cut by the deadline", seen.Load())
	}
	if !isNoAnswer(err) {
		t.Fatalf("Lag cut by its deadline with a request in flight: %v; want an error saying nothing answered in time and what that may mean", err)
	}

	// A cancel (Ctrl-C) is not a wait that ran out: it is not explained
	// as one.
	ctx, cancel = context.WithCancel(c.ctx)
	time.AfterFunc(300*time.Millisecond, cancel)
	if _, err := Lag(ctx, c.adm, "g"); !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "within the timeout") {
		t.Fatalf("Lag canceled with a request in flight: %v; want the cancel, not a timeout's meaning", err)
	}
}

// What Lag returns when its ctx ends, for each way it can end: in Lag's own
// backoff after a refusal, or with a request in flight, by a deadline or a
// cancel. The backoff case cannot be timed against a broker (the client
// retries refusals itself first), so ended is checked directly.
func TestLagExplainsADeadlineAndReturnsACancel(t *testing.T) {
	refused := kerr.CoordinatorNotAvailable
	cut := func(cause error) error {
		return fmt.Errorf("fetching the committed offsets of group %q: %w", "g", cause)
	}
	for _, tc := range []struct {
		name                string
		cause, err, refused error
		want                func(error) bool
	}{
		{"deadline in Lag's backoff", context.DeadlineExceeded, refused, refused, func(err error) bool {
			return errors.Is(err, refused) && strings.Contains(err.Error(), "the group coordinator was not available within the timeout")
		}},
		{"deadline cutting a request after a refusal", context.DeadlineExceeded, cut(context.DeadlineExceeded), refused, func(err error) bool {
			return errors.Is(err, refused) && strings.Contains(err.Error(), "the group coordinator was not available within the timeout")
		}},
		{"deadline cutting the first request", context.DeadlineExceeded, cut(context.DeadlineExceeded), nil, isNoAnswer},
		{"cancel in Lag's backoff", context.Canceled, refused, refused, func(err error) bool {
			return errors.Is(err, context.Canceled) && errors.Is(err, refused) && !strings.Contains(err.Error(), "within the timeout")
		}},
		{"cancel cutting a request", context.Canceled, cut(context.Canceled), refused, func(err error) bool {
			return errors.Is(err, context.Canceled) && err.Error() == cut(context.Canceled).Error()
		}},
	} {
		if got := ended(tc.cause, tc.err, tc.refused); !tc.want(got) {
			t.Errorf("%s: Lag returns %v", tc.name, got)
		}
	}
}
