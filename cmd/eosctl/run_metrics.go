package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/eosctl/eos/metrics"
	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
	"github.com/spf13/pflag"
)

// defaultMetricsAddr is where `eosctl run` serves metrics unless told
// otherwise. EOSCTL_METRICS_ADDR overrides it; set it empty to disable
// metrics for every worker a script or test harness starts.
const defaultMetricsAddr = "127.0.0.1:9464"

// runMetrics are the --metrics-* flags of `eosctl run`.
type runMetrics struct {
	addr     string
	interval time.Duration
	linger   time.Duration
	// chosen reports whether the user chose addr (the flag or the
	// environment variable), rather than taking the default.
	chosen func() bool
}

func (m *runMetrics) flags(f *pflag.FlagSet) {
	def := defaultMetricsAddr
	v, fromEnv := os.LookupEnv("EOSCTL_METRICS_ADDR")
	if fromEnv {
		def = v
	}
	f.StringVar(&m.addr, "metrics-addr", def, `serve Prometheus /metrics, /healthz and /readyz on this host:port; "" disables (env EOSCTL_METRICS_ADDR). If the default port is taken (a second worker on this host), a free port is used and logged; a port given here that is taken fails start-up`)
	m.chosen = func() bool { return fromEnv || f.Changed("metrics-addr") }
	f.DurationVar(&m.interval, "metrics-interval", metrics.DefaultPollInterval, "how often the lag and transaction gauges are read from the admin API")
	f.DurationVar(&m.linger, "metrics-linger", 0, "after the worker stops with an error (fenced, failed), keep serving the final metrics this long so a scrape sees why; SIGINT ends it early")
}

// runExporter is the metrics of one `eosctl run`, nil when disabled.
type runExporter struct {
	m   *runMetrics
	w   *metrics.Worker
	log *slog.Logger
	srv *metrics.Server
}

// wire creates the exporter and hooks it into cfg: the events, and the
// client metrics of every client the worker creates. It does not listen
// yet; start does, once the configuration is known to be valid.
func (m *runMetrics) wire(cfg *pipeline.Config) (*runExporter, error) {
	if m.addr == "" {
		return nil, nil
	}
	if m.interval <= 0 {
		return nil, usage(fmt.Errorf("--metrics-interval must be positive, got %s", m.interval))
	}
	if m.linger < 0 {
		return nil, usage(fmt.Errorf("--metrics-linger must not be negative, got %s", m.linger))
	}
	interval := cfg.CommitInterval
	if cfg.AutoInterval {
		interval = cfg.MaxCommitInterval
		if interval == 0 {
			interval = pipeline.DefaultMaxCommitInterval
		}
	}
	w := metrics.NewWorker(metrics.WorkerConfig{
		App: cfg.App, Instance: cfg.Instance, Inputs: cfg.Inputs, Output: cfg.Output,
		CommitInterval: interval, PollInterval: m.interval,
		ClientOpts: cfg.ClientOpts, Logger: cfg.Logger,
	})
	cfg.OnEvent = pipeline.Chain(cfg.OnEvent, w.OnEvent)
	cfg.ClientOpts = append(cfg.ClientOpts, w.ClientHooks())
	return &runExporter{m: m, w: w, log: cfg.Logger}, nil
}

// start listens on --metrics-addr and polls offsets until ctx ends. A busy
// port the user chose fails here, naming the flag; a busy default port
// (another worker on this host took it) is replaced by a free one, with a
// warning that says which, so that two workers started as the README does
// both run.
func (e *runExporter) start(ctx context.Context) error {
	if e == nil {
		return nil
	}
	srv, err := listenMetrics(e.m.addr, e.w.Handler())
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && !e.m.chosen() {
		host, _, _ := net.SplitHostPort(e.m.addr)
		if srv, err = listenMetrics(net.JoinHostPort(host, "0"), e.w.Handler()); err == nil {
			e.log.Warn("the default metrics port is taken (another worker on this host?); serving metrics on a free port instead: give each worker its own --metrics-addr to scrape it at a known address",
				"taken", e.m.addr, "url", "http://"+srv.Addr()+"/metrics")
		}
	}
	if err != nil {
		return err
	}
	e.srv = srv
	go e.w.Run(ctx)
	return nil
}

// url is where the metrics are served, "" when disabled; `eosctl run` logs
// it with the worker's start, so that a worker that fails to start prints
// only its error.
func (e *runExporter) url() string {
	if e == nil || e.srv == nil {
		return ""
	}
	return "http://" + e.srv.Addr() + "/metrics"
}

// finish keeps serving for --metrics-linger after a failed run, then stops
// the server.
func (e *runExporter) finish(ctx context.Context, runErr error) {
	if e == nil || e.srv == nil {
		return
	}
	if runErr != nil && e.m.linger > 0 && e.w.Started() && ctx.Err() == nil {
		e.log.Info("worker stopped; serving its final metrics before exiting", "for", e.m.linger)
		select {
		case <-ctx.Done():
		case <-time.After(e.m.linger):
		}
	}
	_ = e.srv.Close()
}

// watch feeds a topology's own counts to the exporter: the dedup
// topology's and the etl join's, read after each commit. The topology sees each event before
// the exporter, so the commit it counts is the one being exported.
func (e *runExporter) watch(t pipeline.Transform, cfg *pipeline.Config) {
	if u, ok := t.(interface{ Unwrap() pipeline.Transform }); ok {
		t = u.Unwrap() // a topology reading or writing Avro: its counts are the JSON topology's
	}
	if etl, ok := t.(*topologies.ETL); ok && e != nil {
		if _, join := etl.JoinStats(); join {
			e.w.WatchJoin(func() metrics.JoinStats {
				s, _ := etl.JoinStats()
				return metrics.JoinStats{Rows: s.Rows, Restored: s.Restored, Lookups: s.Lookups, Misses: s.Misses, Dropped: s.Dropped}
			})
		}
	}
	d, ok := t.(*topologies.Dedup)
	if !ok {
		return
	}
	cfg.OnEvent = pipeline.Chain(d.OnEvent, cfg.OnEvent)
	if e != nil {
		e.w.WatchDedup(func() metrics.DedupStats { return metrics.DedupStats(d.Stats()) })
	}
}
