// Package supervise starts, signals and watches child processes: eosctl
// workers for the quickstart, the demos and package fleet (the chaos
// scenarios' and the e2e tests' environment), and bench's copiers (eosctl
// workers and the JVM peers). It is the one process runner of the command.
// They use it to run real processes that can be killed with real signals:
// a worker that dies by SIGKILL gets no chance to clean up, which is
// exactly the fault exactly-once has to survive. A Proc also reports what
// a benchmark measures of it: its CPU time, resident set size and peak
// resident set size (from /proc, so Linux only; 0 elsewhere).
package supervise

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/eosctl/eos/pipeline"
)

// Proc is one running child process.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	code int
	err  error

	stderr *tail

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
	// Stderr receives the child's standard error; nil discards it. Either
	// way the Proc keeps its last 8 KiB (StderrTail).
	Stderr io.Writer
	// OnEvent receives every worker event the child writes as JSON lines
	// on its standard output (eosctl run --events -). It is called from one
	// goroutine per child.
	OnEvent func(name string, e pipeline.Event)
	// OnLine, if set, receives every line the child writes on its standard
	// output, events included, for children that report in lines of their
	// own (bench's JVM peers). It is called from the same goroutine as
	// OnEvent, before it; the line is only valid during the call.
	OnLine func(line []byte)
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
	errTail := &tail{max: 8 << 10}
	cmd.Stderr = errTail
	if cfg.Stderr != nil {
		cmd.Stderr = io.MultiWriter(cfg.Stderr, errTail)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("supervise: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("supervise: starting %s: %w", cfg.Name, err)
	}
	p := &Proc{Name: cfg.Name, cmd: cmd, done: make(chan struct{}), stderr: errTail, counts: map[pipeline.EventKind]int{}}
	go p.readEvents(stdout, cfg.OnLine, cfg.OnEvent)
	return p, nil
}

func (p *Proc) readEvents(r io.Reader, onLine func([]byte), fn func(string, pipeline.Event)) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if onLine != nil {
			onLine(sc.Bytes())
		}
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

// Stop asks the process to finish with SIGTERM and waits for it to exit;
// if it has not within grace, it is killed with SIGKILL. It returns the
// exit code, as Wait does.
func (p *Proc) Stop(grace time.Duration) int {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		return p.Kill()
	}
	return p.code
}

// Err returns, once the process has exited, how it exited: nil for exit
// code 0, an *exec.ExitError otherwise (see Wait for the code); nil while
// it runs.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// StderrTail returns the last line of the child's standard error (of the
// last 8 KiB it wrote), for an error message that says why it failed.
func (p *Proc) StderrTail() string { return p.stderr.lastLine() }

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

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tail) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	return string(lines[len(lines)-1])
}
