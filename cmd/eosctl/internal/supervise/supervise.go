// Package supervise starts, signals and watches eosctl worker processes, for
// the quickstart, the demos, bench and package fleet (the chaos scenarios'
// and the e2e tests' environment). They use it to run real processes that
// can be killed with real signals: a worker that dies by SIGKILL gets no
// chance to clean up, which is exactly the fault exactly-once has to
// survive.
package supervise

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/eosctl/eos/pipeline"
)

// Proc is one running child process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	code int
	err  error

	mu     sync.Mutex
	last   pipeline.Event
	counts map[pipeline.EventKind]int
}

// Config describes a child process.
type Config struct {
	Name string   // a label for logs and events
	Bin  string   // the executable; empty means this process's own binary
	Args []string // arguments after the binary
	Env  []string // extra environment, added to this process's
	// Stderr receives the child's standard error; nil discards it.
	Stderr io.Writer
	// OnEvent receives every worker event the child writes as JSON lines
	// on its standard output (eosctl run --events -). It is called from one
	// goroutine per child.
	OnEvent func(name string, e pipeline.Event)
}

// Start starts a child process. The child is killed if ctx ends.
func Start(ctx context.Context, cfg Config) (*Proc, error) {
	bin := cfg.Bin
	if bin == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("supervise: finding own executable: %w", err)
		}
		bin = self
	}
	cmd := exec.CommandContext(ctx, bin, cfg.Args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stderr = cfg.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("supervise: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("supervise: starting %s: %w", cfg.Name, err)
	}
	p := &Proc{Name: cfg.Name, cmd: cmd, done: make(chan struct{}), counts: map[pipeline.EventKind]int{}}
	go p.readEvents(stdout, cfg.OnEvent)
	return p, nil
}

func (p *Proc) readEvents(r io.Reader, fn func(string, pipeline.Event)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var e pipeline.Event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Kind == "" {
			continue
		}
		p.mu.Lock()
		p.last = e
		p.counts[e.Kind]++
		p.mu.Unlock()
		if fn != nil {
			fn(p.Name, e)
		}
	}
	// Output is drained before Wait, as exec requires of StdoutPipe.
	err := p.cmd.Wait()
	p.err = err
	p.code = exitCode(err)
	close(p.done)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() int {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	return p.code
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its exit code: the code it
// exited with, or 128+signal if a signal killed it.
func (p *Proc) Wait() int {
	<-p.done
	return p.code
}

// Count returns how many events of kind the process has written.
func (p *Proc) Count(kind pipeline.EventKind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[kind]
}

// Last returns the last event the process wrote.
func (p *Proc) Last() pipeline.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}
