package reconcile

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the reconciler's Prometheus metrics. The one to alert on is
// eos_reconcile_last_success_timestamp_seconds: when it stops moving, the
// last line of defence is down, whatever the discrepancy counts say.
type Metrics struct {
	reg         *prometheus.Registry
	lastSuccess prometheus.Gauge
	found       *prometheus.GaugeVec
	runs        *prometheus.CounterVec
	duration    prometheus.Histogram
}

// Metric names.
const (
	MetricLastSuccess   = "eos_reconcile_last_success_timestamp_seconds"
	MetricDiscrepancies = "eos_reconcile_discrepancies"
	MetricRuns          = "eos_reconcile_runs_total"
	MetricDuration      = "eos_reconcile_run_duration_seconds"
)

// NewMetrics creates the metrics of the reconciler called name.
func NewMetrics(name string) *Metrics {
	reg := prometheus.NewRegistry()
	w := prometheus.WrapRegistererWith(prometheus.Labels{"name": name}, reg)
	m := &Metrics{
		reg:         reg,
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLastSuccess, Help: "Unix time the last run finished without error (discrepancies or not). Alert when it stops moving."}),
		found:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricDiscrepancies, Help: "Discrepancies the last successful run found in the range it read, by kind (missing, changed; extra from the last run that read from offset 0)."}, []string{"kind"}),
		runs:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRuns, Help: "Runs, by result (clean, discrepancies, error)."}, []string{"result"}),
		duration:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricDuration, Help: "How long a run took.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 15)}),
	}
	w.MustRegister(m.lastSuccess, m.found, m.runs, m.duration, prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	for _, k := range []string{"missing", "extra", "changed"} {
		m.found.WithLabelValues(k)
	}
	for _, r := range []string{"clean", "discrepancies", "error"} {
		m.runs.WithLabelValues(r)
	}
	return m
}

// Handler serves the metrics.
func (m *Metrics) Handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// observe records a run's outcome.
func (m *Metrics) observe(rep *Report, err error, took time.Duration) {
	if m == nil {
		return
	}
	m.duration.Observe(took.Seconds())
	switch {
	case err != nil:
		m.runs.WithLabelValues("error").Inc()
		return
	case rep.Clean():
		m.runs.WithLabelValues("clean").Inc()
	default:
		m.runs.WithLabelValues("discrepancies").Inc()
	}
	m.found.WithLabelValues("missing").Set(float64(len(rep.Missing)))
	if rep.ExtraChecked { // an incremental run cannot tell: keep the last full run's count
		m.found.WithLabelValues("extra").Set(float64(len(rep.Extra)))
	}
	m.found.WithLabelValues("changed").Set(float64(len(rep.Changed)))
	m.lastSuccess.Set(float64(rep.Finished.UnixNano()) / 1e9)
}

// Watch runs the reconciler every interval until ctx ends, each run
// continuing from the previous one's watermark (a Config.From applies to
// the first run only). A failed run is reported to onRun and retried at the
// next interval: the reconciler keeps going, and its stalled
// last-success metric is what tells.
func Watch(ctx context.Context, cfg Config, interval time.Duration, m *Metrics, onRun func(*Report, error)) {
	for {
		start := time.Now()
		rep, err := Run(ctx, cfg)
		if ctx.Err() != nil {
			return
		}
		m.observe(rep, err, time.Since(start))
		if onRun != nil {
			onRun(rep, err)
		}
		cfg.From = nil
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}
