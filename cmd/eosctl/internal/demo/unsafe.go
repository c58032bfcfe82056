package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// UnsafeConfig configures the at-least-once copier the fencing demo runs as
// its counter-example.
type UnsafeConfig struct {
	App, Instance  string
	Input, Output  string
	CommitInterval time.Duration
	ClientOpts     []kgo.Opt
	OnEvent        func(pipeline.Event)
}

// UnsafeCopy copies Input to Output the way a hand-written loop usually
// does: an idempotent (not transactional) producer, and consumer offsets
// committed with a plain OffsetCommit after a flush, every CommitInterval.
// Idempotence removes duplicates from producer retries only; it cannot stop
// a second incarnation from writing again what the first wrote after its last
// offset commit, and nothing fences the first when it comes back. It exists
// to be compared with the transactional worker, never to be used.
func UnsafeCopy(ctx context.Context, cfg UnsafeConfig) error {
	id, err := fencing.TransactionalID(cfg.App, cfg.Instance)
	if err != nil {
		return err
	}
	emit := func(e pipeline.Event) {
		if cfg.OnEvent != nil {
			e.Time, e.App, e.Instance, e.TransactionalID = time.Now(), cfg.App, cfg.Instance, id
			cfg.OnEvent(e)
		}
	}
	cl, err := kgo.NewClient(append(cfg.ClientOpts,
		kgo.ConsumerGroup(cfg.App), kgo.InstanceID(id), kgo.ConsumeTopics(cfg.Input),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(6*time.Second))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("initialising idempotent producer: %w", err)
	}
	emit(pipeline.Event{Kind: pipeline.EventStarted, ProducerID: pid, Epoch: epoch})
	last, n := time.Now(), 0
	for ctx.Err() == nil {
		pctx, cancel := context.WithDeadline(ctx, last.Add(cfg.CommitInterval))
		fs := cl.PollRecords(pctx, 1000)
		cancel()
		var fatal error
		fs.EachError(func(_ string, _ int32, err error) {
			if _, ok := fencing.IsFenced(err); ok && fatal == nil {
				fatal = err
			}
		})
		if fatal != nil {
			return fatal
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			cl.Produce(ctx, &kgo.Record{Topic: cfg.Output, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}, nil)
		})
		if time.Since(last) >= cfg.CommitInterval {
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				if _, ok := fencing.IsFenced(err); ok {
					return err
				}
			}
			emit(pipeline.Event{Kind: pipeline.EventCommitted, ProducerID: pid, Epoch: epoch, Consumed: n, Records: n})
			last, n = time.Now(), 0
		}
	}
	return nil
}
