package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/eosctl/eos/internal/rangeread"
	"github.com/eosctl/eos/internal/txn"
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
		w.sources = newSourceReader(w.cfg.ClientOpts)
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

// sourceReader reads input records back by their coordinates with a
// rangeread.Reader, whose client is made on first use and kept until the
// worker stops: a burst of late partials (a worker catching up on a
// backlog behind the others) would otherwise pay a new connection for
// each. After any failed read it starts over with a new client.
type sourceReader struct {
	r *rangeread.Reader
}

func newSourceReader(opts []kgo.Opt) *sourceReader {
	return &sourceReader{r: rangeread.NewReader(opts, rangeread.Options{})}
}

func (r *sourceReader) close() {
	if r != nil {
		r.r.Close()
	}
}

// read returns the records at srcs, in their order, read with
// read_committed; nil for a source below its partition's log start. The
// sources were consumed with read_committed before, so every other one is
// there to be read: each partition is read from its first wanted offset
// (or its log start) through its last.
func (r *sourceReader) read(ctx context.Context, srcs []Source) ([]*kgo.Record, error) {
	type tp struct {
		topic     string
		partition int32
	}
	at := map[tp]map[int64]int{} // offset -> index in srcs
	var topics []string
	for i, s := range srcs {
		k := tp{s.Topic, s.Partition}
		if at[k] == nil {
			at[k] = map[int64]int{}
		}
		at[k][s.Offset] = i
		if !slices.Contains(topics, s.Topic) {
			topics = append(topics, s.Topic)
		}
	}
	adm, err := r.r.Admin()
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		r.r.Close()
		return nil, fmt.Errorf("listing the log start offsets of %v: %w", topics, err)
	}
	ranges := rangeread.Ranges{}
	for k, wanted := range at {
		start := int64(0)
		if o, ok := starts.Lookup(k.topic, k.partition); ok {
			start = o.Offset
		}
		offsets := slices.Collect(maps.Keys(wanted))
		if last := slices.Max(offsets); last >= start { // else all gone
			ranges.Add(k.topic, k.partition, max(slices.Min(offsets), start), last+1)
		}
	}
	recs := make([]*kgo.Record, len(srcs))
	err = r.r.Read(ctx, ranges, func(rec *kgo.Record) {
		if i, ok := at[tp{rec.Topic, rec.Partition}][rec.Offset]; ok {
			recs[i] = rec
		}
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}
