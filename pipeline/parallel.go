package pipeline

import (
	"cmp"
	"context"
	"errors"
	"slices"
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

// PartitionForker is implemented by a Transform with per-partition state
// (Stores, a Flusher's held state) whose Process reads and writes only the
// state of the record's own partition, as the dedup topology's is. The
// worker then cuts each large poll by partition: every partition's records
// go to one of Config.Parallelism goroutines, which process them at the same
// time, each with a Transform of its own from ForkPartitions, and the worker
// sends what they emitted from its own goroutine, partition by partition in
// offset order, in the same transaction as ever. A record's outputs, dead
// letter and state changes are exactly what processing it on the worker's
// goroutine would give. (A Forker with Stores or a Flusher is processed on
// the worker's goroutine only; a PartitionForker is asked for forks even
// with them, but never with a repartition topic.)
//
// ForkPartitions returns a Transform that shares with the receiver what
// belongs to partitions (a table per partition, built from its Stores) and
// owns everything else Process writes (scratch buffers, counters, the
// list of partitions it touched). While a poll is processed, each
// partition belongs to one fork (the receiver is one of them) for the whole
// poll: Process may read and write that partition's Stores, and whatever
// the Transform keeps for it, without locks. Whatever the forks share
// across partitions (the map from partition to table) needs a lock. The
// worker calls every other method (Flush, Discard, the Starter's, OnEvent)
// on the receiver only, never while a fork processes: Flush and Discard
// must cover what the forks did, so the receiver keeps its forks.
//
// What can go wrong: a Process that ties partitions together (a count
// across them, a table shared unlocked, a write to another partition's
// Store kept from an earlier call) is not a PartitionForker. Run the
// Transform's tests with -race and Parallelism above 1.
type PartitionForker interface {
	Transform
	ForkPartitions() Transform
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
	state *stateSet // the worker's, for a PartitionForker's lanes; else nil
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
	if w.cfg.Parallelism == 1 || w.lay.repartition != "" || fs.NumRecords() < minParallelRecords {
		return 1
	}
	// Each run at least PrefetchAhead records long.
	n := max(1, min(w.cfg.Parallelism, fs.NumRecords()/PrefetchAhead))
	if _, ok := w.t.(PartitionForker); ok {
		// Whole partitions: no more lanes than partitions with records.
		parts := 0
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				parts++
			}
		})
		return max(1, min(n, parts))
	}
	if _, ok := w.t.(Forker); !ok || w.state != nil {
		return 1
	}
	if _, ok := w.t.(Flusher); ok {
		return 1
	}
	return n
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
	lanes := w.lanes(n)
	if _, ok := w.t.(PartitionForker); ok {
		cutByPartition(fs, lanes)
	} else {
		cutInRuns(fs, lanes)
	}
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

// cutInRuns cuts the poll's records, partition after partition, into
// len(lanes) runs of about as many records each: lane i processes run i,
// and the lanes are sent in order, so every partition's records are sent
// in offset order even when one is cut between two lanes.
func cutInRuns(fs kgo.Fetches, lanes []*lane) {
	n := len(lanes)
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
}

// cutByPartition gives every partition of the poll, whole, to one lane:
// the largest first, each to the lane with the fewest records so far. A
// partition appears once in a poll, so no two lanes share one.
func cutByPartition(fs kgo.Fetches, lanes []*lane) {
	var parts []kgo.FetchTopicPartition
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) > 0 {
			parts = append(parts, p)
		}
	})
	slices.SortStableFunc(parts, func(a, b kgo.FetchTopicPartition) int { return cmp.Compare(len(b.Records), len(a.Records)) })
	for _, p := range parts {
		l := slices.MinFunc(lanes, func(a, b *lane) int { return cmp.Compare(a.n, b.n) })
		l.parts = append(l.parts, p)
		l.n += len(p.Records)
	}
}

// lanes returns n lanes, the first with the worker's own Transform, the
// others with forks made on first use and kept.
func (w *Worker) lanes(n int) []*lane {
	pf, byPartition := w.t.(PartitionForker)
	for len(w.laneSet) < n {
		t := w.t
		switch {
		case len(w.laneSet) == 0:
		case byPartition:
			t = pf.ForkPartitions()
		default:
			t = w.t.(Forker).Fork()
		}
		l := &lane{t: t}
		if byPartition {
			l.state = w.state
		}
		l.col = collector{output: w.col.output, outputs: w.col.outputs, repartition: w.col.repartition, noKey: w.col.noKey}
		w.laneSet = append(w.laneSet, l)
	}
	return w.laneSet[:n]
}

// run processes the lane's partitions, stopping at a record whose error
// is not a dead letter (the worker stops there too). A PartitionForker's
// lane gives each record its partition's state and undoes a dead-lettered
// record's changes to it at once, before the partition's next record.
func (l *lane) run(ctx context.Context) {
	pf, _ := l.t.(Prefetcher)
	for _, p := range l.parts {
		var ps *partitionState
		if l.state != nil && p.Topic == l.state.topic {
			ps = l.state.lookup(p.Partition)
		}
		for i, r := range p.Records {
			if pf != nil && i%PrefetchAhead == 0 {
				pf.Prefetch(p.Records[i:min(i+PrefetchAhead, len(p.Records))])
			}
			if r.Attrs.IsControl() {
				l.res = append(l.res, laneResult{control: true})
				continue
			}
			l.rec = recordOf(r)
			l.rec.state = ps
			mark := 0
			if ps != nil {
				mark = ps.mark()
			}
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
			if err != nil && ps != nil {
				ps.rollbackTo(mark)
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
			if err := w.deadLetter(ctx, sess, r, nil, 0, res.err); err != nil { // the lane undid its state
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
