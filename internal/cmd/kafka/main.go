// Command kafka starts, stops and reports on a real Apache Kafka cluster on
// loopback for trying eosctl against the broker users run. scripts/kafka
// and `make kafka` run it; the tests use package kafkacluster directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos/internal/kafkacluster"
)

const usage = `Usage: scripts/kafka start|stop|status [flags]

Runs a real Apache Kafka cluster (KRaft, combined broker+controller nodes) on
loopback, from the jars Maven Central serves: nothing to install but Java 17+
and Maven. The first start resolves the jars into ~/.cache/eos (or
$EOS_KAFKA_CACHE); later starts reuse them.

  start    format and start the nodes, wait until all answer, print the
           bootstrap list (exit 0), and leave them running
  stop     stop the nodes by PID (SIGTERM, then SIGKILL after 30s)
  status   list the nodes, their PIDs and logs; exit 1 if none is running

With 3 nodes (the default) the cluster is set up as production clusters that
run exactly-once are: replication factor 3 and min.insync.replicas 2 for
topics and the transaction and offsets logs.

Examples:
  scripts/kafka start                  # 3 nodes on 127.0.0.1:9092-9094
  eosctl --brokers 127.0.0.1:9092 quickstart --help
  scripts/kafka start --nodes 1        # one node, for quick runs
  scripts/kafka start --ports 0        # free ports, printed at the end
  scripts/kafka stop

Flags:
`

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") || os.Args[1] == "help" {
		// Asked for help: the usage on stdout, exit 0. No command, or a
		// flag where the command goes: the same on stderr, exit 2.
		out, code := os.Stderr, 2
		if len(os.Args) == 2 && (os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "-help") {
			out, code = os.Stdout, 0
		}
		fs, _ := flags("help")
		fs.SetOutput(out)
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
		os.Exit(code)
	}
	cmd := os.Args[1]
	fs, o := flags(cmd)
	if err := fs.Parse(os.Args[2:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	nodes, ports, version, heap, configs, dir := o.nodes, o.ports, o.version, o.heap, o.configs, o.dir
	var err error
	switch cmd {
	case "start":
		err = start(*dir, *nodes, *ports, *version, *heap, configs)
	case "stop":
		err = kafkacluster.StopDir(*dir, 30*time.Second)
		if err == nil {
			fmt.Printf("stopped the cluster in %s (its data and logs stay there)\n", *dir)
		}
	case "status":
		err = status(*dir)
	default:
		fmt.Fprintf(os.Stderr, "kafka: unknown command %q (want start, stop or status)\n", cmd)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka:", describe(err))
		if errors.Is(err, kafkacluster.ErrMissingTool) || errors.Is(err, errBadFlag) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errBadFlag = errors.New("bad flag")

// options are the flags every command takes.
type options struct {
	nodes                     *int
	ports, version, heap, dir *string
	configs                   multi
}

// flags is the flag set of command name, which prints the usage and every
// flag's default on -h.
func flags(name string) (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	o := &options{
		nodes:   fs.Int("nodes", 3, "number of combined broker+controller nodes (1-9)"),
		ports:   fs.String("ports", "9092", "client port of the first node (the others follow), a comma-separated list, or 0 for free ports"),
		version: fs.String("version", kafkacluster.DefaultVersion, "Apache Kafka version (4.0.1-4.4.0 resolve from Maven Central)"),
		heap:    fs.String("heap", "512m", "JVM heap of each node"),
		dir:     fs.String("dir", filepath.Join(os.TempDir(), "eos-kafka"), "directory for the nodes' configuration, data and logs"),
	}
	fs.Var(&o.configs, "config", "broker setting KEY=VALUE for every node (repeatable), e.g. transaction.max.timeout.ms=3600000")
	return fs, o
}

func start(dir string, nodes int, ports, version, heap string, configs multi) error {
	if _, _, err := kafkacluster.Status(dir); err == nil {
		return fmt.Errorf("a cluster is already set up in %s: run scripts/kafka stop first, or pass another --dir", dir)
	}
	cfg := kafkacluster.Config{Version: version, Nodes: nodes, Dir: dir, Heap: heap, Detach: true,
		BrokerConfigs: map[string]string{},
		Logf:          func(f string, a ...any) { fmt.Fprintf(os.Stderr, "kafka: "+f+"\n", a...) }}
	var err error
	if cfg.Ports, err = parsePorts(ports, nodes); err != nil {
		return err
	}
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: --config %q is not KEY=VALUE", errBadFlag, kv)
		}
		cfg.BrokerConfigs[k] = v
	}
	// A fresh start: old data from a previous run would belong to another
	// cluster id and stop the nodes from starting.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := kafkacluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "kafka: Apache Kafka %s is up with %d node(s); logs in %s/node-*/server.log; stop with scripts/kafka stop\n", version, nodes, c.Dir())
	fmt.Println(strings.Join(c.Addrs(), ","))
	return nil
}

func status(dir string) error {
	version, nodes, err := kafkacluster.Status(dir)
	if err != nil {
		return err
	}
	running := 0
	fmt.Printf("Apache Kafka %s in %s\n", version, dir)
	for _, n := range nodes {
		st := "stopped"
		if n.Running {
			st, running = "running", running+1
		}
		fmt.Printf("node %d  %-8s pid %-8d %s  %s\n", n.ID, st, n.PID, n.Addr, n.Log)
	}
	if running == 0 {
		return fmt.Errorf("no node of the cluster in %s is running", dir)
	}
	return nil
}

func parsePorts(s string, nodes int) ([]int, error) {
	parts := strings.Split(s, ",")
	var out []int
	for _, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("%w: --ports %q: %q is not a port", errBadFlag, s, p)
		}
		out = append(out, n)
	}
	if len(out) == 1 && out[0] != 0 {
		for i := 1; i < nodes; i++ {
			out = append(out, out[0]+i)
		}
	}
	if len(out) == 1 && out[0] == 0 {
		return nil, nil
	}
	if len(out) != nodes {
		return nil, fmt.Errorf("%w: --ports names %d ports for %d nodes", errBadFlag, len(out), nodes)
	}
	return out, nil
}

// describe is err for the user: a port taken that --ports named says so
// in flag terms; other errors keep every line (a node's log tail follows
// "its log ends:").
func describe(err error) string {
	var taken *kafkacluster.PortTakenError
	if errors.As(err, &taken) && taken.Given {
		msg := fmt.Sprintf("node %d could not bind port %d, which --ports gave it: %s (%s); free the port or choose others with --ports", taken.Node, taken.Port, taken.Line, taken.Log)
		if taken.Ephemeral != [2]int{} {
			msg += fmt.Sprintf(", below %d: ports %d-%d are the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), which outgoing connections, the nodes' own included, take from at any time", taken.Ephemeral[0], taken.Ephemeral[0], taken.Ephemeral[1])
		}
		return msg
	}
	return err.Error()
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
