package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Forker is implemented by a Transform whose Process is a function of the
// record alone (and of what its Starter's Sync prepared), as an etl's is:
// a filter, a map, a lookup in a join's table. The worker then cuts each
// large poll into runs of records, which Config.Parallelism goroutines
// take in order and process at the same time, each with a Transform of
// its own from Fork; the worker's goroutine sends each run's outputs as
// soon as the run is processed, while the goroutines go on with the next
// ones, in offset order within each partition, in the same transaction as
// ever. A record's outputs, dead letter and idempotency keys are exactly
// what processing it alone would give; only records of different
// partitions may interleave differently in the transaction, which nothing
// downstream can rely on anyway.
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

// maxRunRecords is the longest run a poll is cut into. The worker's
// goroutine sends a run's outputs as soon as the run is processed, while
// the lanes process the next ones: short runs let sending start early and
// keep the two overlapping, where one run a lane would leave the sender
// idle until the lanes were done and the lanes idle while it sends.
const maxRunRecords = 8 * PrefetchAhead

// lane is a goroutine's Transform and collector: it processes runs of a
// poll's records, one after another, and keeps what each record gave in
// the run, until the worker sends it.
type lane struct {
	t   Transform
	col collector
	rec Record
}

// run is a piece of a poll, processed by one lane: its records and what
// each gave. done is closed once the lane is done with it.
type run struct {
	parts []kgo.FetchTopicPartition // the run, as pieces of partitions
	n     int                       // records in parts
	outs  []*kgo.Record
	res   []laneResult
	done  chan struct{}
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

// processParallel is process for a poll split among n lanes. The poll's
// records, partition after partition, are cut into runs; each lane takes
// the next run not yet taken and processes it with its Transform (the
// worker's or a fork), and this goroutine sends each run's outputs and
// dead letters in run order, as soon as the run is processed, while the
// lanes go on with the next. Every partition's records are therefore sent
// in offset order, even when a partition is cut between runs. The worker
// stops at the first fatal error as process does: the lanes take no new
// run, and the transaction is aborted once none is processing.
func (w *Worker) processParallel(ctx context.Context, sess *txn.Session, fs kgo.Fetches, consumed *int, n int) error {
	if !sess.InTxn() {
		if err := sess.Begin(); err != nil {
			return err
		}
	}
	lanes, runs := w.lanes(n), w.cut(fs, n)
	var (
		next atomic.Int64 // the index of the next run to take
		stop atomic.Bool  // a fatal error: take no more runs
		wg   sync.WaitGroup
	)
	for _, l := range lanes {
		wg.Go(func() {
			// A run is taken only if every run before it was: the
			// runs the sender waits for, up to the one that stops
			// it, are all taken, so it never waits for a run no
			// lane will process.
			for !stop.Load() {
				k := int(next.Add(1)) - 1
				if k >= len(runs) {
					return
				}
				if !l.process(ctx, runs[k]) {
					stop.Store(true)
				}
				close(runs[k].done)
			}
		})
	}
	var err error
	for _, r := range runs {
		<-r.done
		if err = w.sendRun(ctx, sess, r, consumed); err != nil {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, r := range runs {
		r.reset()
	}
	if err != nil {
		// Only now: an abort releases the Transforms' outputs
		// (Releaser), which no lane may be writing.
		w.abort(ctx, sess)
	}
	return err
}

// cut cuts the poll's records into runs, at most maxRunRecords long and
// at least as many as lanes, partition after partition.
func (w *Worker) cut(fs kgo.Fetches, lanes int) []*run {
	per := min(maxRunRecords, (fs.NumRecords()+lanes-1)/lanes)
	var runs []*run
	add := func() *run {
		if len(runs) == len(w.runSet) {
			w.runSet = append(w.runSet, &run{})
		}
		r := w.runSet[len(runs)]
		r.done = make(chan struct{})
		runs = append(runs, r)
		return r
	}
	cur := add()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for rs := p.Records; len(rs) > 0; {
			if cur.n == per {
				cur = add()
			}
			take := min(len(rs), per-cur.n)
			seg := p
			seg.Records = rs[:take:take]
			cur.parts = append(cur.parts, seg)
			cur.n += take
			rs = rs[take:]
		}
	})
	return runs
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

// process processes the run's records with the lane's Transform and
// reports whether it got through them: it stops at a record whose error
// is not a dead letter (the worker stops there too).
func (l *lane) process(ctx context.Context, run *run) bool {
	pf, _ := l.t.(Prefetcher)
	for _, p := range run.parts {
		for i, r := range p.Records {
			if pf != nil && i%PrefetchAhead == 0 {
				pf.Prefetch(p.Records[i:min(i+PrefetchAhead, len(p.Records))])
			}
			if r.Attrs.IsControl() {
				run.res = append(run.res, laneResult{control: true})
				continue
			}
			l.rec.fill(r)
			l.col.reset(nil, &l.rec)
			err := l.t.Process(ctx, &l.rec, &l.col)
			if l.col.err != nil {
				err = l.col.err
			}
			from := int32(len(run.outs))
			if err == nil {
				run.outs = append(run.outs, l.col.pending...)
			}
			run.res = append(run.res, laneResult{from: from, to: int32(len(run.outs)), err: err})
			if err != nil && !isDeadLetter(err) {
				l.rec = Record{}
				return false
			}
		}
	}
	l.rec = Record{}
	return true
}

// sendRun produces what the run's records gave, or their dead letters,
// in the run's order, and counts them consumed. Its error stops the
// worker; processParallel aborts the transaction.
func (w *Worker) sendRun(ctx context.Context, sess *txn.Session, run *run, consumed *int) error {
	i := 0
	for _, p := range run.parts {
		for _, r := range p.Records {
			if i == len(run.res) {
				return nil // not reached: a run stops after the result of its failing record, which returns above
			}
			res := run.res[i]
			i++
			if res.control {
				continue
			}
			if res.err == nil {
				for _, o := range run.outs[res.from:res.to] {
					sess.Produce(o)
				}
				*consumed++
				continue
			}
			w.rec.fill(r)
			if err := w.deadLetter(ctx, sess, r, 0, res.err); err != nil {
				return transformFailed(r, err)
			}
			*consumed++
		}
	}
	return nil
}

// isDeadLetter reports whether err is a dead letter. It is a function of
// its own so that the target errors.As writes escapes to the heap only
// when there is an error: declared in the loop of lane.process, it was
// allocated for every record.
func isDeadLetter(err error) bool {
	var dl *DeadLetterError
	return errors.As(err, &dl)
}

// reset empties the run for the next poll, keeping its buffers.
func (r *run) reset() {
	clear(r.parts)
	clear(r.outs)
	clear(r.res)
	r.parts, r.outs, r.res, r.n = r.parts[:0], r.outs[:0], r.res[:0], 0
}
