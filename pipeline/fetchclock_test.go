package pipeline

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The clock moves on Fetch responses only, and After wakes its waiter at
// the next one, or at once if the clock is already past.
func TestFetchClockCountsFetchResponses(t *testing.T) {
	var c FetchClock
	read := func(key int16) { c.OnBrokerRead(kgo.BrokerMetadata{}, key, 100, 0, 0, nil) }
	ch := c.After(0)
	read(0)  // Produce
	read(26) // EndTxn
	select {
	case <-ch:
		t.Fatal("After(0) woke without a Fetch response")
	default:
	}
	if n := c.Now(); n != 0 {
		t.Fatalf("Now after no Fetch response: %d", n)
	}
	read(fetchKey)
	select {
	case <-ch:
	default:
		t.Fatal("After(0) did not wake at the first Fetch response")
	}
	if n := c.Now(); n != 1 {
		t.Fatalf("Now after one Fetch response: %d", n)
	}
	select {
	case <-c.After(0):
	default:
		t.Fatal("After(0) with the clock at 1 is not closed")
	}
	select {
	case <-c.After(1):
		t.Fatal("After(1) with the clock at 1 is closed")
	default:
	}
}
