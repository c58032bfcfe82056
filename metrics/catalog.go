// Package metrics exports, in Prometheus form, what an exactly-once
// pipeline's operator needs to watch, for worker processes and standalone
// exporters: the workers' own commit and abort picture
// (from their lifecycle events), client metrics (franz-go's kprom), and the
// lag that matters under read_committed, measured against the last stable
// offset, with open and hanging transactions (from the admin API, on a
// bounded interval, never on the hot path).
//
// Every metric is declared once, in the catalog below, and registered from
// it: the Grafana dashboard's test checks its queries against Catalog, and
// the naming test checks the catalog against Prometheus conventions (one
// eos_ prefix, base units, _total on counters, histograms, not summaries).
//
// Two exporters use it: Worker, for a worker process's own endpoint (eosctl
// run serves it), and Monitor, for a standalone exporter (eosctl monitor)
// of the lag and transaction gauges of topics and groups eos does not run.
package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is a metric's Prometheus type.
type Kind string

// The kinds of metric the catalog declares; there are no summaries.
const (
	Counter   Kind = "counter"
	Gauge     Kind = "gauge"
	Histogram Kind = "histogram"
)

// Scope says which exporter registers a metric.
type Scope int

const (
	// WorkerOnly metrics come from a worker's events.
	WorkerOnly Scope = iota
	// Shared metrics come from the offset poller that both the worker
	// and the monitor run.
	Shared
)

// Desc declares one metric.
type Desc struct {
	Name    string
	Help    string
	Kind    Kind
	Labels  []string // beyond the app and instance labels every metric has
	Buckets []float64
	Scope   Scope
}

// Metric names.
const (
	RecordsConsumed     = "eos_records_consumed_total"
	RecordsProduced     = "eos_records_produced_total"
	Transactions        = "eos_transactions_total"
	TransactionAborts   = "eos_transaction_aborts_total"
	TransactionDuration = "eos_transaction_duration_seconds"
	CommitDuration      = "eos_commit_duration_seconds"
	CommitFlushDuration = "eos_commit_flush_duration_seconds"
	TransactionRecords  = "eos_transaction_records"
	ProducerID          = "eos_producer_id"
	ProducerEpoch       = "eos_producer_epoch"
	ProducerFenced      = "eos_producer_fenced_total"
	ProducerReinits     = "eos_producer_reinits_total"
	Rebalances          = "eos_rebalances_total"
	AssignedPartitions  = "eos_assigned_partitions"
	LastCommit          = "eos_last_commit_timestamp_seconds"
	Ready               = "eos_ready"
	DeadLetters         = "eos_dead_letters_total"
	StateRestores       = "eos_state_restores_total"
	RestoredRecords     = "eos_state_restored_records_total"
	RestoreRemaining    = "eos_state_restore_remaining_records"
	RestoreDuration     = "eos_state_restore_duration_seconds"

	DedupPassed   = "eos_dedup_passed_total"
	DedupRepeats  = "eos_dedup_repeats_total"
	DedupKeysHeld = "eos_dedup_keys_held"

	JoinRestoredRows = "eos_join_restored_rows_total"
	JoinRows         = "eos_join_rows"
	JoinLookups      = "eos_join_lookups_total"
	JoinMisses       = "eos_join_misses_total"
	JoinDropped      = "eos_join_dropped_total"

	LSOLag             = "eos_lso_lag_records"
	ConsumerLag        = "eos_consumer_lag_records"
	OpenTransactionAge = "eos_open_transaction_age_seconds"
	HangingTxns        = "eos_hanging_transactions"
	OffsetPolls        = "eos_offset_polls_total"
	LastOffsetPoll     = "eos_last_offset_poll_timestamp_seconds"
)

// ClientPrefix prefixes franz-go's kprom client metrics (eos_client_...).
const ClientPrefix = "eos_client_"

// Abort reasons the worker reports (pipeline's aborted event); they are
// pre-created at 0 so that rate() works from the first scrape.
var abortReasons = []string{"requested", "rebalance", "produce-failed"}

var catalog = []Desc{
	{Name: RecordsConsumed, Kind: Counter, Help: "Input records consumed in committed transactions (records of aborted transactions are consumed again and counted then)."},
	{Name: RecordsProduced, Kind: Counter, Help: "Output records produced in committed transactions."},
	{Name: Transactions, Kind: Counter, Labels: []string{"result"}, Help: `Transactions ended with a known outcome, by result: "committed" or "aborted".`},
	{Name: TransactionAborts, Kind: Counter, Labels: []string{"reason"}, Help: `Aborted transactions by reason: "requested", "rebalance" (the group rebalanced before the commit), "produce-failed".`},
	{Name: TransactionDuration, Kind: Histogram, Buckets: prometheus.ExponentialBucketsRange(0.001, 120, 16), Help: "Committed transactions from Begin to the EndTxn acknowledgement, in seconds."},
	{Name: CommitDuration, Kind: Histogram, Buckets: prometheus.ExponentialBucketsRange(0.0002, 30, 16), Help: "The commit of a transaction: flush, offset commit and EndTxn, in seconds."},
	{Name: CommitFlushDuration, Kind: Histogram, Buckets: prometheus.ExponentialBucketsRange(0.0002, 30, 16), Help: "The flush part of a commit: waiting for the transaction's records in flight, in seconds; the rest of eos_commit_duration_seconds is the offset commit and EndTxn."},
	{Name: TransactionRecords, Kind: Histogram, Buckets: prometheus.ExponentialBuckets(1, 4, 12), Help: "Records produced per committed transaction (the records the transaction writes)."},
	{Name: ProducerID, Kind: Gauge, Help: "The producer id this worker's transactional.id holds."},
	{Name: ProducerEpoch, Kind: Gauge, Help: "The producer epoch this worker holds; it rises on every restart and re-initialisation (and on every commit under KIP-890)."},
	{Name: ProducerFenced, Kind: Counter, Help: "Times this worker was fenced by another incarnation with its transactional.id (it then stops)."},
	{Name: ProducerReinits, Kind: Counter, Help: "Producer re-initialisations after a transaction outcome was unknown."},
	{Name: Rebalances, Kind: Counter, Help: "Completed consumer group rebalances (assignments) this worker took part in."},
	{Name: AssignedPartitions, Kind: Gauge, Help: "Input partitions assigned to this worker."},
	{Name: LastCommit, Kind: Gauge, Help: "Unix time of the last committed transaction, 0 if none yet."},
	{Name: Ready, Kind: Gauge, Help: "1 if /readyz answers 200, else 0."},
	{Name: DeadLetters, Kind: Counter, Help: "Records sent to the dead-letter topic in committed transactions: input the topology could not process (malformed, late, failing expressions)."},
	{Name: StateRestores, Kind: Counter, Help: "Completed restores of keyed state from its changelogs, one per assignment of state partitions."},
	{Name: RestoredRecords, Kind: Counter, Help: "Changelog records applied by completed restores."},
	{Name: RestoreRemaining, Kind: Gauge, Help: "Changelog records the restore in progress has still to read (updated every second; 0 when none runs). Assigned partitions are not processed until it reaches 0."},
	{Name: RestoreDuration, Kind: Histogram, Buckets: prometheus.ExponentialBucketsRange(0.001, 600, 16), Help: "Completed restores of keyed state, from assignment to processing, in seconds."},
	{Name: DedupPassed, Kind: Counter, Help: "dedup topology: records let through (the first of their key within the retention) in committed transactions; 0 for other topologies."},
	{Name: DedupRepeats, Kind: Counter, Help: "dedup topology: repeats dropped or sent to the audit output in committed transactions; 0 for other topologies."},
	{Name: DedupKeysHeld, Kind: Gauge, Help: "dedup topology: keys held (passed within the retention) in this worker's partitions after its last commit; 0 for other topologies."},
	{Name: JoinRestoredRows, Kind: Counter, Help: "etl join: table records read, by restores of newly assigned partitions and by the catch-up before each poll's records (read at each commit); 0 without a join."},
	{Name: JoinRows, Kind: Gauge, Help: "etl join: table rows held in this worker's partitions (read at each commit); 0 without a join."},
	{Name: JoinLookups, Kind: Counter, Help: "etl join: lookups of a key in a table partition this worker holds, including records processed again after an abort (read at each commit); 0 without a join."},
	{Name: JoinMisses, Kind: Counter, Help: "etl join: lookups that found no row (then dead-lettered join-missing, dropped, or joined with null, as missing says); 0 without a join."},
	{Name: JoinDropped, Kind: Counter, Help: "etl join with missing: drop: records dropped for want of a row; 0 otherwise."},

	{Name: LSOLag, Kind: Gauge, Labels: []string{"topic", "partition"}, Scope: Shared, Help: "High watermark minus last stable offset: offsets read_committed consumers cannot see yet because a transaction is open or hanging on the partition."},
	{Name: ConsumerLag, Kind: Gauge, Labels: []string{"group", "topic", "partition"}, Scope: Shared, Help: "Last stable offset minus the group's committed offset (log start offset if none): what the group can read but has not committed."},
	{Name: OpenTransactionAge, Kind: Gauge, Labels: []string{"topic", "partition"}, Scope: Shared, Help: "Age of the oldest transaction open on the partition, in seconds; 0 if none."},
	{Name: HangingTxns, Kind: Gauge, Labels: []string{"topic", "partition"}, Scope: Shared, Help: "Open transactions on the partition older than the hanging threshold (default: the brokers' transaction.max.timeout.ms) or unknown to their coordinator."},
	{Name: OffsetPolls, Kind: Counter, Labels: []string{"result"}, Scope: Shared, Help: `Offset and transaction polls of the admin API, by result: "ok" or "error" (the gauges then keep their last values).`},
	{Name: LastOffsetPoll, Kind: Gauge, Scope: Shared, Help: "Unix time of the last successful offset poll; the lag gauges are as old as this."},
}

// Catalog returns every metric eos declares, worker and shared ones.
func Catalog() []Desc {
	out := slices.Clone(catalog)
	for i := range out {
		out[i].Labels = slices.Clone(out[i].Labels)
	}
	return out
}

// registry holds the collectors of one exporter, created from the catalog.
type registry struct {
	reg  *prometheus.Registry
	wrap prometheus.Registerer // adds the app and instance labels
	vecs map[string]prometheus.Collector
}

// newRegistry registers the catalog entries of the given scopes, the Go
// runtime and process collectors, all labelled with app and instance.
func newRegistry(app, instance string, scopes ...Scope) *registry {
	r := &registry{reg: prometheus.NewRegistry(), vecs: map[string]prometheus.Collector{}}
	r.wrap = prometheus.WrapRegistererWith(prometheus.Labels{"app": app, "instance": instance}, r.reg)
	r.wrap.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	for _, d := range catalog {
		if !slices.Contains(scopes, d.Scope) {
			continue
		}
		var c prometheus.Collector
		switch d.Kind {
		case Counter:
			c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
		case Gauge:
			c = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
		case Histogram:
			c = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets}, d.Labels)
		}
		r.wrap.MustRegister(c)
		r.vecs[d.Name] = c
		if len(d.Labels) == 0 { // export it from the first scrape, at 0
			switch v := c.(type) {
			case *prometheus.CounterVec:
				v.WithLabelValues()
			case *prometheus.GaugeVec:
				v.WithLabelValues()
			case *prometheus.HistogramVec:
				v.WithLabelValues()
			}
		}
	}
	return r
}

func (r *registry) counter(name string, lvs ...string) prometheus.Counter {
	return r.vecs[name].(*prometheus.CounterVec).WithLabelValues(lvs...)
}

func (r *registry) gauge(name string, lvs ...string) prometheus.Gauge {
	return r.vecs[name].(*prometheus.GaugeVec).WithLabelValues(lvs...)
}

func (r *registry) gaugeVec(name string) *prometheus.GaugeVec {
	return r.vecs[name].(*prometheus.GaugeVec)
}

func (r *registry) histogram(name string) prometheus.Observer {
	return r.vecs[name].(*prometheus.HistogramVec).WithLabelValues()
}
