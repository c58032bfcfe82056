package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eosctl/eos/internal/rangeread"
	"github.com/eosctl/eos/pipeline"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultPollInterval is how often exporters read offsets and transactions
// through the admin API unless told otherwise.
const DefaultPollInterval = 10 * time.Second

// WorkerConfig configures a worker's exporter.
type WorkerConfig struct {
	App, Instance string
	Inputs        []string
	Output        string
	// CommitInterval is the longest the worker keeps a transaction open
	// (with an adaptive interval, its upper bound). It sets how recent the
	// last commit must be for the worker to be ready; 0 means 100ms.
	CommitInterval time.Duration
	// PollInterval is how often offsets and open transactions are read;
	// 0 means DefaultPollInterval.
	PollInterval time.Duration
	// HangingAfter is the age past which an open transaction counts as
	// hanging; 0 means the brokers' transaction.max.timeout.ms.
	HangingAfter time.Duration
	// ClientOpts reach the cluster (seed brokers, TLS, SASL), for the
	// exporter's own admin client. They must not carry ClientHooks.
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
}

// Worker exports one worker's metrics and health. Feed it the worker's
// events through OnEvent, give the worker's clients ClientHooks, run Run
// for the lag gauges, and serve Handler.
type Worker struct {
	cfg    WorkerConfig
	r      *registry
	hooks  *clientHooks
	window time.Duration
	log    *slog.Logger
	poll   *poller // set by Run

	mu         sync.Mutex
	started    time.Time
	stopped    bool
	fenced     string
	assigned   map[string]map[int32]bool
	assignedAt time.Time
	lastCommit time.Time
	// markersOnly is set when the last probe found that the group's lag
	// holds no record, only transaction markers; probedAt says when.
	markersOnly bool
	probedAt    time.Time
	// dedup reads the dedup topology's counts at every commit (WatchDedup);
	// dedupLast is what the counters were last moved to.
	dedup     func() DedupStats
	dedupLast DedupStats
	// join reads the etl join's counts at every commit (WatchJoin).
	join     func() JoinStats
	joinLast JoinStats
}

// DedupStats are the dedup topology's counts over committed transactions
// (topologies.DedupStats converts to it).
type DedupStats struct {
	Passed, Repeats, KeysHeld int64
}

// WatchDedup has the exporter read the dedup topology's counts after every
// committed transaction, into eos_dedup_passed_total,
// eos_dedup_repeats_total and eos_dedup_keys_held. The topology must see
// the committed event first: chain its OnEvent before this Worker's.
func (w *Worker) WatchDedup(read func() DedupStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dedup = read
}

// NewWorker creates the exporter and registers its metrics. It does not
// connect to anything.
func NewWorker(cfg WorkerConfig) *Worker {
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = 100 * time.Millisecond
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{
		cfg: cfg, r: newRegistry(cfg.App, cfg.Instance, WorkerOnly, Shared),
		window: ReadyWindow(cfg.CommitInterval), log: cfg.Logger,
		assigned: map[string]map[int32]bool{},
	}
	w.hooks = newClientHooks(w.r)
	for _, res := range []string{"committed", "aborted"} {
		w.r.counter(Transactions, res)
	}
	for _, reason := range abortReasons {
		w.r.counter(TransactionAborts, reason)
	}
	for _, res := range []string{"ok", "error"} {
		w.r.counter(OffsetPolls, res)
	}
	w.r.gauge(LastOffsetPoll)
	return w
}

// ReadyWindow is how recent a worker's last commit (or assignment) must be
// for it to be ready: ten commit intervals, and never less than 30s, so
// that a slow commit or a broker failover does not flap readiness.
func ReadyWindow(commitInterval time.Duration) time.Duration {
	return max(10*commitInterval, 30*time.Second)
}

// ClientHooks returns the kgo option that adds franz-go's client metrics
// (eos_client_...) to every client created with it.
func (w *Worker) ClientHooks() kgo.Opt { return kgo.WithHooks(w.hooks) }

// OnEvent records a worker lifecycle event; pass it as (or chain it into)
// pipeline.Config.OnEvent. It is quick and safe for concurrent use.
func (w *Worker) OnEvent(e pipeline.Event) {
	r := w.r
	w.mu.Lock()
	defer w.mu.Unlock()
	switch e.Kind {
	case pipeline.EventStarted, pipeline.EventReinit:
		if e.Kind == pipeline.EventReinit {
			r.counter(ProducerReinits).Inc()
		} else {
			w.started, w.stopped, w.fenced = e.Time, false, ""
		}
		r.gauge(ProducerID).Set(float64(e.ProducerID))
		r.gauge(ProducerEpoch).Set(float64(e.Epoch))
	case pipeline.EventCommitted:
		r.counter(Transactions, "committed").Inc()
		r.counter(RecordsConsumed).Add(float64(e.Consumed))
		r.counter(RecordsProduced).Add(float64(e.Records))
		r.histogram(TransactionDuration).Observe(e.Duration.Seconds())
		r.histogram(CommitDuration).Observe(e.CommitDuration.Seconds())
		r.histogram(CommitFlushDuration).Observe(e.FlushDuration.Seconds())
		r.histogram(TransactionRecords).Observe(float64(e.Records))
		r.counter(DeadLetters).Add(float64(e.DeadLetters))
		r.gauge(ProducerEpoch).Set(float64(e.Epoch)) // KIP-890 bumps it per commit
		w.lastCommit = e.Time
		r.gauge(LastCommit).Set(float64(e.Time.UnixNano()) / 1e9)
		if w.dedup != nil {
			s := w.dedup()
			r.counter(DedupPassed).Add(float64(s.Passed - w.dedupLast.Passed))
			r.counter(DedupRepeats).Add(float64(s.Repeats - w.dedupLast.Repeats))
			r.gauge(DedupKeysHeld).Set(float64(s.KeysHeld))
			w.dedupLast = s
		}
		w.exportJoin()
	case pipeline.EventAborted:
		r.counter(Transactions, "aborted").Inc()
		r.counter(TransactionAborts, e.Reason).Inc()
	case pipeline.EventFenced:
		r.counter(ProducerFenced).Inc()
		w.fenced = e.Err
		if w.fenced == "" {
			w.fenced = "fenced"
		}
	case pipeline.EventRestoring:
		r.gauge(RestoreRemaining).Set(float64(e.Records))
	case pipeline.EventRestored:
		r.gauge(RestoreRemaining).Set(0)
		r.counter(StateRestores).Inc()
		r.counter(RestoredRecords).Add(float64(e.Records))
		r.histogram(RestoreDuration).Observe(e.Duration.Seconds())
	case pipeline.EventStopped:
		w.stopped = true
	case pipeline.EventAssigned:
		r.counter(Rebalances).Inc()
		for t, ps := range e.Partitions {
			if w.assigned[t] == nil {
				w.assigned[t] = map[int32]bool{}
			}
			for _, p := range ps {
				w.assigned[t][p] = true
			}
		}
		w.assignedAt = e.Time
	case pipeline.EventRevoked:
		for t, ps := range e.Partitions {
			for _, p := range ps {
				delete(w.assigned[t], p)
			}
		}
	}
	r.gauge(AssignedPartitions).Set(float64(w.nAssigned()))
}

func (w *Worker) nAssigned() int {
	n := 0
	for _, ps := range w.assigned {
		n += len(ps)
	}
	return n
}

// Ready reports whether the worker is doing its job, with a reason: its
// producer is initialised, it is neither fenced nor stopped, it has
// partitions assigned, and it committed recently — within ReadyWindow of
// its commit interval, counting from its last commit, assignment or start
// — or it has nothing to commit: the last offset poll, itself recent,
// found no consumer lag on its partitions, or a lag that holds only
// transaction markers (on transactional input a caught-up worker stays
// behind the last commit marker). So an idle worker with no input stays
// ready, and a worker with input that does not commit does not. Without a
// recent measurement, the reason names the last poll's error, if any.
//
// A worker with more instances than partitions has none assigned to some
// of them; those are not ready, by design: they do no work.
func (w *Worker) Ready() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.fenced != "":
		return false, "fenced: " + w.fenced
	case w.stopped:
		return false, "stopped"
	case w.started.IsZero():
		return false, "starting: producer not initialised yet"
	}
	n := w.nAssigned()
	if n == 0 {
		return false, "no partitions assigned"
	}
	progress := w.started
	for _, t := range []time.Time{w.lastCommit, w.assignedAt} {
		if t.After(progress) {
			progress = t
		}
	}
	since := time.Since(progress)
	if since <= w.window {
		if w.lastCommit.IsZero() {
			return true, fmt.Sprintf("%d partitions assigned, no commit yet", n)
		}
		return true, fmt.Sprintf("%d partitions assigned, last commit %s ago", n, time.Since(w.lastCommit).Round(time.Millisecond))
	}
	if w.poll != nil {
		okAt, _, lags := w.poll.status()
		fresh := time.Since(okAt) <= max(w.window, 3*w.cfg.PollInterval)
		lag, measured := lags[w.cfg.App]
		probed := w.markersOnly && w.probedAt.After(progress) && time.Since(w.probedAt) <= max(w.window, 3*w.cfg.PollInterval)
		switch {
		case fresh && measured && lag == 0:
			return true, fmt.Sprintf("%d partitions assigned, idle: nothing to consume (last commit %s ago)", n, since.Round(time.Second))
		case fresh && measured && probed:
			return true, fmt.Sprintf("%d partitions assigned, idle: only transaction markers past the committed offsets (last commit %s ago)", n, since.Round(time.Second))
		case fresh && measured:
			return false, fmt.Sprintf("no commit for %s (limit %s) with %d records to consume", since.Round(time.Second), w.window, lag)
		}
	}
	why := fmt.Sprintf("no commit for %s (limit %s) and no recent lag measurement", since.Round(time.Second), w.window)
	if w.poll != nil {
		if _, err, _ := w.poll.status(); err != nil {
			why += ": last poll failed: " + strings.Join(strings.Fields(err.Error()), " ")
		}
	}
	return false, why
}

// Run reads offsets and open transactions every PollInterval, from the
// worker's started event on, until ctx ends, through its own admin client;
// it returns nil then. Poll errors are
// logged and counted (eos_offset_polls_total{result="error"}); the gauges
// keep their last values.
func (w *Worker) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(w.cfg.ClientOpts...)
	if err != nil {
		return fmt.Errorf("metrics: creating the admin client: %w", err)
	}
	defer cl.Close()
	// The probe's reader keeps its client from one probe to the next.
	probes := rangeread.NewReader(w.cfg.ClientOpts, rangeread.Options{FetchMaxBytes: 1 << 20})
	defer probes.Close()
	p := newPoller(kadm.NewClient(cl), w.r, w.log, w.cfg.HangingAfter)
	w.mu.Lock()
	w.poll = p
	w.mu.Unlock()
	return every(ctx, w.cfg.PollInterval, func() {
		w.mu.Lock()
		started := !w.started.IsZero()
		w.mu.Unlock()
		if !started {
			// Until the worker has started, its output topic may not
			// exist, and the client would cache that answer for seconds.
			return
		}
		pctx, cancel := context.WithTimeout(ctx, max(w.cfg.PollInterval, 5*time.Second))
		defer cancel()
		if err := p.poll(pctx, w.plan()); err != nil && ctx.Err() == nil {
			w.log.Warn("reading offsets for the lag metrics failed; keeping the last values", "err", err)
			return
		}
		w.probe(pctx, p, probes)
	})
}

// probe runs when the worker has not committed for half its ready window
// while its group shows lag: it reads the lagging ranges to find whether
// they hold any record, or only the transaction markers franz-go never
// commits past (see rangeread.Readable). Ready uses the answer.
func (w *Worker) probe(ctx context.Context, p *poller, probes *rangeread.Reader) {
	w.mu.Lock()
	progress := w.started
	for _, t := range []time.Time{w.lastCommit, w.assignedAt} {
		if t.After(progress) {
			progress = t
		}
	}
	need := !w.started.IsZero() && w.nAssigned() > 0 && time.Since(progress) > w.window/2
	w.mu.Unlock()
	ranges := p.laggingOf(w.cfg.App)
	if !need || len(ranges) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := probes.Readable(ctx, ranges)
	markersOnly := err == nil
	for t, ps := range ranges {
		for _, part := range ps {
			readable, decided := got[t][part.Partition]
			markersOnly = markersOnly && decided && !readable
		}
	}
	w.mu.Lock()
	w.markersOnly, w.probedAt = markersOnly, time.Now()
	w.mu.Unlock()
}

// plan measures the assigned input partitions (LSO lag, consumer lag,
// transactions) and every output partition (LSO lag, transactions: the
// worker's own open transaction shows there, as do hanging ones).
func (w *Worker) plan() plan {
	w.mu.Lock()
	defer w.mu.Unlock()
	pl := plan{
		topics: append(slices.Clone(w.cfg.Inputs), w.cfg.Output),
		lso:    map[string]map[int32]bool{},
		groups: map[string]map[string]map[int32]bool{w.cfg.App: {}},
	}
	for t, ps := range w.assigned {
		pl.lso[t] = map[int32]bool{}
		pl.groups[w.cfg.App][t] = map[int32]bool{}
		for p := range ps {
			pl.lso[t][p] = true
			pl.groups[w.cfg.App][t][p] = true
		}
	}
	pl.lso[w.cfg.Output] = nil // every partition
	return pl
}

// Handler serves /metrics, /healthz and /readyz.
func (w *Worker) Handler() http.Handler {
	return handler(w.r, func() (bool, string) {
		ok, why := w.Ready()
		w.r.gauge(Ready).Set(b2f(ok))
		return ok, why
	})
}

func handler(r *registry, ready func() (bool, string)) http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{ErrorLog: nil})
	mux.HandleFunc("/metrics", func(rw http.ResponseWriter, req *http.Request) {
		ready() // refresh eos_ready
		metrics.ServeHTTP(rw, req)
	})
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		ok, why := ready()
		if !ok {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintln(rw, why)
	})
	mux.HandleFunc("/", func(rw http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/" {
			http.NotFound(rw, req)
			return
		}
		fmt.Fprintln(rw, "eos exporter: /metrics (Prometheus), /healthz (process alive), /readyz (doing its job)")
	})
	return mux
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// every calls fn at once and then every d until ctx ends.
func every(ctx context.Context, d time.Duration, fn func()) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Gatherer returns the exporter's registry, as /metrics serves it.
func (w *Worker) Gatherer() prometheus.Gatherer { return w.r.reg }

// Started reports whether the worker has initialised its producer.
func (w *Worker) Started() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.started.IsZero()
}
