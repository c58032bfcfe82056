package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos/internal/conn"
	"github.com/eosctl/eos/topologies"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"
)

// defaultTimeout is --timeout's default: how long a command waits for the
// brokers' first answer.
const defaultTimeout = 10 * time.Second

// globals are the flags every command shares.
type globals struct {
	brokers   string
	timeout   time.Duration
	logLevel  string
	logFormat string
	conn      conn.Config
	registry  topologies.SchemaRegistry
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "eosctl",
		Short: "Exactly-once Kafka-to-Kafka stream processing",
		Long: `eosctl runs Kafka-to-Kafka topologies with exactly-once semantics: it reads
with read_committed, transforms, produces, and commits the consumed offsets in
the same transaction as the output, under a fixed transactional.id per worker
instance.

Exactly-once holds only inside Kafka: the outputs and the offsets commit
together, and only consumers reading with isolation.level=read_committed see
exactly the committed result. Anything a topology does outside Kafka (a
database write, an HTTP call) happens at least once; make it idempotent, using
the eos-idempotency-key header every output record carries.

With no Kafka at hand, "eosctl quickstart" runs the whole story on an embedded
broker, and "eosctl broker" starts one to point the other commands at.

Exit codes: 0 success; 1 failure (verify found a problem, brokers unreachable,
runtime error); 2 bad input (flag, topology, missing topic); 3 fenced by another
instance with the same transactional.id; 4 authorization failure; 5 reconcile
found discrepancies; 130 interrupted (SIGINT or SIGTERM stopped a command
before it was done; its line says what was done; a worker stopped so commits
and exits 0).`,
		Example: `  # the whole story in one command, on an embedded broker
  eosctl quickstart

  # or step by step (as in the README)
  eosctl broker --data-dir ./.eosctl/data &
  eosctl produce --topic in --count 100000
  eosctl run passthrough --app copy --instance 0 --input in --output out &
  eosctl run passthrough --app copy --instance 1 --input in --output out &
  eosctl verify --input in --output out --wait-caught-up copy`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	pf := root.PersistentFlags()
	pf.StringVar(&g.brokers, "brokers", envOr("EOSCTL_BROKERS", "127.0.0.1:9092"), "comma-separated seed brokers (env EOSCTL_BROKERS)")
	pf.DurationVar(&g.timeout, "timeout", defaultTimeout, "how long to wait for the brokers to answer before failing")
	pf.StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format: text or json (logs go to stderr)")
	pf.BoolVar(&g.conn.TLS, "tls", envOr("EOSCTL_TLS", "") == "true", "connect with TLS (env EOSCTL_TLS=true)")
	pf.StringVar(&g.conn.TLSCA, "tls-ca", envOr("EOSCTL_TLS_CA", ""), "PEM file of CAs to trust instead of the system's (implies --tls; env EOSCTL_TLS_CA)")
	pf.StringVar(&g.conn.TLSCert, "tls-cert", envOr("EOSCTL_TLS_CERT", ""), "PEM client certificate for mutual TLS (env EOSCTL_TLS_CERT)")
	pf.StringVar(&g.conn.TLSKey, "tls-key", envOr("EOSCTL_TLS_KEY", ""), "PEM client key for mutual TLS (env EOSCTL_TLS_KEY)")
	pf.BoolVar(&g.conn.TLSInsecureSkipVerify, "tls-insecure-skip-verify", false, "do not verify the brokers' certificates (dangerous; warns)")
	pf.StringVar(&g.conn.SASLMechanism, "sasl-mechanism", envOr("EOSCTL_SASL_MECHANISM", ""), "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (env EOSCTL_SASL_MECHANISM)")
	pf.StringVar(&g.conn.SASLUser, "sasl-user", envOr("EOSCTL_SASL_USER", ""), "SASL user name (env EOSCTL_SASL_USER)")
	pf.StringVar(&g.conn.SASLPassword, "sasl-password", "", "SASL password; prefer the environment variable EOSCTL_SASL_PASSWORD, which ps does not show")
	schemaRegistryFlags(pf, &g.registry)

	root.AddCommand(
		newBrokerCmd(g),
		newProduceCmd(g),
		newRunCmd(g),
		newVerifyCmd(g),
		newQuickstartCmd(g),
		newDemoCmd(g),
		newChaosCmd(g),
		newTxnCmd(g),
		newLagCmd(g),
		newMonitorCmd(g),
		newBenchCmd(g),
		newTopologyCmd(g),
		newConsumeCmd(g),
		newSinkCmd(g),
		newReconcileCmd(g),
	)
	return root
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// brokersFrom says where the user named brokers: "--brokers", or
// "EOSCTL_BROKERS" when only the environment did, or "" when neither did.
// Commands that can start an embedded broker (bench, demo fencing) start
// one only then; every other command connects to --brokers' default.
func brokersFrom(cmd *cobra.Command) string {
	switch {
	case cmd.Flags().Changed("brokers"):
		return "--brokers"
	case os.Getenv("EOSCTL_BROKERS") != "":
		return "EOSCTL_BROKERS"
	}
	return ""
}

// seeds returns the --brokers list, validated.
func (g *globals) seeds() ([]string, error) {
	out := splitList(g.brokers)
	if len(out) == 0 {
		return nil, usage(fmt.Errorf("--brokers is empty"))
	}
	if g.timeout <= 0 {
		return nil, usage(fmt.Errorf("--timeout must be positive, got %s", g.timeout))
	}
	return out, nil
}

// clientOpts returns the connection options shared by every client.
func (g *globals) clientOpts() ([]kgo.Opt, error) {
	seeds, err := g.seeds()
	if err != nil {
		return nil, err
	}
	c := g.conn
	c.Brokers = seeds
	if c.SASLPassword == "" {
		c.SASLPassword = os.Getenv("EOSCTL_SASL_PASSWORD")
	}
	log, err := g.logger()
	if err != nil {
		return nil, err
	}
	opts, err := c.Opts(log)
	if err != nil {
		return nil, usage(err)
	}
	return append(opts, kgo.ClientID("eosctl")), nil
}

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usage(fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel))
	}
	opts := &slog.HandlerOptions{Level: level}
	switch g.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, usage(fmt.Errorf("--log-format %q: want text or json", g.logFormat))
}

// signalContext is canceled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// isTerminal reports whether f is a terminal. It asks the terminal driver
// (golang.org/x/term) rather than checking for a character device, which
// /dev/null also is: a child process whose stderr nobody reads (exec.Cmd's
// default) was drawing progress bars into it.
func isTerminal(f *os.File) bool {
	return term.IsTerminal(int(f.Fd()))
}

// splitList returns the non-empty, trimmed items of a comma-separated flag
// value ("a, b,,c" is a, b, c).
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
