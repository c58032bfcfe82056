package pipeline

import (
	"context"
	"errors"
	"sync"

	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Forker is implemented by a Transform whose Process is a function of the
// record alone (and of what its Starter's Sync prepared), as an etl's is:
// a filter, a map, a lookup in a join's table. The worker then cuts each
// large poll into Config.Parallelism runs of records, processes them at
// the same time, each with a Transform of its own from Fork, and sends
// what they emitted from its own goroutine, in offset order within each
// partition, in the same transaction as ever. A record's outputs, dead
// letter and idempotency keys are exactly what processing it alone would
// give; only records of different partitions may interleave differently
// in the transaction, which nothing downstream can rely on anyway.
//
// Fork returns a Transform that shares what the receiver only reads (its
// configuration, a join's table) and owns everything Process writes (its
// scratch buffers, counters): the forks and the receiver each run Process
// on one goroutine, at the same time, on records of the same partition or
// of others. The worker calls the Starter methods (Sync...) on the
// receiver only, never while a fork processes, and a fork's Prefetch (if
// it is a Prefetcher) only from the goroutine that runs its Process.
//
// What can go wrong: a Process that remembers anything from one record to
// the next (a count, the last key seen) is not a Forker: its forks would
// each see some of the records. State in Stores, held output (Flusher) and
// a repartition topic tie records together, so a Transform with any of
// them is processed on the worker's goroutine only, Forker or not. A Fork
// that shares something Process writes is a data race: run the
// Transform's tests with -race and Parallelism above 1.
type Forker interface {
	Transform
	Fork() Transform
}

// DefaultParallelism is what Config.Parallelism 0 means: as many
// goroutines as GOMAXPROCS, up to this many.
const DefaultParallelism = 4

// minParallelRecords is the smallest poll the worker splits: below it,
// handing records to other goroutines costs more than it saves, and a
// trickle of records gains nothing from it.
const minParallelRecords = 2 * PrefetchAhead

// lane processes a run of a poll's records on a goroutine of its own,
// with its own Transform and collector, and keeps what each record gave
// until the worker sends it.
type lane struct {
	t     Transform
	col   collector
	rec   Record
	parts []kgo.FetchTopicPartition // the run, as pieces of partitions
	n     int                       // records in parts
	outs  []*kgo.Record
	res   []laneResult
}

// laneResult is what processing one record gave: its outputs
// outs[from:to], or the error Process returned (a dead letter or a fatal
// one); control records get one too, marked as such.
type laneResult struct {
	from, to int32
	control  bool
	err      error
}

// parallelism returns how many goroutines may process this poll, 1 if
// the Transform or the poll does not allow more.
func (w *Worker) parallelism(fs kgo.Fetches) int {
	if w.cfg.Parallelism == 1 || w.state != nil || w.lay.repartition != "" {
		return 1
	}
	if _, ok := w.t.(Forker); !ok {
		return 1
	}
	if _, ok := w.t.(Flusher); ok {
		return 1
	}
	if fs.NumRecords() < minParallelRecords {
		return 1
	}
	// Each run at least PrefetchAhead records long.
	return max(1, min(w.cfg.Parallelism, fs.NumRecords()/PrefetchAhead))
}

// processParallel is process for a poll split among n goroutines: the
// lanes run the Transform and its forks, then this goroutine sends each
// lane's outputs and dead letters in the order the lane processed them,
// stopping the worker at the first fatal error as process does.
func (w *Worker) processParallel(ctx context.Context, sess *txn.Session, fs kgo.Fetches, consumed *int, n int) error {
	if !sess.InTxn() {
		if err := sess.Begin(); err != nil {
			return err
		}
	}
	// The poll's records, partition after partition, cut into n runs of
	// about as many records each: lane i processes run i, and the lanes
	// are sent in order, so every partition's records are sent in offset
	// order even when one is cut between two lanes.
	lanes := w.lanes(n)
	per := (fs.NumRecords() + n - 1) / n
	l := 0
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for rs := p.Records; len(rs) > 0; {
			if lanes[l].n == per && l < n-1 {
				l++
			}
			take := min(len(rs), per-lanes[l].n)
			if l == n-1 {
				take = len(rs)
			}
			seg := p
			seg.Records = rs[:take:take]
			lanes[l].parts = append(lanes[l].parts, seg)
			lanes[l].n += take
			rs = rs[take:]
		}
	})
	var wg sync.WaitGroup
	for _, l := range lanes[1:] {
		wg.Go(func() { l.run(ctx) })
	}
	lanes[0].run(ctx)
	wg.Wait()

	var err error
	for _, l := range lanes {
		if err == nil {
			err = w.sendLane(ctx, sess, l, consumed)
		}
		l.done()
	}
	return err
}

// lanes returns n lanes, the first with the worker's own Transform, the
// others with forks made on first use and kept.
func (w *Worker) lanes(n int) []*lane {
	for len(w.laneSet) < n {
		t := w.t
		if len(w.laneSet) > 0 {
			t = w.t.(Forker).Fork()
		}
		l := &lane{t: t}
		l.col = collector{output: w.col.output, outputs: w.col.outputs, repartition: w.col.repartition, noKey: w.col.noKey}
		w.laneSet = append(w.laneSet, l)
	}
	return w.laneSet[:n]
}

// run processes the lane's partitions, stopping at a record whose error
// is not a dead letter (the worker stops there too).
func (l *lane) run(ctx context.Context) {
	pf, _ := l.t.(Prefetcher)
	for _, p := range l.parts {
		for i, r := range p.Records {
			if pf != nil && i%PrefetchAhead == 0 {
				pf.Prefetch(p.Records[i:min(i+PrefetchAhead, len(p.Records))])
			}
			if r.Attrs.IsControl() {
				l.res = append(l.res, laneResult{control: true})
				continue
			}
			l.rec = recordOf(r)
			l.col.reset(nil, &l.rec)
			err := l.t.Process(ctx, &l.rec, &l.col)
			if l.col.err != nil {
				err = l.col.err
			}
			from := int32(len(l.outs))
			if err == nil {
				l.outs = append(l.outs, l.col.pending...)
			}
			l.res = append(l.res, laneResult{from: from, to: int32(len(l.outs)), err: err})
			var dl *DeadLetterError
			if err != nil && !errors.As(err, &dl) {
				return
			}
		}
	}
}

// sendLane produces what the lane's records gave, or their dead letters,
// in the lane's order, and counts them consumed.
func (w *Worker) sendLane(ctx context.Context, sess *txn.Session, l *lane, consumed *int) error {
	i := 0
	for _, p := range l.parts {
		for _, r := range p.Records {
			if i == len(l.res) {
				return nil // not reached: a lane stops after the result of its failing record, which returns above
			}
			res := l.res[i]
			i++
			if res.control {
				continue
			}
			if res.err == nil {
				for _, o := range l.outs[res.from:res.to] {
					sess.Produce(o)
				}
				*consumed++
				continue
			}
			w.rec = recordOf(r)
			if err := w.deadLetter(ctx, sess, r, 0, res.err); err != nil {
				w.abort(ctx, sess)
				return transformFailed(r, err)
			}
			*consumed++
		}
	}
	return nil
}

// done empties the lane for the next poll, keeping its buffers.
func (l *lane) done() {
	clear(l.parts)
	clear(l.outs)
	clear(l.res)
	l.parts, l.outs, l.res, l.n = l.parts[:0], l.outs[:0], l.res[:0], 0
	l.rec = Record{}
}
