package kafkacluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/eosctl/eos/broker"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a running Apache Kafka cluster.
type Cluster struct {
	cfg       Config
	id        string // KRaft cluster id
	classpath string
	tempDir   bool // Dir was made by Start and is removed by Stop
	nodes     []*Node
}

// Node is one combined broker+controller process.
type Node struct {
	ID   int32
	Addr string // host:port clients use: the proxy's with Config.Proxy

	dir                                      string
	clientPort, internalPort, controllerPort int
	proxy                                    *Proxy
	// peerProxies front the INTERNAL and CONTROLLER listeners, so that
	// Isolate can cut the node off from its peers too.
	peerProxies []*Proxy
	// internalAddr and controllerAddr are what the other nodes dial.
	internalAddr, controllerAddr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	pid    int
	exited chan struct{} // closed when the current process has exited
	// logFrom are the sizes of stdout.log and server.log when the current
	// process started: both are appended to by every start of the node.
	logFrom [2]int64
}

// Start resolves, formats and starts a cluster, and returns once every node
// answers metadata. On error, whatever was started is stopped again.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cache, err := CacheDir(cfg.Version)
	if err != nil {
		return nil, err
	}
	classpath, err := Resolve(ctx, cfg.Version, cache, func(s string) { cfg.Logf("%s", s) })
	if err != nil {
		return nil, err
	}
	// Free ports are free when chosen and bound by a JVM seconds later;
	// another process can take one in between. A start that failed so is
	// tried again with new ports.
	// Only ports the launcher chose are chosen again: the INTERNAL and
	// CONTROLLER ports always, the CLIENT ports unless Config.Ports names
	// them. A taken port of Config.Ports is the caller's to change.
	for attempt := 1; ; attempt++ {
		c := &Cluster{cfg: cfg, classpath: classpath}
		err := c.launch(ctx)
		if err == nil {
			return c, nil
		}
		var taken *PortTakenError
		if !errors.As(err, &taken) || taken.Given || attempt == maxAttempts {
			return nil, err
		}
		cfg.Logf("%v; starting again on new ports", err)
	}
}

// maxAttempts bounds the starts that a taken port repeats.
const maxAttempts = 3

// PortTakenError is Start's error when a node could not bind one of its
// ports (Kafka's "Socket server failed to bind to HOST:PORT: Address already
// in use"): another process held it, or took it between the launcher
// choosing it and the JVM binding it (an outgoing connection's ephemeral
// port can be any free port in the kernel's ephemeral range).
type PortTakenError struct {
	Node  int32
	Port  int
	Given bool   // the port is one of Config.Ports, which Start never changes
	Line  string // the node's log line that says so
	Log   string // the node's log file
	// Ephemeral is the kernel's ephemeral port range when Port lies in it
	// (a port there can be taken by any outgoing connection), else zero.
	Ephemeral [2]int
}

func (e *PortTakenError) Error() string {
	msg := fmt.Sprintf("kafkacluster: node %d could not bind port %d: %s (%s)", e.Node, e.Port, e.Line, e.Log)
	if e.Given {
		msg += fmt.Sprintf("; port %d is one of Config.Ports: free it or choose another", e.Port)
		if e.Ephemeral != [2]int{} {
			msg += fmt.Sprintf(" below the kernel's ephemeral port range %d-%d, from which outgoing connections (the nodes' own too) take their ports", e.Ephemeral[0], e.Ephemeral[1])
		}
	}
	return msg
}

// bindFailure finds Kafka's bind failure in a node's log: the line and the
// port it names.
var bindFailure = regexp.MustCompile(`[^\n]*failed to bind to [^\s]*:(\d+)[^\n]*Address already in use[^\n]*`)

// portTaken returns the PortTakenError of a node whose log reports a bind
// failure, or nil.
func (c *Cluster) portTaken(n *Node, tail string) *PortTakenError {
	m := bindFailure.FindStringSubmatch(tail)
	if m == nil {
		return nil
	}
	port, _ := strconv.Atoi(m[1])
	e := &PortTakenError{Node: n.ID, Port: port, Given: slices.Contains(c.cfg.Ports, port), Line: strings.TrimPrefix(strings.TrimSpace(m[0]), "Caused by: "), Log: n.LogPath()}
	if lo, hi, ok := ephemeralRange(); ok && port >= lo && port <= hi {
		e.Ephemeral = [2]int{lo, hi}
	}
	return e
}

// ephemeralRange is the kernel's range of ports for outgoing connections
// (Linux's net.ipv4.ip_local_port_range).
func ephemeralRange() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	if _, err := fmt.Sscan(string(b), &lo, &hi); err != nil {
		return 0, 0, false
	}
	return lo, hi, true
}

// launch lays out, formats and starts c's nodes and waits for them; on
// error it stops what it started.
func (c *Cluster) launch(ctx context.Context) (err error) {
	cfg := c.cfg
	if cfg.Dir == "" {
		if c.cfg.Dir, err = os.MkdirTemp("", "eos-kafka-"); err != nil {
			return fmt.Errorf("kafkacluster: %w", err)
		}
		c.tempDir = !cfg.Detach
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.layout(); err != nil {
		return err
	}
	if c.cfg.afterLayout != nil {
		c.cfg.afterLayout(c)
	}
	if err := c.format(ctx); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.startNode(n); err != nil {
			return err
		}
	}
	cfg.Logf("waiting for %d node(s) to answer metadata (logs in %s)", len(c.nodes), c.cfg.Dir)
	if err := c.WaitReady(ctx, cfg.StartTimeout); err != nil {
		return err
	}
	if cfg.Detach {
		return c.writeState()
	}
	return nil
}

// layout picks ports, writes each node's configuration and opens proxies.
func (c *Cluster) layout() error {
	// A KRaft cluster id is 16 random bytes in URL-safe base64; like
	// Kafka's own generator, avoid a leading '-', which the storage tool
	// would read as a flag.
	for c.id == "" || c.id[0] == '-' {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("kafkacluster: %w", err)
		}
		c.id = base64.RawURLEncoding.EncodeToString(id[:])
	}
	for i := range c.cfg.Nodes {
		n := &Node{ID: int32(i + 1), dir: filepath.Join(c.cfg.Dir, "node-"+strconv.Itoa(i+1))}
		if i < len(c.cfg.Ports) {
			n.clientPort = c.cfg.Ports[i]
		}
		for _, p := range []*int{&n.clientPort, &n.internalPort, &n.controllerPort} {
			if *p == 0 {
				var err error
				if *p, err = freePort(c.cfg.Host); err != nil {
					return err
				}
			}
		}
		n.Addr = net.JoinHostPort(c.cfg.Host, strconv.Itoa(n.clientPort))
		n.internalAddr = net.JoinHostPort(c.cfg.Host, strconv.Itoa(n.internalPort))
		n.controllerAddr = net.JoinHostPort(c.cfg.Host, strconv.Itoa(n.controllerPort))
		if c.cfg.Proxy {
			px, err := NewProxy(net.JoinHostPort(c.cfg.Host, "0"), n.Addr, c.cfg.Faults)
			if err != nil {
				return err
			}
			n.proxy, n.Addr = px, px.Addr()
			for _, a := range []*string{&n.internalAddr, &n.controllerAddr} {
				px, err := NewProxy(net.JoinHostPort(c.cfg.Host, "0"), *a, nil)
				if err != nil {
					return err
				}
				n.peerProxies, *a = append(n.peerProxies, px), px.Addr()
			}
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		os.RemoveAll(n.dir) // a failed earlier attempt's storage, formatted with another id
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return fmt.Errorf("kafkacluster: %w", err)
		}
		if err := os.WriteFile(n.propsPath(), []byte(serverProperties(c.cfg, n, c.nodes)), 0o644); err != nil {
			return fmt.Errorf("kafkacluster: %w", err)
		}
		if err := os.WriteFile(filepath.Join(n.dir, "log4j2.properties"), []byte(log4j2Properties), 0o644); err != nil {
			return fmt.Errorf("kafkacluster: %w", err)
		}
	}
	return nil
}

// format writes each node's KRaft storage, all with one cluster id.
func (c *Cluster) format(ctx context.Context) error {
	c.cfg.Logf("formatting KRaft storage of %d node(s), cluster id %s", len(c.nodes), c.id)
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() {
			args := []string{"format", "-t", c.id, "-c", n.propsPath()}
			if sec := c.cfg.Security; sec != nil {
				for _, u := range slices.Sorted(maps.Keys(sec.Users)) {
					for _, m := range scramMechanisms {
						args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, u, sec.Users[u]))
					}
				}
			}
			cmd := exec.CommandContext(ctx, "java", c.jvmArgs(n, "256m", "kafka.tools.StorageTool", args...)...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("kafkacluster: formatting node %d: %w\n%s", n.ID, err, lastLines(string(out), 15))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) jvmArgs(n *Node, heap, main string, args ...string) []string {
	a := []string{
		"-Xmx" + heap, "-Xms" + heap,
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=file:" + filepath.Join(n.dir, "log4j2.properties"),
		"-Dkafka.logs.dir=" + n.dir,
		"-cp", c.classpath, main,
	}
	return append(a, args...)
}

// startNode starts n's JVM; it does not wait for it to serve.
func (c *Cluster) startNode(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	out, err := os.OpenFile(filepath.Join(n.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kafkacluster: %w", err)
	}
	defer out.Close()
	n.logFrom = [2]int64{fileSize(out.Name()), fileSize(n.LogPath())}
	cmd := exec.Command("java", c.jvmArgs(n, c.cfg.Heap, "kafka.Kafka", n.propsPath())...)
	cmd.Stdout, cmd.Stderr = out, out
	if c.cfg.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// The JVMs die with the process that started them, even if it is
		// killed: a crashed test leaves no broker behind.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kafkacluster: starting node %d: %w", n.ID, err)
	}
	n.cmd, n.pid, n.exited = cmd, cmd.Process.Pid, make(chan struct{})
	exited := n.exited
	// The peers' proxies take connections again at once (the node's own
	// quorum and replication need them); its client proxy only once it
	// answers (RestartNode). While the process is down, all refuse.
	for _, px := range n.peerProxies {
		if err := px.Refuse(false); err != nil {
			return err
		}
	}
	go func() {
		cmd.Wait()
		for _, px := range append([]*Proxy{n.proxy}, n.peerProxies...) {
			if px != nil {
				px.Refuse(true)
			}
		}
		close(exited)
	}()
	return nil
}

// WaitReady waits until the cluster's metadata names every node, failing
// early with the node's log if one of the processes exits.
func (c *Cluster) WaitReady(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		for _, n := range c.nodes {
			if n.Exited() {
				// The whole log of this start: Kafka can write hundreds of
				// lines (shutdown, config dumps) after the bind failure.
				log := n.logSinceStart()
				if e := c.portTaken(n, log); e != nil {
					return e
				}
				return fmt.Errorf("kafkacluster: node %d exited while starting; its log (%s) ends:\n%s", n.ID, n.LogPath(), lastLines(log, 20))
			}
		}
		err := c.answersMetadata(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkacluster: the cluster did not answer metadata with all %d nodes within %s (last error: %v); logs in %s", len(c.nodes), within, err, c.cfg.Dir)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// answersMetadata asks every node itself for metadata, each on a new
// client (kgo serves metadata from a cache for a while), and checks that
// each answers and names every node. A node registers with the controller
// before it opens its client listener, so metadata from one node naming
// another does not mean the other is serving yet.
func (c *Cluster) answersMetadata(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for _, n := range c.nodes {
		direct := net.JoinHostPort(c.cfg.Host, strconv.Itoa(n.clientPort))
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(direct)}, c.cfg.ClientOpts...)...)
		if err != nil {
			return err
		}
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		cl.Close()
		if err != nil {
			return fmt.Errorf("node %d: %w", n.ID, err)
		}
		if len(md.Brokers) != len(c.nodes) {
			return fmt.Errorf("node %d's metadata names %d of %d nodes", n.ID, len(md.Brokers), len(c.nodes))
		}
	}
	return nil
}

// Addrs returns the client address of every node, in node order.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr
	}
	return a
}

// Nodes returns the nodes in node order (node IDs start at 1).
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node with broker id, or nil.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Dir is the directory holding the nodes' configuration, data and logs.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Kill sends sig to node id's process: SIGKILL for a hard crash, SIGSTOP
// and SIGCONT to freeze and thaw it, SIGTERM for a clean shutdown.
func (c *Cluster) Kill(id int32, sig syscall.Signal) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("kafkacluster: no node %d", id)
	}
	return n.signal(sig)
}

// StopNode stops node id (SIGTERM, or SIGKILL when hard) and waits until its
// process has exited.
func (c *Cluster) StopNode(id int32, hard bool) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("kafkacluster: no node %d", id)
	}
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	return n.stop(sig, 60*time.Second)
}

// RestartNode starts node id again on its existing storage, after
// StopNode or a SIGKILL, and waits until the cluster names every node.
func (c *Cluster) RestartNode(ctx context.Context, id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("kafkacluster: no node %d", id)
	}
	if !n.Exited() {
		return fmt.Errorf("kafkacluster: node %d is still running", id)
	}
	if err := c.startNode(n); err != nil {
		return err
	}
	if err := c.WaitReady(ctx, c.cfg.StartTimeout); err != nil {
		return err
	}
	if n.proxy != nil {
		return n.proxy.Refuse(false)
	}
	return nil
}

// Stop stops every node (SIGTERM, then SIGKILL after a grace period),
// closes the proxies, and removes the directory if Start created it.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() {
			n.signal(syscall.SIGCONT) // a frozen node cannot shut down
			if n.stop(syscall.SIGTERM, 20*time.Second) != nil {
				n.stop(syscall.SIGKILL, 10*time.Second)
			}
			if n.proxy != nil {
				n.proxy.Close()
			}
			for _, px := range n.peerProxies {
				px.Close()
			}
		})
	}
	wg.Wait()
	if c.tempDir {
		os.RemoveAll(c.cfg.Dir)
	}
}

// Faults returns the injector shared by every node's proxy, or nil without
// Config.Proxy: a response it is armed to drop is dropped by whichever node
// answers it.
func (c *Cluster) Faults() *broker.Faults { return c.cfg.Faults }

// Proxy returns the node's fault proxy (Cut isolates the node), or nil
// without Config.Proxy.
func (n *Node) Proxy() *Proxy { return n.proxy }

// Isolate cuts the node off from everything (on) or ends that (off): its
// clients, the other nodes' replication fetches and the KRaft quorum, as a
// network partition does. The node keeps running and, cut off, is fenced
// by the controller once its broker session expires; its partitions move
// to the others. Without Config.Proxy it does nothing.
func (n *Node) Isolate(on bool) {
	if n.proxy != nil {
		n.proxy.Cut(on)
	}
	for _, px := range n.peerProxies {
		px.Cut(on)
	}
}

// PID returns the process id of the node's current JVM.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

// Exited reports whether the node's current process has exited.
func (n *Node) Exited() bool {
	n.mu.Lock()
	ch := n.exited
	n.mu.Unlock()
	if ch == nil {
		return processGone(n.pid)
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// LogPath is the node's server.log.
func (n *Node) LogPath() string { return filepath.Join(n.dir, "server.log") }

func (n *Node) propsPath() string { return filepath.Join(n.dir, "server.properties") }
func (n *Node) dataDir() string   { return filepath.Join(n.dir, "data") }

func (n *Node) signal(sig syscall.Signal) error {
	if n.PID() == 0 || n.Exited() {
		return nil
	}
	if err := syscall.Kill(n.PID(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kafkacluster: signalling node %d (pid %d): %w", n.ID, n.PID(), err)
	}
	return nil
}

func (n *Node) stop(sig syscall.Signal, grace time.Duration) error {
	if err := n.signal(sig); err != nil {
		return err
	}
	deadline := time.Now().Add(grace)
	for !n.Exited() {
		if time.Now().After(deadline) {
			return fmt.Errorf("kafkacluster: node %d (pid %d) did not exit within %s of %s", n.ID, n.PID(), grace, sig)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// logSinceStart is what the node's current process has written to
// stdout.log and server.log.
func (n *Node) logSinceStart() string {
	n.mu.Lock()
	from := n.logFrom
	n.mu.Unlock()
	return readFrom(filepath.Join(n.dir, "stdout.log"), from[0]) + readFrom(n.LogPath(), from[1])
}

// readFrom is the file at path from offset on ("" if it cannot be read).
func readFrom(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || offset > int64(len(b)) {
		return string(b)
	}
	return string(b[offset:])
}

// fileSize is the size of the file at path, 0 if there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// freePort asks the kernel for a free TCP port on host. The port is free
// when asked; a JVM binds it a second later, so another process could take
// it in between (Start then chooses again, see PortTakenError).
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("kafkacluster: finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// processGone reports whether pid no longer names a live process (a zombie
// counts as gone).
func processGone(pid int) bool {
	if pid <= 0 {
		return true
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] == 'Z'
		}
	}
	return false
}
