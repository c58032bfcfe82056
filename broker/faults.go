package broker

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// Faults injects network faults that the broker itself cannot express: the
// broker applies a request, and the response never reaches the client
// because the connection breaks first. This is the fault that makes a
// transaction's outcome unknown to the client (a lost EndTxn response), the
// case that tears transactions in clients that abort and carry on.
//
// The zero value injects nothing; arm it with DropResponses.
type Faults struct {
	mu     sync.Mutex
	drops  map[int16]int
	hits   map[int16]int
	delays map[int16][]time.Duration
	held   map[int16]int
}

// DelayResponses arms the next n responses to requests with API key to be
// held back by d after the broker has handled the request. Responses on a
// connection are ordered, so the hold delays later responses on the same
// connection too, as a stalled network path does. A delay longer than the
// client's request timeout makes the client give up on a request the broker
// has applied.
func (f *Faults) DelayResponses(key int16, n int, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.delays == nil {
		f.delays = map[int16][]time.Duration{}
	}
	for range n {
		f.delays[key] = append(f.delays[key], d)
	}
}

// Delayed returns how many responses to key have been delayed so far.
func (f *Faults) Delayed(key int16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[key]
}

// takeDelay returns the delay armed for the next response to key, if any.
func (f *Faults) takeDelay(key int16) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	ds := f.delays[key]
	if len(ds) == 0 {
		return 0
	}
	f.delays[key] = ds[1:]
	if f.held == nil {
		f.held = map[int16]int{}
	}
	f.held[key]++
	return ds[0]
}

// DropResponses arms the next n responses to requests with API key (for
// example kmsg.EndTxn.Int16()): each such response is discarded after the
// broker has handled the request, and the connection is closed.
func (f *Faults) DropResponses(key int16, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.drops == nil {
		f.drops = map[int16]int{}
	}
	f.drops[key] += n
}

// Dropped returns how many responses to key have been dropped so far.
func (f *Faults) Dropped(key int16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[key]
}

// Listener wraps ln so that every connection it accepts is subject to f. A
// TCP proxy in front of a real broker (internal/kafkacluster) uses it to
// inject the same faults into Apache Kafka that the embedded broker gets
// through Config.Faults.
func (f *Faults) Listener(ln net.Listener) net.Listener {
	return &wrapListener{Listener: ln, faults: f}
}

func (f *Faults) take(key int16) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.drops[key] <= 0 {
		return false
	}
	f.drops[key]--
	if f.hits == nil {
		f.hits = map[int16]int{}
	}
	f.hits[key]++
	return true
}

// faultConn follows the Kafka framing in both directions. Responses on a
// connection come back in request order, so the n-th response frame written
// answers the n-th request frame read; that is all it needs to know which
// API a response belongs to.
type faultConn struct {
	net.Conn
	f *Faults

	mu   sync.Mutex
	keys []int16 // API keys of requests read and not yet answered

	rd       frameReader // request stream
	wr       frameReader // response stream
	dropping bool        // discarding the current response frame
}

func (c *faultConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rd.feed(p[:n], nil, func(key int16) {
		c.mu.Lock()
		c.keys = append(c.keys, key)
		c.mu.Unlock()
	}, nil)
	return n, err
}

func (c *faultConn) Write(p []byte) (int, error) {
	var out []byte
	broken := false
	var hold time.Duration
	c.wr.feed(p, func() {
		c.mu.Lock()
		var key int16 = -1
		if len(c.keys) > 0 {
			key, c.keys = c.keys[0], c.keys[1:]
		}
		c.mu.Unlock()
		c.dropping = c.f.take(key)
		broken = broken || c.dropping
		if d := c.f.takeDelay(key); d > 0 {
			hold = max(hold, d)
		}
	}, nil, func(b []byte) {
		if !c.dropping {
			out = append(out, b...)
		}
	})
	if hold > 0 {
		time.Sleep(hold)
	}
	if len(out) > 0 {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
	}
	if broken {
		c.Conn.Close()
	}
	return len(p), nil
}

// frameReader splits a byte stream into Kafka frames: a 4-byte big-endian
// length, then the payload, which for a request starts with its 2-byte API
// key. It calls onStart before the first byte of each frame, onKey once the
// frame's first two payload bytes are known, and onBytes with every byte.
type frameReader struct {
	size  [4]byte
	sizeN int
	left  int // payload bytes left in the current frame
	key   [2]byte
	keyN  int
}

func (r *frameReader) feed(p []byte, onStart func(), onKey func(int16), onBytes func([]byte)) {
	for len(p) > 0 {
		var n int
		if r.left == 0 { // inside the length prefix
			if r.sizeN == 0 && onStart != nil {
				onStart()
			}
			n = copy(r.size[r.sizeN:], p)
			r.sizeN += n
			if r.sizeN == 4 {
				r.left, r.sizeN, r.keyN = int(binary.BigEndian.Uint32(r.size[:])), 0, 0
			}
		} else {
			n = min(len(p), r.left)
			if r.keyN < 2 {
				k := copy(r.key[r.keyN:], p[:n])
				r.keyN += k
				if r.keyN == 2 && onKey != nil {
					onKey(int16(binary.BigEndian.Uint16(r.key[:])))
				}
			}
			r.left -= n
		}
		if onBytes != nil {
			onBytes(p[:n])
		}
		p = p[n:]
	}
}

// Reset disarms every drop and delay not yet taken and zeroes the counts,
// so that one injector can serve several drills in turn.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops, f.hits, f.delays, f.held = nil, nil, nil, nil
}
