package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/eosctl/eos/metrics"
	"github.com/eosctl/eos/pipeline"
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
}

func (m *runMetrics) flags(f *pflag.FlagSet) {
	def := defaultMetricsAddr
	if v, ok := os.LookupEnv("EOSCTL_METRICS_ADDR"); ok {
		def = v
	}
	f.StringVar(&m.addr, "metrics-addr", def, `serve Prometheus /metrics, /healthz and /readyz on this host:port; "" disables (env EOSCTL_METRICS_ADDR). Give every worker on a host its own port`)
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

// start listens on --metrics-addr (a busy port fails here, naming the flag)
// and polls offsets until ctx ends.
func (e *runExporter) start(ctx context.Context) error {
	if e == nil {
		return nil
	}
	srv, err := listenMetrics(e.m.addr, e.w.Handler())
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
