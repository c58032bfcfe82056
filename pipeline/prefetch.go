package pipeline

import "github.com/twmb/franz-go/pkg/kgo"

// Prefetcher is implemented by a Transform whose state is far larger than
// the CPU's caches, such as a de-duplication gate holding millions of keys:
// each record then costs a memory miss, a few hundred nanoseconds that
// stall processing one record at a time. The worker calls Prefetch with
// the next records of a partition (up to PrefetchAhead of them), before
// Process sees the first of them; Prefetch reads the memory those records
// will need (the hash slot of each one's key, say) in one pass, so that
// the misses overlap and Process then finds the memory in cache.
//
// What can go wrong: Prefetch is a hint. It runs on the worker's
// goroutine, must not change anything Process could observe, and must not
// fail or block; the records it is given may include control records and
// records whose key cannot be computed (skip those), and a record may be
// processed long after (a slow Process evicts what was read early).
type Prefetcher interface {
	Prefetch(records []*kgo.Record)
}

// PrefetchAhead is how many records a Prefetch call covers: enough for the
// misses to overlap, few enough that what they read stays in the CPU's
// caches until Process gets there.
const PrefetchAhead = 128

// eachRecord calls fn for every record of fs in order, as fs.EachRecord
// does, and first has the Transform prefetch each run of PrefetchAhead
// records of a partition if it is a Prefetcher.
func (w *Worker) eachRecord(fs kgo.Fetches, fn func(*kgo.Record)) {
	pf, ok := w.t.(Prefetcher)
	if !ok {
		fs.EachRecord(fn)
		return
	}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for i, r := range p.Records {
			if i%PrefetchAhead == 0 {
				pf.Prefetch(p.Records[i:min(i+PrefetchAhead, len(p.Records))])
			}
			fn(r)
		}
	})
}
