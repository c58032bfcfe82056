package pipeline

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FetchClock counts the fetch responses the worker's client has read. It
// is a kgo hook (HookBrokerRead) that kgo calls as soon as a response is
// read off the connection, before it decodes the response, so before any
// record of it can be polled: a Starter that reads Now after a poll gets a
// count that includes the fetch of every record the poll returned. A
// request it sends once the clock has reached that count is therefore
// answered with the broker's state from after those records were fetched.
//
// topologies.Table uses it to list its table's last stable offsets off the
// processing path: a listing begun in the background as each fetch
// response arrives is, by the time the poll returns that response's
// records, usually already answered, so Sync need not wait a round trip.
//
// The zero value is ready to use; the worker gives its Starter one in
// StartEnv.Fetches.
type FetchClock struct {
	mu   sync.Mutex
	n    uint64
	next chan struct{} // closed when n next moves; nil until asked for
}

var _ kgo.HookBrokerRead = (*FetchClock)(nil)

// fetchKey is the Kafka API key of Fetch.
const fetchKey = 1

// OnBrokerRead implements kgo.HookBrokerRead: every Fetch response read
// moves the clock.
func (c *FetchClock) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key != fetchKey {
		return
	}
	c.mu.Lock()
	c.n++
	if c.next != nil {
		close(c.next)
		c.next = nil
	}
	c.mu.Unlock()
}

// Now is the number of fetch responses read so far.
func (c *FetchClock) Now() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// After returns a channel that is closed once the clock is past n: at
// once if it already is.
func (c *FetchClock) After(n uint64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n > n {
		return closedChan
	}
	if c.next == nil {
		c.next = make(chan struct{})
	}
	return c.next
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
