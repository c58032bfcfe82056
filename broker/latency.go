package broker

import (
	"net"
	"sync"
	"time"
)

// wrapListener wraps every accepted connection: in a delayConn when an RTT
// is injected, and in a faultConn when faults may be.
type wrapListener struct {
	net.Listener
	rtt    time.Duration
	faults *Faults
}

func (l *wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.rtt > 0 {
		c = newDelayConn(c, l.rtt)
	}
	if l.faults != nil {
		c = &faultConn{Conn: c, f: l.faults}
	}
	return c, nil
}

// delayConn holds back every write by a fixed delay while keeping the order
// of writes and never serialising them: a write is queued with its due time
// and returns at once, and one goroutine writes each queued buffer when it is
// due. Pipelined responses therefore each arrive one RTT after they were
// produced, as over a real network link with ample bandwidth, instead of
// piling up RTT after RTT as a sleep inside Write would.
type delayConn struct {
	net.Conn
	rtt time.Duration

	mu     sync.Mutex
	cond   *sync.Cond
	queue  []pending
	err    error
	closed bool
}

type pending struct {
	due time.Time
	buf []byte
}

func newDelayConn(c net.Conn, rtt time.Duration) *delayConn {
	d := &delayConn{Conn: c, rtt: rtt}
	d.cond = sync.NewCond(&d.mu)
	go d.writeLoop()
	return d
}

func (d *delayConn) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return 0, d.err
	}
	if d.closed {
		return 0, errClosed
	}
	d.queue = append(d.queue, pending{due: time.Now().Add(d.rtt), buf: append([]byte(nil), p...)})
	d.cond.Signal()
	return len(p), nil
}

func (d *delayConn) writeLoop() {
	for {
		d.mu.Lock()
		for len(d.queue) == 0 && !d.closed {
			d.cond.Wait()
		}
		if len(d.queue) == 0 { // closed and drained
			d.mu.Unlock()
			d.Conn.Close()
			return
		}
		next := d.queue[0]
		d.queue = d.queue[1:]
		d.mu.Unlock()

		if wait := time.Until(next.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := d.Conn.Write(next.buf); err != nil {
			d.mu.Lock()
			d.err = err
			d.queue = nil
			d.mu.Unlock()
			d.Conn.Close()
			return
		}
	}
}

// Close lets the queued writes drain; the write loop closes the connection
// once they are written.
func (d *delayConn) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	d.cond.Signal()
	return nil
}
