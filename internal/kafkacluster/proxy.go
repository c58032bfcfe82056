package kafkacluster

import (
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/eosctl/eos/broker"
)

// Proxy forwards a node's connections and injects faults into them: the
// responses broker.Faults is armed to drop or delay (a lost EndTxn response
// after Kafka applied it), Cut, which stops all traffic as a network
// partition does, and Refuse, which makes the node's address refuse
// connections while its process is down, as it would without a proxy.
type Proxy struct {
	*broker.Faults // DropResponses, DelayResponses, Dropped, Delayed

	addr   string // the address it listens on, kept across Refuse
	target string

	mu      sync.Mutex
	ln      net.Listener      // nil while refusing
	conns   map[net.Conn]bool // open client connections, true if held by a cut
	cut     bool
	closed  bool
	serving sync.WaitGroup
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
	p := &Proxy{Faults: faults, addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.listenOn(ln)
	return p, nil
}

func (p *Proxy) listenOn(ln net.Listener) {
	p.ln = p.Faults.Listener(ln)
	p.serving.Add(1)
	go p.serve(p.ln)
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.addr }

// Cut stops all traffic through the proxy (on) or restores it (off), as a
// network partition does. While cut, open connections are closed and new
// ones are accepted and held unread, so clients see timeouts, not
// refusals; ending the cut forwards the held connections with what their
// clients sent meanwhile, as a healed link delivers it.
func (p *Proxy) Cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = on
	for c, held := range p.conns {
		switch {
		case on && !held:
			c.Close()
			delete(p.conns, c)
		case !on && held:
			p.conns[c] = false
			go p.forward(c)
		}
	}
}

// Refuse closes the listener (on), so connecting to the node is refused as
// it is when its process is down, or opens it again on the same address
// (off). A proxy that accepted and then closed a connection would look, to
// kgo, like a TLS mismatch, which it does not retry.
func (p *Proxy) Refuse(on bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	if on && p.ln != nil {
		p.ln.Close()
		p.ln = nil
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
	if !on && p.ln == nil {
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("kafkacluster: proxy for %s listening again on %s: %w", p.target, p.addr, err)
		}
		p.listenOn(ln)
	}
	return nil
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

func (p *Proxy) serve(ln net.Listener) {
	defer p.serving.Done()
	for {
		c, err := ln.Accept()
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
		if !held {
			go p.forward(c)
		}
	}
}

func (p *Proxy) forward(c net.Conn) {
	defer p.forget(c)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		// The node stopped listening between the accept and now (Refuse
		// follows its process's exit a moment later): reset, the nearest
		// to a refusal after an accept.
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
