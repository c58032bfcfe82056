package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/pollsize"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BaselineConfig configures the at-least-once copier that eos is measured
// against.
type BaselineConfig struct {
	Group          string
	Inputs         []string
	Output         string
	CommitInterval time.Duration
	Transform      pipeline.Transform
	// ClientOpts carry the seed brokers and any TLS or SASL settings.
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
	// OnEvent receives the same events a pipeline worker emits, as far as
	// they apply: assigned, revoked, committed (an OffsetCommit, with the
	// records consumed since the previous one), stopped.
	OnEvent func(pipeline.Event)
}

// RunBaseline copies Inputs to Output through Transform at least once, the
// way a careful application without transactions does, until ctx is
// canceled:
//
//   - consumer group, read_uncommitted, auto-commit off;
//   - an idempotent producer with acks=all (kgo's defaults), so that retries
//     do not duplicate;
//   - every CommitInterval, paced as the worker paces its transactions
//     (from the start of the previous commit, at least 3/4 of an interval
//     after the first record): flush, then a plain synchronous OffsetCommit
//     of everything polled.
//
// Its output carries the same idempotency-key header as the worker's, so
// both modes write the same bytes. It exists as a benchmark baseline, not as
// a product feature: a crash between the flush and the commit duplicates a
// commit interval's worth of output, which is what exactly-once is for.
func RunBaseline(ctx context.Context, cfg BaselineConfig) error {
	if cfg.CommitInterval <= 0 || cfg.Transform == nil || cfg.Group == "" || len(cfg.Inputs) == 0 || cfg.Output == "" {
		return eos.BadConfig("bench.BaselineConfig", "the baseline needs a group, inputs, an output, a transform and a positive commit interval")
	}
	b := &baseline{cfg: cfg, log: cfg.Logger}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	// The worker's fetch bounds (pipeline/worker.go), so that both modes
	// fetch alike and hold alike; ClientOpts can raise them, as for it.
	opts := append(append(pipeline.FetchBounds(), cfg.ClientOpts...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Inputs...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			b.emit(pipeline.Event{Kind: pipeline.EventAssigned, Partitions: ps})
		}),
		// Rebalances only happen between polls (BlockRebalanceOnPoll), when
		// every polled record has been produced: committing here is safe.
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
			if err := b.commit(ctx); err != nil {
				b.log.Warn("baseline: committing before a rebalance failed; its records will be copied again", "err", err)
			}
			if len(ps) > 0 {
				b.emit(pipeline.Event{Kind: pipeline.EventRevoked, Partitions: ps, Reason: "revoked"})
			}
		}),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("baseline: creating client: %w", err)
	}
	b.cl = cl
	b.em.b = b
	err = b.loop(ctx)
	// Close leaves the group, which waits for a rebalance to be allowed:
	// the loop may have returned between a poll and AllowRebalance.
	cl.AllowRebalance()
	cl.Close()
	ev := pipeline.Event{Kind: pipeline.EventStopped}
	if err != nil {
		ev.Err = err.Error()
	}
	b.emit(ev)
	return err
}

type baseline struct {
	cfg BaselineConfig
	log *slog.Logger
	cl  *kgo.Client
	em  emitter

	began     time.Time // first record since the last commit; zero if none
	lastStart time.Time // when the last commit started
	consumed  int
	produced  int
	polls     pollsize.Sizer // as the worker's

	mu      sync.Mutex
	prodErr error
}

func (b *baseline) loop(ctx context.Context) error {
	for {
		if ctx.Err() != nil {
			return b.commit(context.WithoutCancel(ctx))
		}
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if !b.began.IsZero() {
			pollCtx, cancel = context.WithDeadline(ctx, b.deadline())
		}
		fs := b.cl.PollRecords(pollCtx, b.polls.Limit(b.cfg.CommitInterval))
		cancel()
		polled := time.Now()
		if fs.IsClientClosed() {
			return errors.New("baseline: client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				b.log.Warn("baseline: fetch error; the client retries", "topic", t, "partition", p, "err", err)
			}
		})
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			if perr != nil {
				return
			}
			if b.began.IsZero() {
				b.began = time.Now()
			}
			b.em.in = pipeline.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
			b.em.index = 0
			if err := b.cfg.Transform.Process(ctx, &b.em.in, &b.em); err != nil {
				perr = fmt.Errorf("baseline: transform failed on %s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			b.consumed++
		})
		if perr != nil {
			return perr
		}
		b.polls.Observe(fs.NumRecords(), time.Since(polled))
		if !b.began.IsZero() && !time.Now().Before(b.deadline()) {
			// Not ctx: a stop signal arriving mid-commit must not fail
			// the commit, which the shutdown path would redo anyway.
			if err := b.commit(context.WithoutCancel(ctx)); err != nil {
				return err
			}
		}
		b.cl.AllowRebalance()
	}
}

// deadline is when the pending records must be committed, by the worker's
// rule (pipeline's pacer): an interval after the previous commit started,
// but no sooner than 3/4 of an interval after the first of them.
func (b *baseline) deadline() time.Time {
	iv := b.cfg.CommitInterval
	if b.lastStart.IsZero() {
		return b.began.Add(iv)
	}
	return maxTime(b.lastStart.Add(iv), b.began.Add(iv*3/4))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// commit flushes what was produced and then commits the offsets of every
// polled record with a plain OffsetCommit.
func (b *baseline) commit(ctx context.Context) error {
	if b.began.IsZero() {
		return nil
	}
	start := time.Now()
	b.lastStart = start
	if err := b.cl.Flush(ctx); err != nil {
		return fmt.Errorf("baseline: flushing: %w", err)
	}
	flushed := time.Since(start)
	b.mu.Lock()
	perr := b.prodErr
	b.mu.Unlock()
	if perr != nil {
		return perr
	}
	if err := b.cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("baseline: committing offsets of group %q: %w", b.cfg.Group, err)
	}
	now := time.Now()
	b.emit(pipeline.Event{Kind: pipeline.EventCommitted, Records: b.produced, Consumed: b.consumed,
		Duration: now.Sub(b.began), CommitDuration: now.Sub(start), FlushDuration: flushed})
	b.began, b.consumed, b.produced = time.Time{}, 0, 0
	return nil
}

func (b *baseline) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	b.mu.Lock()
	if b.prodErr == nil {
		b.prodErr = fmt.Errorf("baseline: producing to %s[%d]: %w", r.Topic, r.Partition, err)
	}
	b.mu.Unlock()
}

func (b *baseline) emit(e pipeline.Event) {
	if b.cfg.OnEvent == nil {
		return
	}
	e.Time = time.Now()
	e.App = b.cfg.Group
	b.cfg.OnEvent(e)
}

// emitter produces a Transform's output directly, with the same header the
// pipeline's collector adds, so that both modes write the same records.
type emitter struct {
	b     *baseline
	in    pipeline.Record
	index int
}

func (e *emitter) Emit(o pipeline.Output) {
	topic := o.Topic
	if topic == "" {
		topic = e.b.cfg.Output
	}
	ts := o.Timestamp
	if ts.IsZero() {
		ts = e.in.Timestamp
	}
	hs := make([]kgo.RecordHeader, 0, len(o.Headers)+1)
	for _, h := range o.Headers {
		if h.Key != pipeline.IdempotencyKeyHeader {
			hs = append(hs, h)
		}
	}
	key := make([]byte, 0, len(e.in.Topic)+32)
	key = append(append(key, e.in.Topic...), '/')
	key = append(strconv.AppendInt(key, int64(e.in.Partition), 10), '/')
	key = append(strconv.AppendInt(key, e.in.Offset, 10), '/')
	key = strconv.AppendInt(key, int64(e.index), 10)
	hs = append(hs, kgo.RecordHeader{Key: pipeline.IdempotencyKeyHeader, Value: key})
	e.index++
	e.b.produced++
	e.b.cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: o.Key, Value: o.Value, Timestamp: ts, Headers: hs}, e.b.promise)
}
