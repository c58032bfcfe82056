package sink

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are a sink's Prometheus metrics, named like the worker's (eos_
// prefix, base units, _total counters, histograms) and labelled with the
// group. Serve Handler; one Metrics per Sink.
type Metrics struct {
	reg        *prometheus.Registry
	records    prometheus.Counter
	rows       prometheus.Counter
	duplicates prometheus.Counter
	dead       *prometheus.CounterVec
	batches    prometheus.Counter
	batchTime  prometheus.Histogram
	dbErrors   *prometheus.CounterVec
	fenced     prometheus.Counter
	lag        *prometheus.GaugeVec
	lastCommit prometheus.Gauge
}

// Metric names.
const (
	MetricRecords    = "eos_sink_records_consumed_total"
	MetricRows       = "eos_sink_rows_written_total"
	MetricDuplicates = "eos_sink_duplicates_absorbed_total"
	MetricDead       = "eos_sink_dead_letters_total"
	MetricBatches    = "eos_sink_batches_total"
	MetricBatchTime  = "eos_sink_batch_duration_seconds"
	MetricDBErrors   = "eos_sink_db_errors_total"
	MetricFenced     = "eos_sink_offset_conflicts_total"
	MetricLag        = "eos_sink_lag_records"
	MetricLastCommit = "eos_sink_last_commit_timestamp_seconds"
)

// NewMetrics creates the metrics of the sink of group.
func NewMetrics(group string) *Metrics {
	reg := prometheus.NewRegistry()
	w := prometheus.WrapRegistererWith(prometheus.Labels{"group": group}, reg)
	w.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		w.MustRegister(c)
		return c
	}
	m := &Metrics{
		reg:        reg,
		records:    counter(MetricRecords, "Records read from Kafka (read_committed) and committed to the database, as rows or dead letters."),
		rows:       counter(MetricRows, "Rows inserted or changed in the database."),
		duplicates: counter(MetricDuplicates, "Records whose row was already there (the idempotency key or the transition absorbed them)."),
		batches:    counter(MetricBatches, "Database transactions committed."),
		fenced:     counter(MetricFenced, "Batches rolled back because the offsets in the database had moved (another process committed the range)."),
		dead:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDead, Help: "Records sent to the dead-letter topic, by reason."}, []string{"reason"}),
		dbErrors:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricDBErrors, Help: "Database errors, by class (connection, conflict, data, schema, auth, other)."}, []string{"class"}),
		batchTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricBatchTime, Help: "Time to write and commit one batch, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)}),
		lag:        prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricLag, Help: "Records between the last stable offset and the offset stored in the database, per partition."}, []string{"topic", "partition"}),
		lastCommit: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricLastCommit, Help: "Unix time of the last database commit."}),
	}
	w.MustRegister(m.dead, m.dbErrors, m.batchTime, m.lag, m.lastCommit)
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// The methods below accept a nil *Metrics, so the sink need not check.

func (m *Metrics) committed(records, rows, dups int, took time.Duration) {
	if m == nil {
		return
	}
	m.records.Add(float64(records))
	m.rows.Add(float64(rows))
	m.duplicates.Add(float64(dups))
	m.batches.Inc()
	m.batchTime.Observe(took.Seconds())
	m.lastCommit.Set(float64(time.Now().UnixNano()) / 1e9)
}

func (m *Metrics) deadLetter(reason string) {
	if m != nil {
		m.dead.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) dbError(class string) {
	if m != nil {
		m.dbErrors.WithLabelValues(class).Inc()
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.fenced.Inc()
	}
}

func (m *Metrics) setLag(topic string, partition int32, lag int64) {
	if m != nil {
		m.lag.WithLabelValues(topic, strconv.Itoa(int(partition))).Set(float64(max(lag, 0)))
	}
}

func (m *Metrics) dropLag(topic string, partition int32) {
	if m != nil {
		m.lag.DeleteLabelValues(topic, strconv.Itoa(int(partition)))
	}
}

// Duplicates is the eos_sink_duplicates_absorbed_total counter.
func (m *Metrics) Duplicates() prometheus.Counter { return m.duplicates }

// RowsWritten is the eos_sink_rows_written_total counter.
func (m *Metrics) RowsWritten() prometheus.Counter { return m.rows }
