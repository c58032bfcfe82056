package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/pollsize"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BareConfig configures the bare copier: the exactly-once copy loop a user
// would write by hand from franz-go's documentation instead of running eos.
type BareConfig struct {
	// Group is the consumer group; the transactional.id is Group + "-bare".
	Group          string
	Inputs         []string
	Output         string
	CommitInterval time.Duration
	// ClientOpts carry the seed brokers and any TLS or SASL settings.
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
	// OnEvent receives worker-shaped events: assigned, committed (with
	// the records of the transaction and the time its End took), aborted,
	// stopped.
	OnEvent func(pipeline.Event)
}

// RunBare copies Inputs to Output exactly once with nothing but a
// kgo.GroupTransactSession, until ctx is canceled:
//
//   - read_committed, stable offsets, auto-commit off, kgo's default fetch
//     sizes;
//   - every polled record produced as it is (key, value, headers,
//     timestamp) to the same partition number of Output;
//   - End(TryCommit) once the transaction has been open CommitInterval,
//     counted from its first record;
//   - polls sized as the worker's are (internal/pollsize), so that both
//     take whole buffered fetches alike.
//
// It is what eos's engine is measured against (ModeBare):
// the floor of what exactly-once costs through franz-go on a given cluster,
// with none of the worker's features (no Transform, no idempotency-key
// header, no dead letters, state, fencing diagnosis or re-initialisation
// after an unknown outcome: any End error stops it). It is deliberately
// the naive loop, so that whatever eos does better or worse shows up.
func RunBare(ctx context.Context, cfg BareConfig) error {
	if cfg.CommitInterval <= 0 || cfg.Group == "" || len(cfg.Inputs) == 0 || cfg.Output == "" {
		return eos.BadConfig("bench.BareConfig", "the bare copier needs a group, inputs, an output and a positive commit interval")
	}
	b := &bare{cfg: cfg, id: cfg.Group + "-bare"}
	s, err := kgo.NewGroupTransactSession(append(append([]kgo.Opt(nil), cfg.ClientOpts...),
		kgo.TransactionalID(b.id),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RequireStableFetchOffsets(),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Inputs...),
		kgo.DisableAutoCommit(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			b.emit(pipeline.Event{Kind: pipeline.EventAssigned, Partitions: ps})
		}),
	)...)
	if err != nil {
		return fmt.Errorf("bare: creating client: %w", err)
	}
	err = b.loop(ctx, s)
	s.Close()
	ev := pipeline.Event{Kind: pipeline.EventStopped}
	if err != nil {
		ev.Err = err.Error()
	}
	b.emit(ev)
	return err
}

type bare struct {
	cfg      BareConfig
	id       string
	began    time.Time // first record of the open transaction; zero if none
	consumed int
	polls    pollsize.Sizer // as the worker's
}

func (b *bare) loop(ctx context.Context, s *kgo.GroupTransactSession) error {
	for {
		if ctx.Err() != nil {
			return b.end(context.WithoutCancel(ctx), s)
		}
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if !b.began.IsZero() {
			pctx, cancel = context.WithDeadline(ctx, b.began.Add(b.cfg.CommitInterval))
		}
		fs := s.PollRecords(pctx, b.polls.Limit(b.cfg.CommitInterval))
		cancel()
		polled := time.Now()
		if fs.IsClientClosed() {
			return errors.New("bare: client closed")
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				ferr = fmt.Errorf("bare: fetching %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var berr error
		fs.EachRecord(func(r *kgo.Record) {
			if berr != nil {
				return
			}
			if b.began.IsZero() {
				if berr = s.Begin(); berr != nil {
					return
				}
				b.began = time.Now()
			}
			s.Produce(ctx, &kgo.Record{Topic: b.cfg.Output, Partition: r.Partition, Key: r.Key, Value: r.Value,
				Headers: r.Headers, Timestamp: r.Timestamp}, nil)
			b.consumed++
		})
		if berr != nil {
			return fmt.Errorf("bare: beginning a transaction: %w", berr)
		}
		b.polls.Observe(fs.NumRecords(), time.Since(polled))
		if !b.began.IsZero() && time.Since(b.began) >= b.cfg.CommitInterval {
			// Not ctx: canceling an End in flight leaves the client in
			// an invalid state (kgo's documentation), and a stop signal
			// wants this commit to land.
			if err := b.end(context.WithoutCancel(ctx), s); err != nil {
				return err
			}
		}
	}
}

// end commits the open transaction. End's flush waits for every produced
// record, and kgo aborts instead if any of them failed or the group
// rebalanced, rewinding to the committed offsets.
func (b *bare) end(ctx context.Context, s *kgo.GroupTransactSession) error {
	if b.began.IsZero() {
		return nil
	}
	start := time.Now()
	// End flushes first; flushing here, as a loop that times its commits
	// would, splits the wait for the records from the commit's round
	// trips and changes nothing else (End's flush then has nothing to
	// wait for).
	if err := s.Client().Flush(ctx); err != nil {
		return fmt.Errorf("bare: flushing the transaction of %q: %w", b.id, err)
	}
	flushed := time.Since(start)
	committed, err := s.End(ctx, kgo.TryCommit)
	now := time.Now()
	if err != nil {
		return fmt.Errorf("bare: ending the transaction of %q: %w", b.id, err)
	}
	ev := pipeline.Event{Kind: pipeline.EventCommitted, Records: b.consumed, Consumed: b.consumed,
		Duration: now.Sub(b.began), CommitDuration: now.Sub(start), FlushDuration: flushed}
	if !committed {
		ev.Kind, ev.Consumed, ev.Reason = pipeline.EventAborted, 0, "rebalance or failed produce"
	}
	b.emit(ev)
	b.began, b.consumed = time.Time{}, 0
	return nil
}

func (b *bare) emit(e pipeline.Event) {
	if b.cfg.OnEvent == nil {
		return
	}
	e.Time = time.Now()
	e.App, e.TransactionalID = b.cfg.Group, b.id
	b.cfg.OnEvent(e)
}
