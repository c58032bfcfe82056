package kafkacluster

import (
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/eosctl/eos/broker"
)

// Proxy forwards a node's client connections and injects faults into them:
// the responses broker.Faults is armed to drop or delay (a lost EndTxn
// response after Kafka applied it), and Cut, which isolates the node from
// every client as a network partition does. Replication and the KRaft
// quorum use other listeners and are not affected.
type Proxy struct {
	*broker.Faults // DropResponses, DelayResponses, Dropped, Delayed

	ln     net.Listener
	target string

	mu     sync.Mutex
	conns  map[net.Conn]bool // open client connections, true if held by a cut
	cut    bool
	closed bool
}

// NewProxy listens on listen and forwards to target, injecting faults
// (nil: a new injector of its own).
func NewProxy(listen, target string, faults *broker.Faults) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("kafkacluster: proxy for %s: %w", target, err)
	}
	if faults == nil {
		faults = &broker.Faults{}
	}
	p := &Proxy{Faults: faults, target: target, conns: map[net.Conn]bool{}}
	p.ln = p.Faults.Listener(ln)
	go p.serve()
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut isolates the node from its clients (on) or ends the isolation (off).
// While cut, open connections are closed and new ones are accepted but
// never answered, so clients see timeouts, as behind a dropped link, not
// refusals. Ending the cut closes the held connections so clients
// reconnect.
func (p *Proxy) Cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = on
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		held := p.cut
		p.conns[c] = held
		p.mu.Unlock()
		if held {
			go func() { io.Copy(io.Discard, c); p.forget(c) }()
			continue
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer p.forget(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		// The node is down or not listening yet. Without the proxy the
		// client's connect would be refused; the nearest the proxy can do
		// after accepting is a reset. A plain close would read as EOF
		// before any answer, which kgo takes for a TLS mismatch and does
		// not retry.
		if tc, ok := c.(interface{ SetLinger(int) error }); ok {
			tc.SetLinger(0)
		}
		c.Close()
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	<-done
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}
