package pipeline

import (
	"sync"
	"time"

	"github.com/eosctl/eos"
)

// Defaults of the adaptive commit interval (Config.AutoInterval).
const (
	// DefaultOverheadBudget is the share of wall time the adaptive
	// interval lets commits take: 3%, the loss a raw transactional
	// producer shows at a 100ms interval with 1 KiB records.
	DefaultOverheadBudget = 0.03
	// DefaultMaxCommitInterval bounds the adaptive interval, and so the
	// latency a read_committed consumer sees, when commits are slow.
	DefaultMaxCommitInterval = 5 * time.Second
	// minAutoInterval keeps a fast (loopback) cluster from driving the
	// interval to nothing.
	minAutoInterval = time.Millisecond
	// autoStartInterval is used until the first commit has been timed.
	autoStartInterval = 100 * time.Millisecond
	// commitEWMAWeight is the weight of the newest commit in the running
	// mean of commit durations once five have been timed: about the last
	// ten commits count.
	commitEWMAWeight = 0.2
	// commitOutlier caps how much one commit can count, as a multiple of
	// the running estimate.
	commitOutlier = 4
)

// adaptiveInterval chooses the commit interval at run time: the shortest one
// that keeps the time the worker spends committing (flush, offset commit and
// EndTxn, during which it processes nothing) within a budget b, a fraction of
// wall time.
//
// Commits start every T (see pacer) and each takes c, so committing costs a
// busy worker c/T of its time and the shortest interval within budget is
// T = c/b. The per-commit cost c is a handful of round trips to the
// coordinators and does not depend on how many records the transaction
// holds, but it does drift with the network and the brokers' load, so it is
// not configured: it is estimated from the commits the worker makes, as an
// exponentially weighted mean (the overhead is a ratio of sums, so the mean
// is the right statistic, not a percentile), and T is recomputed after every
// commit, clamped to [minAutoInterval, max].
//
// What can only make the real overhead smaller than the budget: time with no
// transaction open (no input), and transactions that run past T because the
// last poll's records are still being processed. A busy worker therefore
// lands on the budget and an idle one under it. A commit that fails is not
// timed: the worker re-initialises and starts again from its current
// estimate.
type adaptiveInterval struct {
	budget float64
	max    time.Duration

	mu   sync.Mutex
	n    int     // commits timed so far
	mean float64 // seconds
	cur  time.Duration
}

func newAdaptiveInterval(cfg Config) *adaptiveInterval {
	if !cfg.AutoInterval {
		return nil
	}
	return &adaptiveInterval{budget: cfg.OverheadBudget, max: cfg.MaxCommitInterval, cur: min(autoStartInterval, cfg.MaxCommitInterval)}
}

// interval returns the commit interval in force.
func (a *adaptiveInterval) interval() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

// observe folds the duration of one commit into the estimate and recomputes
// the interval. It is safe to call on a nil receiver (a fixed interval).
func (a *adaptiveInterval) observe(commit time.Duration) {
	if a == nil || commit <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The plain mean of the first commits, then an exponentially weighted
	// one: the estimate is right after a handful of commits instead of
	// creeping up from the first from below. Once it has settled, a single
	// commit counts at most commitOutlier times the estimate: one stall (a
	// GC pause, a broker hiccup) would otherwise stretch the interval, and
	// latency, for the next dozen commits, while a lasting slowdown still
	// moves the estimate up by half within a commit or two.
	c := commit.Seconds()
	if a.n >= 5 {
		c = min(c, commitOutlier*a.mean)
	}
	a.n++
	a.mean += max(commitEWMAWeight, 1/float64(a.n)) * (c - a.mean)
	t := time.Duration(a.mean / a.budget * float64(time.Second))
	a.cur = min(max(t, minAutoInterval), a.max)
}

// pacer decides when the open transaction ends. Commits start every
// interval, counted from the start of the previous commit, as Kafka Streams
// counts commit.interval.ms: a read_committed consumer then sees a commit
// every T, not every T plus however long the commit itself took, which takes
// about a commit's duration off the mean and the tail of end-to-end latency
// at the same commit rate. A transaction never stays open longer than the
// interval, and never less than three quarters of it: when a commit takes a
// sizeable share of the interval (10ms intervals at a millisecond RTT, where
// commits take 7-9ms), starting commits on the beat would leave the worker
// committing most of the time and processing little, so each transaction
// gathers at least 3/4 of an interval of records first. A lower floor
// costs throughput at short intervals, and the floor costs nothing at long
// ones, where a commit is well under a quarter of the interval
// (BENCHMARKS.md has the eosctl bench runs that chose 3/4). After a quiet spell with no transaction open, the first records
// commit 3/4 of an interval later, and the interval counts again from that
// commit.
type pacer struct {
	fixed time.Duration
	auto  *adaptiveInterval // nil: fixed

	lastStart time.Time // when the last commit started; zero before the first
}

func newPacer(cfg Config) *pacer {
	return &pacer{fixed: cfg.CommitInterval, auto: newAdaptiveInterval(cfg)}
}

func (p *pacer) interval() time.Duration {
	if p.auto != nil {
		return p.auto.interval()
	}
	return p.fixed
}

// deadline returns when the transaction that began at began must end: an
// interval after the last commit started, but no sooner than 3/4 of an
// interval after it began.
func (p *pacer) deadline(began time.Time) time.Time {
	iv := p.interval()
	if p.lastStart.IsZero() {
		return began.Add(iv)
	}
	d := p.lastStart.Add(iv)
	if floor := began.Add(iv * 3 / 4); d.Before(floor) {
		d = floor
	}
	return d
}

// due reports whether the transaction that began at began must end now.
func (p *pacer) due(began time.Time) bool { return !time.Now().Before(p.deadline(began)) }

// committing records that a commit starts now.
func (p *pacer) committing() { p.lastStart = time.Now() }

// committed folds a finished commit's duration into the adaptive interval.
func (p *pacer) committed(d time.Duration) { p.auto.observe(d) }

// CommitInterval returns the commit interval in force: the configured one,
// or with AutoInterval the one the worker has chosen from the commits so far.
func (w *Worker) CommitInterval() time.Duration { return w.pace.interval() }

// validateAuto checks and defaults the adaptive-interval settings of cfg.
func validateAuto(cfg *Config) error {
	if cfg.OverheadBudget < 0 || cfg.OverheadBudget > 0.5 {
		return eos.BadConfig("pipeline.Config.OverheadBudget", "must be in (0, 50%%], got %g%%", cfg.OverheadBudget*100)
	}
	if cfg.MaxCommitInterval < 0 {
		return eos.BadConfig("pipeline.Config.MaxCommitInterval", "must not be negative, got %s", cfg.MaxCommitInterval)
	}
	if !cfg.AutoInterval {
		return nil
	}
	if cfg.OverheadBudget == 0 {
		cfg.OverheadBudget = DefaultOverheadBudget
	}
	if cfg.MaxCommitInterval == 0 {
		cfg.MaxCommitInterval = DefaultMaxCommitInterval
	}
	txnTimeout := cfg.TransactionTimeout
	if txnTimeout == 0 {
		txnTimeout = 60 * time.Second
	}
	if cfg.MaxCommitInterval > txnTimeout/2 {
		return eos.BadConfig("pipeline.Config.MaxCommitInterval", "%s must be at most half the transaction timeout (pipeline.Config.TransactionTimeout) %s, or the coordinator may abort transactions the worker still means to commit", cfg.MaxCommitInterval, txnTimeout)
	}
	return nil
}
