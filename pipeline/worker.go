package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/pollsize"
	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceRetryMetadataAge is the worker's kgo.MetadataMinAge: how soon a
// batch the broker answered with a retriable error (CONCURRENT_TRANSACTIONS
// right after a commit, under transactions v2) is sent again. ClientOpts
// can override it.
const ProduceRetryMetadataAge = 100 * time.Millisecond

// Config configures one worker: one instance of an app.
type Config struct {
	// App is the application name: the consumer group id, and the prefix
	// of the transactional.id.
	App string
	// Instance names this worker's slot in the app; transactional.id and
	// group.instance.id are "<App>-<Instance>". It must be the same every
	// time this slot runs, and unique among the app's running workers.
	Instance string

	Inputs []string
	Output string
	// OutputPartitions is the partition count for the output topic if the
	// worker creates it; 0 means the same as the first input.
	OutputPartitions int32
	// Outputs are named outputs, name -> topic, that a Transform emits to
	// with Output.To (more may come from its Declaration). The worker
	// creates them at start, like Output.
	Outputs map[string]string
	// DLQ is the dead-letter topic, for records a Transform rejects with
	// DeadLetter; empty means "<App>-dlq". Created at start.
	DLQ string
	// Topology names the topology in dead letters' headers.
	Topology string

	// CommitInterval is how often the worker commits: a commit starts an
	// interval after the previous one started (Kafka Streams'
	// commit.interval.ms), so no transaction stays open longer. 0 means
	// 100ms, Kafka Streams' default under exactly-once.
	CommitInterval time.Duration
	// MaxTxnRecords ends a transaction early once it has consumed this many
	// records; 0 means no limit.
	MaxTxnRecords int
	// AutoInterval makes the worker choose its commit interval at run time:
	// the shortest that keeps the time spent committing (flush, offset
	// commit, EndTxn) under OverheadBudget of wall time, at most
	// MaxCommitInterval. CommitInterval is then ignored. See
	// adaptiveInterval for how, and what can go wrong.
	AutoInterval bool
	// OverheadBudget is the share of wall time AutoInterval lets commits
	// take, in (0, 0.5]; 0 means DefaultOverheadBudget (3%).
	OverheadBudget float64
	// MaxCommitInterval bounds the interval AutoInterval chooses; 0 means
	// DefaultMaxCommitInterval. It must stay under TransactionTimeout.
	MaxCommitInterval time.Duration
	// SessionTimeout is the group session timeout; 0 means 10s.
	SessionTimeout time.Duration
	// TransactionTimeout is the coordinator-side transaction timeout; 0
	// means 60s.
	TransactionTimeout time.Duration
	// StartTimeout bounds the initial connection; 0 means 10s.
	StartTimeout time.Duration
	// InputWait is how long Run waits, at start, for a missing input topic
	// to be created (by a producer started at the same time, say) before it
	// fails with an error wrapping eos.ErrNoTopic; 0 fails at once. It logs that it waits.
	InputWait time.Duration
	// RequestTimeout bounds a request the client waits on without a
	// timeout of its own (EndTxn, TxnOffsetCommit...); 0 means franz-go's
	// default of 10s. A request that outlives it leaves its outcome unknown.
	RequestTimeout time.Duration
	// GroupProtocol is "classic" (the default: client-side cooperative-
	// sticky assignment) or "consumer" (KIP-848, the broker assigns; Kafka
	// 4.0+).
	GroupProtocol string
	// GiveUpAfter bounds how long the worker keeps initialising its
	// producer, at start or reopening its session after consecutive
	// failures, before it gives up; 0 means 5 minutes.
	GiveUpAfter time.Duration

	// NoIdempotencyKey leaves the IdempotencyKeyHeader off output records.
	// The header is for consumers that cannot read with read_committed (or
	// sinks outside Kafka) to deduplicate on; read_committed consumers do
	// not need it, and on small records it is a large share of the bytes
	// written (about 30 bytes of header on a 100-byte value). Off, those
	// consumers have nothing stable to deduplicate on. Internal records
	// (repartition, changelog) never carry it either way.
	NoIdempotencyKey bool

	// Parallelism is how many goroutines process a large poll's records
	// when the Transform is a Forker (and keeps no Stores, holds no output
	// and uses no repartition topic): they take runs of the poll's
	// records in turn, and the worker's goroutine sends what each run
	// emitted while they process the next ones.
	// 0 means runtime.GOMAXPROCS, at most DefaultParallelism; 1 processes
	// every record on the worker's goroutine.
	Parallelism int

	// ClientOpts carry the seed brokers and any TLS or SASL settings.
	ClientOpts []kgo.Opt

	Logger *slog.Logger
	// OnEvent, if set, receives every lifecycle event. It is called
	// synchronously, from the worker's goroutine or (for assignment events)
	// the client's, so it must be quick and safe for concurrent use.
	OnEvent func(Event)
}

// Worker runs one instance of an app. Create it with New and run it with Run.
type Worker struct {
	cfg   Config
	id    string
	t     Transform
	log   *slog.Logger
	stats Stats
	// fetches counts the client's fetch responses, for a Starter (a
	// hook of the client only when the Transform is one).
	fetches FetchClock
	col     collector
	rec     Record
	test    *testHooks // nil in production

	lay               layout
	state             *stateSet // nil: the Transform keeps no state
	deadLetters       int       // in the open transaction
	lastDeadLetterLog time.Time
	dlqReady          bool          // the dead-letter topic exists
	outParts          int32         // partitions of new output topics
	sources           *sourceReader // made on the first dead letter of Sources
	laneSet           []*lane       // processParallel's, made on first use
	runSet            []*run        // processParallel's, kept for their buffers

	pace       *pacer // when transactions end
	polls      pollsize.Sizer
	lastCommit time.Time
	// reinit paces re-initialisations since the first failure after the
	// last commit (reopen).
	reinit retrier
}

// Stats are the worker's counters since it started. They are safe to read
// concurrently with Run.
type Stats struct {
	Consumed  atomic.Int64
	Produced  atomic.Int64
	Committed atomic.Int64
	Aborted   atomic.Int64
	Reinits   atomic.Int64
	// DeadLetters counts committed dead letters.
	DeadLetters atomic.Int64
	// Restored counts changelog records read by restores, live while a
	// restore runs: its rate is the restore rate.
	Restored atomic.Int64
}

// Validate reports the first setting of c that New would refuse, as an
// *eos.ConfigError, or nil. It connects to nothing and leaves c as it is:
// for a program that checks its settings before it has a Transform.
func (c Config) Validate() error {
	_, err := c.check()
	return err
}

// check validates c, fills in what validateAuto derives, and returns the
// worker's transactional.id.
func (c *Config) check() (string, error) {
	// Each part is judged under its own setting, so that the error names
	// the one that is wrong; TransactionalID then judges their sum.
	if err := fencing.ValidateName("name", c.App); err != nil {
		return "", eos.BadConfig("pipeline.Config.App", "%w", err)
	}
	if err := fencing.ValidateName("id", c.Instance); err != nil {
		return "", eos.BadConfig("pipeline.Config.Instance", "%w", err)
	}
	id, err := fencing.TransactionalID(c.App, c.Instance)
	if err != nil {
		return "", eos.BadConfig("pipeline.Config.App", "%w", err)
	}
	if len(c.Inputs) == 0 {
		return "", eos.BadConfig("pipeline.Config.Inputs", "at least one input topic is required")
	}
	if c.Output == "" {
		return "", eos.BadConfig("pipeline.Config.Output", "required")
	}
	seen := map[string]string{}
	for _, tp := range append(append([]string(nil), c.Inputs...), c.Output) {
		if err := fencing.ValidateName("topic", tp); err != nil {
			return "", eos.BadConfig("pipeline.Config.Inputs", "%w", err)
		}
		if _, dup := seen[tp]; dup {
			return "", eos.BadConfig("pipeline.Config.Inputs", "topic %q is named twice across pipeline.Config.Inputs and pipeline.Config.Output", tp)
		}
		seen[tp] = tp
	}
	if c.Parallelism < 0 {
		return "", eos.BadConfig("pipeline.Config.Parallelism", "must not be negative, got %d (0 means as many goroutines as GOMAXPROCS, 1 none besides the worker's)", c.Parallelism)
	}
	if c.MaxTxnRecords < 0 {
		return "", eos.BadConfig("pipeline.Config.MaxTxnRecords", "must not be negative, got %d", c.MaxTxnRecords)
	}
	for _, d := range []struct {
		setting string
		v       time.Duration
	}{
		{"pipeline.Config.CommitInterval", c.CommitInterval}, {"pipeline.Config.SessionTimeout", c.SessionTimeout},
		{"pipeline.Config.TransactionTimeout", c.TransactionTimeout}, {"pipeline.Config.InputWait", c.InputWait},
	} {
		if d.v < 0 {
			return "", eos.BadConfig(d.setting, "must not be negative, got %s", d.v)
		}
	}
	if err := validateAuto(c); err != nil {
		return "", err
	}
	if c.GroupProtocol != "" && c.GroupProtocol != "classic" && c.GroupProtocol != "consumer" {
		return "", eos.BadConfig("pipeline.Config.GroupProtocol", "%q: want classic or consumer (KIP-848)", c.GroupProtocol)
	}
	return id, nil
}

// New validates cfg and returns a worker that will run t. It does not
// connect to anything: every error it returns is about the configuration,
// an *eos.ConfigError.
func New(cfg Config, t Transform) (*Worker, error) {
	id, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, eos.BadConfig("", "no Transform")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.CommitInterval, 100*time.Millisecond)
	def(&cfg.SessionTimeout, 10*time.Second)
	def(&cfg.TransactionTimeout, 60*time.Second)
	def(&cfg.StartTimeout, 10*time.Second)
	def(&cfg.RequestTimeout, 10*time.Second)
	if cfg.GroupProtocol == "" {
		cfg.GroupProtocol = "classic"
	}
	def(&cfg.GiveUpAfter, 5*time.Minute)
	if cfg.Parallelism == 0 {
		cfg.Parallelism = min(runtime.GOMAXPROCS(0), DefaultParallelism)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("app", cfg.App, "instance", cfg.Instance)
	if cfg.DLQ == "" {
		cfg.DLQ = cfg.App + "-dlq"
	}
	lay, err := resolveLayout(&cfg, t)
	if err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, id: id, t: t, log: log, pace: newPacer(cfg), lay: lay, state: newStateSet(lay)}
	w.col.output = cfg.Output
	w.col.noKey = cfg.NoIdempotencyKey
	w.col.outputs = lay.outputs
	w.col.repartition = lay.repartition
	return w, nil
}

// TransactionalID returns the worker's fixed transactional.id.
func (w *Worker) TransactionalID() string { return w.id }

// Stats returns the worker's live counters.
func (w *Worker) Stats() *Stats { return &w.stats }

func (w *Worker) clientOpts() []kgo.Opt {
	var extra []kgo.Opt
	if w.state != nil {
		extra = append(extra, kgo.RecordPartitioner(newChangelogPartitioner(w.state.changelogs)))
	}
	if w.cfg.GroupProtocol == "consumer" {
		extra = append(extra, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	if w.starter() != nil {
		extra = append(extra, kgo.WithHooks(&w.fetches))
	}
	// The fetch bounds (FetchBounds) first: ClientOpts come after them and
	// can raise them.
	bounded := append(FetchBounds(),
		// Under transactions v2 a transaction's first Produce is answered
		// CONCURRENT_TRANSACTIONS while the previous commit's markers are
		// still being written (the broker itself retries for 100ms
		// first, add.partitions.to.txn.retry.backoff.max.ms). kgo retries
		// such a batch only after a metadata refresh, and refreshes at
		// most every MetadataMinAge, 5s by default: on Apache Kafka a
		// worker committing often stalled for seconds at a time
		// (RELIABILITY.md, "On Apache Kafka", has the measurement).
		// 100ms is Java's retry.backoff.ms.
		kgo.MetadataMinAge(ProduceRetryMetadataAge))
	return append(append(append(bounded, w.cfg.ClientOpts...), extra...),
		kgo.ConsumerGroup(w.cfg.App),
		kgo.ConsumeTopics(w.lay.consume...),
		kgo.InstanceID(w.id),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		// kgo heartbeats every 3s by default, whatever the session timeout:
		// with a short session a member on a busy machine can expire
		// between two heartbeats, and Apache Kafka then answers its next
		// request with UNKNOWN_MEMBER_ID and rebalances (the embedded
		// broker checks sessions more leniently). Kafka's rule is at most a
		// third of the session.
		kgo.HeartbeatInterval(min(3*time.Second, w.cfg.SessionTimeout/3)),
		kgo.TransactionTimeout(w.cfg.TransactionTimeout),
		// No RecordDeliveryTimeout: kgo measures it from each record's
		// Timestamp, which topologies keep from their input, so any backlog
		// older than the timeout failed every batch and livelocked the
		// worker in aborts. End's flush is bounded by TransactionTimeout.
		kgo.DisableAutoCommit(),
		kgo.KeepControlRecords(), // see process
		kgo.RequestTimeoutOverhead(w.cfg.RequestTimeout),
		kgo.OnPartitionsAssigned(func(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
			w.emit(Event{Kind: EventAssigned, Partitions: ps})
			w.assignedInput(ps, true)
			if w.state != nil {
				w.restore(ctx, ps[w.state.topic]) // before kgo fetches anything of them
			}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if w.state != nil {
				w.state.drop(ps[w.state.topic])
			}
			w.assignedInput(ps, false)
			if len(ps) > 0 {
				w.emit(Event{Kind: EventRevoked, Partitions: ps, Reason: "revoked"})
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			if w.state != nil {
				w.state.drop(ps[w.state.topic])
			}
			w.assignedInput(ps, false)
			w.emit(Event{Kind: EventRevoked, Partitions: ps, Reason: "lost"})
		}),
	)
}

// prepare checks that the brokers answer and the inputs exist, and creates
// the output topic if it is missing.
func (w *Worker) prepare(ctx context.Context) error {
	cl, err := admin.Connect(ctx, w.cfg.StartTimeout, w.cfg.ClientOpts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := w.awaitInputs(ctx, cl); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StartTimeout)
	defer cancel()
	var parts int32
	for i, in := range w.cfg.Inputs {
		n, err := admin.Partitions(ctx, cl, in)
		if err != nil {
			return fmt.Errorf("input: %w", txn.Denied(err, "DESCRIBE", "Topic", in))
		}
		if i == 0 {
			parts = n
		}
	}
	inParts := parts
	if w.cfg.OutputPartitions > 0 {
		parts = w.cfg.OutputPartitions
	}
	n, created, err := admin.EnsureTopic(ctx, cl, w.cfg.Output, parts, nil)
	if err != nil {
		return fmt.Errorf("output: %w", txn.Denied(err, "DESCRIBE or CREATE", "Topic", w.cfg.Output))
	}
	if created {
		w.log.Info("created output topic", "topic", w.cfg.Output, "partitions", n)
	}
	return w.prepareTopics(ctx, cl, inParts, parts)
}

// awaitInputs waits up to InputWait for every input topic to exist, so that
// a worker started together with the producer of its input does not race
// it. Any other error is left to prepare.
func (w *Worker) awaitInputs(ctx context.Context, cl *kgo.Client) error {
	if w.cfg.InputWait <= 0 {
		return nil
	}
	deadline := time.Now().Add(w.cfg.InputWait)
	for _, in := range w.cfg.Inputs {
		logged := false
		for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
			rctx, cancel := context.WithTimeout(ctx, w.cfg.StartTimeout)
			_, err := admin.Partitions(rctx, cl, in)
			cancel()
			if !errors.Is(err, admin.ErrNoTopic) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("input: %w (waited %s for it to be created)", err, w.cfg.InputWait)
			}
			if !logged {
				w.log.Info("input topic does not exist yet; waiting for it to be created", "topic", in, "up_to", time.Until(deadline).Round(time.Millisecond))
				logged = true
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(min(backoff, time.Until(deadline)+time.Millisecond)):
			}
		}
	}
	return nil
}

// Run runs the worker until ctx is canceled (then it ends the open
// transaction, leaves and returns nil) or an error it must not retry
// through: a *fencing.FencedError when another incarnation took over its
// transactional.id, an authorization error, or a failed Transform.
func (w *Worker) Run(ctx context.Context) error {
	var err error
	if w.test, err = hooksFrom(ctx, w.test); err != nil {
		return err
	}
	if err := w.prepare(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started: nothing to end
		}
		return err
	}
	stop, err := w.startTransform(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return w.stopped(err)
	}
	defer stop()
	sess, err := w.open(ctx)
	if err != nil {
		return w.stopped(err)
	}
	defer w.sources.close()
	pid, epoch := sess.Producer()
	w.emit(Event{Kind: EventStarted, ProducerID: pid, Epoch: epoch})

	for {
		err := w.runSession(ctx, sess)
		var fatal *fatalError
		if txn.Classify(err) == txn.Fenced && ctx.Err() == nil && w.selfFenced(ctx, sess, err) {
			w.log.Warn("producer fenced, but the group still knows this instance as itself: the coordinator moved the epoch (a lost EndTxn response or a timed-out transaction); re-initialising", "err", err)
			err = fmt.Errorf("self-inflicted fence: %w", txn.ErrOutcomeUnknown)
		}
		if err == nil || ctx.Err() != nil || errors.As(err, &fatal) || txn.Classify(err) != txn.Unknown {
			sess.Close()
			if err == nil {
				w.leave()
			}
			return w.stopped(err)
		}
		if sess, err = w.reopen(ctx, sess, err); err != nil {
			return w.stopped(err)
		}
	}
}

// open initialises the producer for the first time. A failure of the
// Unknown class (the coordinator's node unreachable, or moving to another
// node) is retried with exponential backoff and jitter until GiveUpAfter,
// as reopen retries: a worker started while its coordinator fails over
// waits for the new one instead of exiting (on Apache Kafka, after a
// node's SIGKILL, the client's own retries run out before the controller
// has moved the coordinator; both workers of a chaos drill exited so).
// prepare has already reached the cluster, so such a failure is not a
// wrong address.
func (w *Worker) open(ctx context.Context) (*txn.Session, error) {
	r := newRetrier(w.cfg.GiveUpAfter)
	for {
		sess, err := txn.Open(ctx, w.id, w.log, w.clientOpts()...)
		if err == nil || ctx.Err() != nil || txn.Classify(err) != txn.Unknown {
			return sess, err
		}
		if r.expired() {
			return nil, fmt.Errorf("giving up after %s without initialising the producer: %w", w.cfg.GiveUpAfter, err)
		}
		w.log.Warn("initialising the producer failed; retrying", "err", err)
		r.wait(ctx)
	}
}

// reopen replaces a session whose transaction outcome is unknown, retrying
// with exponential backoff and jitter until GiveUpAfter has passed without a
// commit.
func (w *Worker) reopen(ctx context.Context, sess *txn.Session, cause error) (*txn.Session, error) {
	if w.reinit.since.IsZero() || w.lastCommit.After(w.reinit.since) {
		w.reinit = newRetrier(w.cfg.GiveUpAfter)
	}
	w.log.Warn("transaction outcome unknown; re-initialising the producer and resuming from the broker's committed offsets", "err", cause)
	for {
		if w.reinit.expired() {
			sess.Close()
			return nil, fmt.Errorf("giving up after %s without a successful commit: %w", w.cfg.GiveUpAfter, cause)
		}
		w.reinit.wait(ctx)
		// Whether the last transaction's state changes committed is
		// unknown: drop all state; the new session's assignment
		// restores it from the changelog, consistent with the offsets
		// it resumes from.
		if w.state != nil {
			w.state.reset()
		}
		w.discardHeld()
		next, err := sess.Reopen(ctx)
		w.released() // the old client is closed, whether or not a new one opened
		if err == nil {
			w.stats.Reinits.Add(1)
			pid, epoch := next.Producer()
			w.emit(Event{Kind: EventReinit, ProducerID: pid, Epoch: epoch, Err: cause.Error()})
			return next, nil
		}
		if ctx.Err() != nil || txn.Classify(err) != txn.Unknown {
			return nil, err
		}
		cause = err
		w.log.Warn("re-initialising the producer failed; retrying", "err", err)
	}
}

// leave removes this static member from the group after a clean shutdown,
// so that its partitions move to the remaining instances at once instead of
// after the session timeout. A crash skips this on purpose: the partitions
// wait for the instance to come back with the same id, without a rebalance.
func (w *Worker) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(w.cfg.ClientOpts...)
	if err != nil {
		return
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(w.cfg.App).InstanceIDs(w.id).Reason("worker shutdown"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		w.log.Warn("leaving the group failed; partitions move after the session timeout", "err", err)
		return
	}
	w.log.Info("left the group", "group", w.cfg.App)
}

func (w *Worker) stopped(err error) error {
	var fe *fencing.FencedError
	switch {
	case errors.As(err, &fe):
		w.log.Error("fenced", "err", err)
		w.emit(Event{Kind: EventFenced, ProducerID: fe.ProducerID, Epoch: fe.Epoch, Err: err.Error()})
	case err != nil:
		w.emit(Event{Kind: EventStopped, Err: err.Error()})
	default:
		w.emit(Event{Kind: EventStopped})
	}
	return err
}

// runSession is the consume-transform-produce loop of one incarnation. It
// returns nil after a clean shutdown.
// idleRecheck is how long an idle worker's poll waits for records before
// it looks again for a failed restore.
const idleRecheck = time.Second

func (w *Worker) runSession(ctx context.Context, sess *txn.Session) error {
	var consumed int
	for {
		if ctx.Err() != nil {
			return w.shutdown(sess, consumed)
		}
		// Idle, the poll still returns every idleRecheck: a restore
		// that failed in the assignment callback is otherwise acted on
		// only when the next record arrives, and the worker would sit
		// on partitions it holds no state for.
		pollCtx, cancel := context.WithTimeout(ctx, idleRecheck)
		if sess.InTxn() {
			cancel()
			pollCtx, cancel = context.WithDeadline(ctx, w.pace.deadline(sess.Began()))
		}
		limit := w.polls.Limit(w.pace.interval())
		if m := w.cfg.MaxTxnRecords; m > 0 {
			limit = max(1, min(limit, m-consumed))
		}
		fs := sess.PollRecords(pollCtx, limit)
		cancel()
		if fs.IsClientClosed() {
			return txn.ErrClosed
		}
		if err := w.fetchErr(sess, fs); err != nil {
			w.abort(ctx, sess)
			return err
		}
		if err := w.restoreFailed(); err != nil {
			w.abort(ctx, sess)
			return err
		}
		if err := w.syncTransform(ctx, fs); err != nil {
			w.abort(ctx, sess)
			if ctx.Err() != nil {
				return w.shutdown(sess, consumed)
			}
			return err
		}
		began := time.Now()
		if err := w.process(ctx, sess, fs, &consumed); err != nil {
			return err
		}
		w.polls.Observe(fs.NumRecords(), time.Since(began))
		if sess.InTxn() && (w.pace.due(sess.Began()) || w.cfg.MaxTxnRecords > 0 && consumed >= w.cfg.MaxTxnRecords) {
			if err := w.end(ctx, sess, consumed); err != nil {
				return err
			}
			consumed = 0
		}
	}
}

func (w *Worker) process(ctx context.Context, sess *txn.Session, fs kgo.Fetches, consumed *int) error {
	if n := w.parallelism(fs); n > 1 {
		return w.processParallel(ctx, sess, fs, consumed, n)
	}
	var err error
	w.eachRecord(fs, func(r *kgo.Record) {
		if err != nil {
			return
		}
		if !sess.InTxn() {
			if err = sess.Begin(); err != nil {
				return
			}
		}
		if r.Attrs.IsControl() {
			// A transaction marker of a transactional input. It is not
			// data, but consuming it moves the position, and committing
			// that position is what lets the committed offset reach the
			// end of the input (otherwise an aborted transaction at the
			// end would leave the group's lag above zero forever).
			return
		}
		w.rec.fill(r)
		if perr := w.processOne(ctx, sess, r); perr != nil {
			w.abort(ctx, sess)
			err = transformFailed(r, perr)
			return
		}
		*consumed++
	})
	return err
}

// fill makes rec the Record a Transform sees for the fetched record r.
// It sets the fields one by one rather than assigning a whole Record:
// the compiler builds such a Record on the stack and copies it in 16-byte
// moves that wait on the 8-byte stores just made (a failed store
// forwarding), which profiles of the etl join put at a tenth of a lane's
// time.
func (rec *Record) fill(r *kgo.Record) {
	rec.Topic, rec.Partition, rec.Offset = r.Topic, r.Partition, r.Offset
	rec.Key, rec.Value, rec.Headers, rec.Timestamp = r.Key, r.Value, r.Headers, r.Timestamp
	rec.Repartitioned, rec.state = false, nil
}

// transformFailed is the error that stops the worker when the Transform
// failed r with err (not a dead letter).
func transformFailed(r *kgo.Record, err error) error {
	return &fatalError{fmt.Errorf("transform failed on %s[%d]@%d; the record was not committed and will be processed again on restart: %w", r.Topic, r.Partition, r.Offset, err)}
}

// end commits (or, under a test's abort fraction, aborts) the open
// transaction.
func (w *Worker) end(ctx context.Context, sess *txn.Session, consumed int) error {
	w.pace.committing()
	commit := !w.test.abort()
	// The context is not the worker's: canceling an EndTxn in flight would
	// leave its outcome unknown, and shutdown wants this commit to land.
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.TransactionTimeout)
	defer cancel()
	if commit {
		if err := w.flushHeld(ectx, sess); err != nil {
			w.abort(ctx, sess)
			return &fatalError{err}
		}
	}
	tainted := ""
	if commit && w.state != nil {
		// The changelog records join the transaction before it ends.
		if _, ok := w.state.flush(sess); !ok {
			commit, tainted = false, w.state.tainted
			w.log.Info("aborting the transaction instead of committing it", "reason", tainted)
		}
	}
	res, err := sess.End(ectx, commit)
	deadLetters := w.deadLetters
	w.deadLetters = 0
	if err != nil {
		w.stats.Aborted.Add(1)
		return err // the session is reopened; its state is reset then
	}
	w.released()
	if !res.Committed {
		w.discardHeld()
	}
	if w.state != nil {
		if res.Committed {
			w.state.committed()
		} else {
			w.state.aborted()
		}
	}
	w.pace.committed(res.CommitDuration)
	pid, epoch := sess.Producer()
	ev := Event{ProducerID: pid, Epoch: epoch, Records: res.Records, Consumed: consumed, Duration: res.Duration, CommitDuration: res.CommitDuration, FlushDuration: res.FlushDuration}
	if res.Committed {
		w.lastCommit = time.Now()
		w.stats.Committed.Add(1)
		w.stats.Consumed.Add(int64(consumed))
		w.stats.Produced.Add(int64(res.Records))
		w.stats.DeadLetters.Add(int64(deadLetters))
		ev.Kind, ev.DeadLetters = EventCommitted, deadLetters
	} else {
		w.stats.Aborted.Add(1)
		ev.Kind, ev.Reason = EventAborted, res.AbortReason
		if tainted != "" {
			ev.Reason = "state-withdrawn"
		}
	}
	w.emit(ev)
	return nil
}

func (w *Worker) abort(ctx context.Context, sess *txn.Session) {
	if !sess.InTxn() {
		return
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.TransactionTimeout)
	defer cancel()
	w.deadLetters = 0
	w.discardHeld()
	if _, err := sess.End(ectx, false); err != nil {
		w.log.Warn("aborting the open transaction failed; the coordinator aborts it when this producer is re-initialised or times out", "err", err)
	} else {
		w.released()
		if w.state != nil {
			w.state.aborted()
		}
	}
	w.stats.Aborted.Add(1)
}

// shutdown commits the open transaction, which consumed records:
// every record in it has been fully processed, so committing is as safe as
// aborting and loses less work. The count goes into the committed event and
// the stats like any commit's (it was 0, and a worker stopped by SIGINT
// reported fewer records consumed than produced).
func (w *Worker) shutdown(sess *txn.Session, consumed int) error {
	if !sess.InTxn() {
		return nil
	}
	err := w.end(context.Background(), sess, consumed)
	if err != nil && txn.Classify(err) == txn.Unknown {
		w.log.Warn("final commit outcome unknown; the next incarnation resumes from the broker's committed offsets", "err", err)
		return nil
	}
	return err
}

// fetchErr returns the first fetch error that must end the session. Errors
// the client recovers from on its own are logged and skipped.
func (w *Worker) fetchErr(sess *txn.Session, fs kgo.Fetches) error {
	var out error
	fs.EachError(func(topic string, partition int32, err error) {
		if out != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		switch txn.Classify(err) {
		case txn.Fenced:
			pid, epoch := sess.Producer()
			reason, _ := fencing.IsFenced(err)
			out = &fencing.FencedError{TransactionalID: w.id, Reason: reason, ProducerID: pid, Epoch: epoch, CurrentEpoch: -1, Err: err}
		case txn.Auth:
			var gs *kgo.ErrGroupSession
			if errors.As(err, &gs) || errors.Is(err, kerr.GroupAuthorizationFailed) {
				out = txn.Denied(err, "READ", "Group", w.cfg.App)
			} else {
				out = fmt.Errorf("consuming %s[%d]: %w", topic, partition, txn.Denied(err, "READ", "Topic", topic))
			}
		case txn.Fatal:
			out = fmt.Errorf("consuming %s[%d]: %w", topic, partition, err)
		default:
			var loss *kgo.ErrDataLoss
			if errors.As(err, &loss) {
				// The client has already moved its position (the log
				// looked truncated). Records fetched from there must not
				// join this transaction: abort, and let a fresh session
				// resume from the broker's committed offsets.
				out = fmt.Errorf("input %s[%d] reported a truncated log; aborting and resuming from the committed offsets: %w", topic, partition, err)
				return
			}
			w.log.Warn("fetch error; the client retries", "topic", topic, "partition", partition, "err", err)
		}
	})
	return out
}

// fatalError marks errors that must stop the worker even though their class
// would otherwise allow a retry.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func (w *Worker) emit(e Event) {
	if w.cfg.OnEvent == nil {
		return
	}
	e.Time = time.Now()
	e.TransactionalID = w.id
	e.App, e.Instance = w.cfg.App, w.cfg.Instance
	w.cfg.OnEvent(e)
}

// retrier paces the retries of a producer's (re)initialisation: the
// first and later InitProducerId of open and reopen. It waits with
// exponential backoff from 100 ms to 5 s, each wait jittered so that
// workers failed by one fault do not retry in step, and gives up once
// giveUp has passed since it was made (the first failure).
type retrier struct {
	since   time.Time
	backoff time.Duration
	giveUp  time.Duration
}

func newRetrier(giveUp time.Duration) retrier {
	return retrier{since: time.Now(), backoff: 100 * time.Millisecond, giveUp: giveUp}
}

// expired reports whether giveUp has passed since the first failure.
func (r *retrier) expired() bool { return time.Since(r.since) > r.giveUp }

// wait sleeps before the next attempt and doubles the backoff. A canceled
// ctx ends the sleep early; the caller's attempt then sees it.
func (r *retrier) wait(ctx context.Context) {
	sleep(ctx, jitter(r.backoff))
	r.backoff = min(r.backoff*2, 5*time.Second)
}

func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
