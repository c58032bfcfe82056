package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// deadLetterSources dead-letters the input records that the record being
// processed stands for (DeadLetterError.Sources), each as it is in its
// topic: key, value, headers and timestamp, with the dead-letter headers
// naming its own coordinates. They are read back with read_committed by
// the worker's sourceReader: a fetch, meant for the rare path (a combiner's
// partial result that arrived too late).
//
// What can go wrong: a source that retention has deleted since it was
// consumed is dead-lettered without its value, its error saying so, rather
// than not at all; a failed read stops the worker without committing, and
// the next incarnation tries again.
func (w *Worker) deadLetterSources(ctx context.Context, sess *txn.Session, dl *DeadLetterError) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StartTimeout)
	defer cancel()
	if w.sources == nil {
		w.sources = &sourceReader{opts: w.cfg.ClientOpts}
	}
	recs, err := w.sources.read(ctx, dl.Sources)
	if err != nil {
		return fmt.Errorf("reading back the %d input records that %s[%d]@%d stands for, to dead-letter them: %w", len(dl.Sources), w.rec.Topic, w.rec.Partition, w.rec.Offset, err)
	}
	for i, src := range dl.Sources {
		one := DeadLetterError{Reason: dl.Reason, Err: dl.Err}
		in := Record{Topic: src.Topic, Partition: src.Partition, Offset: src.Offset, Timestamp: w.rec.Timestamp}
		if r := recs[i]; r != nil {
			in.Key, in.Value, in.Headers, in.Timestamp = r.Key, r.Value, r.Headers, r.Timestamp
		} else {
			one.Err = fmt.Errorf("%w (the record is no longer in %s[%d]: retention deleted it after it was consumed, so this dead letter has no value)", dl.Err, src.Topic, src.Partition)
		}
		sess.Produce(deadLetterRecord(w.cfg.DLQ, w.cfg.Topology, &in, &one))
		w.deadLetters++
	}
	w.log.Info("dead-lettered the input records a rejected record stands for, read back from their topics", "topic", w.rec.Topic, "partition", w.rec.Partition, "offset", w.rec.Offset, "records", len(dl.Sources), "reason", dl.Reason)
	return nil
}

// sourceReader reads input records back by their coordinates. Its client is
// made on first use and kept until the worker stops: a burst of late
// partials (a worker catching up on a backlog behind the others) would
// otherwise pay a new connection for each. After any failed read it starts
// over with a new client.
type sourceReader struct {
	opts []kgo.Opt
	cl   *kgo.Client
}

func (r *sourceReader) close() {
	if r != nil && r.cl != nil {
		r.cl.Close()
		r.cl = nil
	}
}

// read returns the records at srcs, in their order, read with
// read_committed; nil for a source below its partition's log start. The
// sources were consumed with read_committed before, so every other one is
// there to be read.
func (r *sourceReader) read(ctx context.Context, srcs []Source) ([]*kgo.Record, error) {
	if r.cl == nil {
		cl, err := kgo.NewClient(append(slices.Clip(r.opts), kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
		if err != nil {
			return nil, err
		}
		r.cl = cl
	}
	recs, err := r.fetch(ctx, srcs)
	if err != nil {
		r.close()
	}
	return recs, err
}

func (r *sourceReader) fetch(ctx context.Context, srcs []Source) ([]*kgo.Record, error) {
	type tp struct {
		topic     string
		partition int32
	}
	last := map[tp]int64{}       // the highest offset wanted of each partition
	at := map[tp]map[int64]int{} // offset -> index in srcs
	for i, s := range srcs {
		k := tp{s.Topic, s.Partition}
		if at[k] == nil {
			at[k], last[k] = map[int64]int{}, s.Offset
		}
		at[k][s.Offset] = i
		last[k] = max(last[k], s.Offset)
	}
	cl := r.cl
	var topics []string
	for k := range at {
		if !slices.Contains(topics, k.topic) {
			topics = append(topics, k.topic)
		}
	}
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the log start offsets of %v: %w", topics, err)
	}
	from := map[string]map[int32]kgo.Offset{}
	for k, wanted := range at {
		start := int64(0)
		if o, ok := starts.Lookup(k.topic, k.partition); ok {
			start = o.Offset
		}
		if last[k] < start {
			delete(at, k) // all gone
			continue
		}
		lo := slices.Min(slices.Collect(maps.Keys(wanted)))
		if from[k.topic] == nil {
			from[k.topic] = map[int32]kgo.Offset{}
		}
		from[k.topic][k.partition] = kgo.NewOffset().At(max(lo, start))
	}
	recs := make([]*kgo.Record, len(srcs))
	if len(at) == 0 {
		return recs, nil
	}
	cl.AddConsumePartitions(from)
	defer func() {
		// Stop fetching them (and drop what was buffered): the next read
		// starts where it needs to.
		stop := map[string][]int32{}
		for t, ps := range from {
			for p := range ps {
				stop[t] = append(stop[t], p)
			}
		}
		cl.RemoveConsumePartitions(stop)
	}()
	for len(at) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%d partitions not read to their last wanted offset: %w", len(at), err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) { ferr = fmt.Errorf("fetching %s[%d]: %w", t, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			wanted, ok := at[k]
			if !ok {
				return
			}
			if i, ok := wanted[r.Offset]; ok {
				recs[i] = r
			}
			if r.Offset >= last[k] {
				delete(at, k)
			}
		})
	}
	return recs, nil
}
