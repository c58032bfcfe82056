package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/eosctl/eos/metrics"
	"github.com/spf13/cobra"
)

func newMonitorCmd(g *globals) *cobra.Command {
	var (
		cfg  metrics.MonitorConfig
		addr string
	)
	cmd := &cobra.Command{
		Use:   "monitor [--topics T,...] [--groups G,...] [--metrics-addr HOST:PORT] [--interval 15s]",
		Short: "Export LSO lag, consumer lag and hanging transactions of any cluster to Prometheus",
		Long: `A standalone Prometheus exporter for topics and groups eos does not run
(Kafka Streams, any transactional producer). Every --interval it reads, through
the admin API, each partition's high watermark (ListOffsets latest), last
stable offset (ListOffsets read_committed) and each group's committed offsets,
and runs the find-hanging procedure of "eosctl txn hanging", and exports:

  eos_lso_lag_records{topic,partition}              HWM - LSO
  eos_consumer_lag_records{group,topic,partition}   LSO - committed
  eos_open_transaction_age_seconds{topic,partition} oldest open transaction
  eos_hanging_transactions{topic,partition}         open longer than
      --hanging-after (default: the brokers' transaction.max.timeout.ms)
      or unknown to their coordinator
  eos_offset_polls_total{result}, eos_last_offset_poll_timestamp_seconds

every metric labelled app="monitor" and instance (--instance). HWM-based
exporters (kafka_exporter, Burrow, kminion) measure lag against the high
watermark and report nothing wrong while one open transaction stops every
read_committed consumer; these gauges show it.

--topics defaults to every non-internal topic and --groups to every group,
both listed again at each poll; name them to bound the series count. /healthz
answers while the process runs, /readyz once the last poll succeeded.`,
		Example: `  eosctl monitor --topics orders,payments --groups billing --metrics-addr 0.0.0.0:9465
  eosctl monitor --interval 30s --hanging-after 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Interval <= 0 {
				return usage(fmt.Errorf("--interval must be positive, got %s", cfg.Interval))
			}
			if cfg.HangingAfter < 0 {
				return usage(fmt.Errorf("--hanging-after must not be negative, got %s", cfg.HangingAfter))
			}
			if addr == "" {
				return usage(fmt.Errorf(`--metrics-addr is required for monitor (it only exports metrics)`))
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			ctx, stop := signalContext()
			defer stop()
			c, err := g.connectAdmin(ctx) // fail fast on unreachable brokers
			if err != nil {
				return err
			}
			c.close()
			if cfg.ClientOpts, err = g.clientOpts(); err != nil {
				return err
			}
			m, err := metrics.NewMonitor(cfg)
			if err != nil {
				return err
			}
			defer m.Close()
			srv, err := listenMetrics(addr, m.Handler())
			if err != nil {
				return err
			}
			defer srv.Close()
			if err := m.Poll(ctx); err != nil {
				return fmt.Errorf("first poll: %w", err)
			}
			log.Info("monitor serving metrics", "url", "http://"+srv.Addr()+"/metrics", "topics", strings.Join(orAll(cfg.Topics), ","), "groups", strings.Join(orAll(cfg.Groups), ","), "interval", cfg.Interval)
			return m.Run(ctx)
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Topics, "topics", nil, "topics to watch (default: all non-internal topics)")
	f.StringSliceVar(&cfg.Groups, "groups", nil, "consumer groups to export lag for (default: all groups)")
	f.StringVar(&addr, "metrics-addr", "127.0.0.1:9465", "serve /metrics, /healthz and /readyz on this host:port")
	f.DurationVar(&cfg.Interval, "interval", 15*time.Second, "time between polls of the admin API")
	f.DurationVar(&cfg.HangingAfter, "hanging-after", 0, "age past which an open transaction counts as hanging (default: the brokers' transaction.max.timeout.ms)")
	f.StringVar(&cfg.Instance, "instance", host, "value of the instance label")
	return cmd
}

func orAll(ss []string) []string {
	if len(ss) == 0 {
		return []string{"(all)"}
	}
	return ss
}

// listenMetrics binds --metrics-addr at start-up, so that a bad or busy
// address fails the command before it does anything else, naming the flag.
func listenMetrics(addr string, h http.Handler) (*metrics.Server, error) {
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return nil, usage(fmt.Errorf("--metrics-addr %q is not host:port (e.g. 127.0.0.1:9464, or \"\" to disable)", addr))
	}
	srv, err := metrics.Listen(addr, h)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w (is another eosctl using the port? pick a free one, or --metrics-addr \"\" to disable)", addr, unwrapListen(err))
	}
	return srv, nil
}

// unwrapListen drops the "cannot listen on ADDR:" prefix the flag message
// already says.
func unwrapListen(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
