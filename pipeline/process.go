package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// processOne runs the Transform on w.rec (fetched as r) and then sends what
// it emitted, or, if it rejected the record with DeadLetter, undoes its
// state changes, drops its outputs and sends the dead letter instead. A
// returned error stops the worker.
func (w *Worker) processOne(ctx context.Context, sess *txn.Session, r *kgo.Record) error {
	w.rec.Repartitioned = w.lay.repartition != "" && r.Topic == w.lay.repartition
	mark := 0
	if w.state != nil {
		mark = w.state.mark()
		if r.Topic == w.state.topic {
			w.rec.state = w.state.lookup(r.Partition)
		}
	}
	w.col.reset(sess, &w.rec)
	perr := w.t.Process(ctx, &w.rec, &w.col)
	if w.col.err != nil {
		return w.col.err
	}
	if perr == nil {
		w.col.send()
		return nil
	}
	return w.deadLetter(ctx, sess, r, mark, perr)
}

// deadLetter sends w.rec to the dead-letter topic if perr says so (a
// DeadLetterError), undoing what processing it changed in state since mark;
// any other error is returned. (Kept apart from processOne so that the
// error target of errors.As is allocated only for records that fail.)
func (w *Worker) deadLetter(ctx context.Context, sess *txn.Session, r *kgo.Record, mark int, perr error) error {
	var dl *DeadLetterError
	if errors.As(perr, &dl) {
		if w.state != nil {
			w.state.rollbackTo(mark)
		}
		if err := w.ensureDLQ(ctx, sess); err != nil {
			return err
		}
		if len(dl.Sources) > 0 {
			if err := w.deadLetterSources(ctx, sess, dl); err != nil {
				return err
			}
		} else {
			sess.Produce(deadLetterRecord(w.cfg.DLQ, w.cfg.Topology, &w.rec, dl))
			w.deadLetters++
		}
		if time.Since(w.lastDeadLetterLog) >= time.Second {
			w.lastDeadLetterLog = time.Now()
			w.log.Warn("dead-lettered a record (logged at most once a second)", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "reason", dl.Reason, "err", dl.Err, "dlq", w.cfg.DLQ)
		}
		return nil
	}
	return perr
}

// flushHeld has a Flusher emit what it held back, into the transaction about
// to commit.
func (w *Worker) flushHeld(ctx context.Context, sess *txn.Session) error {
	f, ok := w.t.(Flusher)
	if !ok {
		return nil
	}
	w.col.reset(sess, nil)
	if err := f.Flush(ctx, &w.col); err != nil {
		return fmt.Errorf("flushing the transform's held output before a commit: %w", err)
	}
	if w.col.err != nil {
		return w.col.err
	}
	w.col.send()
	return nil
}

// discardHeld has a Flusher forget what it held back: the transaction will
// not commit, and its records are processed again.
func (w *Worker) discardHeld() {
	if f, ok := w.t.(Flusher); ok {
		f.Discard()
	}
}

// ensureDLQ creates the dead-letter topic on the first dead letter of a
// Transform that did not declare it would write any.
func (w *Worker) ensureDLQ(ctx context.Context, sess *txn.Session) error {
	if w.dlqReady {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StartTimeout)
	defer cancel()
	n, created, err := admin.EnsureTopic(ctx, sess.Client(), w.cfg.DLQ, w.outParts, nil)
	if err != nil {
		return fmt.Errorf("dead-letter topic: %w", txn.Denied(err, "DESCRIBE or CREATE", "Topic", w.cfg.DLQ))
	}
	if created {
		w.log.Info("created dead-letter topic", "topic", w.cfg.DLQ, "partitions", n)
	}
	w.dlqReady = true
	return nil
}

// restoreFailed returns the error of a failed restore, which makes the
// worker reopen its session (and restore again).
func (w *Worker) restoreFailed() error {
	if w.state == nil {
		return nil
	}
	if err := w.state.failed(); err != nil {
		return fmt.Errorf("restoring state from %v: %w", w.state.changelogs, err)
	}
	return nil
}

// prepareTopics creates the topics the worker writes besides its output:
// named outputs and the dead-letter topic (partitions: as the output), the
// repartition topic (as the input) and the compacted changelogs (as the
// state topic, which they must match).
func (w *Worker) prepareTopics(ctx context.Context, cl *kgo.Client, inParts, outParts int32) error {
	ensure := func(what, topic string, parts int32, configs map[string]*string) (int32, error) {
		n, created, err := admin.EnsureTopic(ctx, cl, topic, parts, configs)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, txn.Denied(err, "DESCRIBE or CREATE", "Topic", topic))
		}
		if created {
			w.log.Info("created "+what+" topic", "topic", topic, "partitions", n)
		}
		return n, nil
	}
	for _, name := range slices.Sorted(maps.Keys(w.lay.outputs)) {
		topic := w.lay.outputs[name]
		if topic == w.cfg.Output || topic == w.lay.repartition {
			continue
		}
		if _, err := ensure("output "+name, topic, outParts, nil); err != nil {
			return err
		}
	}
	if w.lay.deadLetters {
		if _, err := ensure("dead-letter", w.cfg.DLQ, outParts, nil); err != nil {
			return err
		}
		w.dlqReady = true
	}
	w.outParts = outParts
	stateParts := inParts
	if w.lay.repartition != "" {
		n, err := ensure("repartition", w.lay.repartition, inParts, nil)
		if err != nil {
			return err
		}
		stateParts = n
	}
	compact := "compact"
	for _, c := range w.lay.changelogs {
		n, err := ensure("changelog", c, stateParts, map[string]*string{"cleanup.policy": &compact})
		if err != nil {
			return err
		}
		if n != stateParts {
			return eos.BadConfig("pipeline.Config.App", "changelog %s has %d partitions but the state topic %s has %d: partition i of the changelog holds the state of partition i, so they must match (delete the changelog to rebuild the state from scratch)",
				c, n, w.state.topic, stateParts)
		}
	}
	return nil
}
