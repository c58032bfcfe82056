package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The one clock. Every mode's throughput is read from the same place, the
// broker: a run's offsetClock polls the committed offsets of the run's group
// on the backlog topic every clockPoll, for eos exactly as for the loops and
// for Kafka Streams, whatever each copier says about itself. The rate is
// taken between the moments the group's committed offsets passed 10% and
// 90% of the backlog (midRate), so that neither the start (process start,
// group join, the first fetch, a JVM's class loading) nor the tail (the
// last, short-of-work transaction waiting for its interval) counts, and
// every mode is charged the same poll resolution at both ends.
//
// The in-process figures (commit events) remain diagnostics: commit
// timings, transactions per second, overhead, and event_rps, the old clock.

// clockPoll is how often the clock reads the group's committed offsets:
// the resolution of both ends of the measured window.
const clockPoll = 25 * time.Millisecond

// clockLow and clockHigh bound the measured share of the backlog.
const (
	clockLow  = 0.10
	clockHigh = 0.90
)

// offsetSample is the sum of a group's committed offsets on the backlog
// topic as the broker reported it at a moment.
type offsetSample struct {
	at time.Time
	n  int64
}

// offsetClock polls a group's committed offsets on one topic. The backlog
// topic starts at offset 0 and holds no transaction markers (it is
// produced without transactions), so the sum of the offsets counts the
// records consumed.
type offsetClock struct {
	mu      sync.Mutex
	samples []offsetSample
	changed chan struct{} // closed and replaced on every new high
	cancel  context.CancelFunc
	done    chan struct{}
}

// startOffsetClock starts polling group's committed offsets on topic; its
// first sample is (now, 0), before the copiers start.
func startOffsetClock(ctx context.Context, adm *kadm.Client, group, topic string) *offsetClock {
	ctx, cancel := context.WithCancel(ctx)
	c := &offsetClock{samples: []offsetSample{{at: time.Now()}}, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(clockPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			n, err := committedOn(ctx, adm, group, topic)
			if err != nil {
				continue // a failed poll only lowers the resolution
			}
			now := time.Now()
			c.mu.Lock()
			if n > c.samples[len(c.samples)-1].n {
				c.samples = append(c.samples, offsetSample{at: now, n: n})
				close(c.changed)
				c.changed = make(chan struct{})
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// waitFor waits until the broker shows at least n records committed, or
// timeout passes: on Apache Kafka a transaction's offsets become visible
// when its commit markers are written, a little after its EndTxn returned.
func (c *offsetClock) waitFor(ctx context.Context, n int64, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		got, ch := c.samples[len(c.samples)-1].n, c.changed
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("the broker showed %d of %d records committed by the group within %s", got, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop ends the polling and returns the samples, in time order.
func (c *offsetClock) stop() []offsetSample {
	c.cancel()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples
}

// midRate is the throughput between the first samples at or past 10% and
// 90% of backlog: the records committed between them over the time between
// them. Both samples are commits as the broker showed them, so the window
// holds whole commits and the rate is unbiased by the commit interval.
// When one commit carried the group past both marks (too few commits for
// the backlog), the rate is taken from the clock's start to the first
// sample at or past the backlog, start-up included, and short is true.
func midRate(samples []offsetSample, backlog int64) (rps float64, window time.Duration, short bool) {
	if len(samples) == 0 || backlog <= 0 {
		return 0, 0, true
	}
	first := func(at int64) int {
		for i, s := range samples {
			if s.n >= at {
				return i
			}
		}
		return -1
	}
	lo := first(max(1, int64(clockLow*float64(backlog))))
	hi := first(int64(clockHigh * float64(backlog)))
	if lo >= 0 && hi > lo {
		a, b := samples[lo], samples[hi]
		window = b.at.Sub(a.at)
		if window > 0 {
			return float64(b.n-a.n) / window.Seconds(), window, false
		}
	}
	end := first(backlog)
	if end < 0 {
		end = len(samples) - 1
	}
	a, b := samples[0], samples[end]
	window = b.at.Sub(a.at)
	if window <= 0 {
		return 0, 0, true
	}
	return float64(b.n-a.n) / window.Seconds(), window, true
}

// committedOn is the sum of group's committed offsets on topic.
func committedOn(ctx context.Context, adm *kadm.Client, group, topic string) (int64, error) {
	offs, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		return 0, err
	}
	var sum int64
	var ferr error
	offs.Each(func(o kadm.OffsetResponse) {
		switch {
		case o.Topic != topic:
		case o.Err != nil:
			ferr = o.Err
		case o.At > 0:
			sum += o.At
		}
	})
	return sum, ferr
}
