package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/spf13/cobra"
)

func newBrokerCmd(g *globals) *cobra.Command {
	var cfg broker.Config
	var configs []string
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run the embedded Kafka-protocol cluster in the foreground",
		Long: `Starts an embedded cluster (franz-go's kfake) that speaks the Kafka protocol over
TCP, with transactions, consumer groups and read_committed fetches, on
consecutive ports from --listen. State is persisted under --data-dir, so a
restart keeps topics, committed offsets and transaction state; the directory
is locked while it runs (a second broker on it fails, naming the first's
PID), and a start that fails leaves no new directory behind. Prints one
address per line on stdout once listening; SIGINT or SIGTERM shuts it down
cleanly, writing its state to disk. SIGUSR1 makes it SIGKILL itself between
two requests, a crash for fault drills: a restart on the same --data-dir
(with --sync-writes) recovers what it had acknowledged, and aborts the
transactions the crash interrupted.

The embedded cluster is for trying eos and for tests: it does not replicate
across machines. Point --brokers at a real Kafka cluster for anything else.`,
		Example: `  eosctl broker --data-dir ./.eosctl/data
  eosctl broker --nodes 3 --listen 127.0.0.1:19092 --rtt 1ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.BrokerConfigs = map[string]string{}
			for _, kv := range configs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usage(fmt.Errorf("--config %q: want key=value", kv))
				}
				cfg.BrokerConfigs[k] = v
			}
			if cfg.Nodes < 1 {
				return usage(fmt.Errorf("--nodes must be between 1 and 16, got %d", cfg.Nodes))
			}
			// A start that fails (a busy port, say) must not leave behind
			// the data directory it created.
			created := missingDirs(cfg.DataDir)
			b, err := broker.Start(cfg)
			if err != nil {
				for _, d := range created {
					_ = os.Remove(d) // only if still empty
				}
				return err
			}
			for _, a := range b.Addrs() {
				fmt.Println(a)
			}
			log.Info("embedded broker listening", "addrs", strings.Join(b.Addrs(), ","), "data_dir", cfg.DataDir, "rtt", cfg.RTT)
			ctx, stop := signalContext()
			defer stop()
			// SIGUSR1: crash (SIGKILL) between two requests, for the
			// chaos suite's hard bounce (see broker.KillBetweenRequests).
			crash := make(chan os.Signal, 1)
			signal.Notify(crash, syscall.SIGUSR1)
			go func() {
				<-crash
				log.Warn("SIGUSR1: killing this broker between two requests")
				b.KillBetweenRequests()
			}()
			<-ctx.Done()
			log.Info("shutting down; writing state to disk")
			b.Close()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:9092", "host:port of the first node; node i listens on port+i (port 0: random ports)")
	f.IntVar(&cfg.Nodes, "nodes", 1, "number of broker nodes")
	f.StringVar(&cfg.DataDir, "data-dir", "./.eosctl/data", "directory to persist state in; empty keeps everything in memory")
	f.BoolVar(&cfg.SyncWrites, "sync-writes", false, "fsync every write, so that a SIGKILLed broker loses nothing it acknowledged (slower)")
	f.DurationVar(&cfg.RTT, "rtt", 0, "round-trip time to inject on every connection (e.g. 1ms), to make loopback behave like a network")
	f.DurationVar(&cfg.MinSessionTimeout, "min-session-timeout", time.Second, "smallest group session timeout the broker accepts (Kafka's default is 6s)")
	f.StringArrayVar(&configs, "config", nil, "broker config key=value, repeatable (e.g. transaction.max.timeout.ms=60000)")
	return cmd
}

// missingDirs returns dir and those of its ancestors that do not exist,
// innermost first: what creating dir would create.
func missingDirs(dir string) []string {
	var out []string
	for d := filepath.Clean(dir); dir != ""; d = filepath.Dir(d) {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			break
		}
		out = append(out, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	return out
}
