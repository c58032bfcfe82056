package topologies

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"time"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/pipeline"
)

// Gate is exactly-once de-duplication by key, as a building block for a
// pipeline.Transform: Admit lets each key through once per state partition
// within a retention window, and reports every later sighting as a repeat.
// The dedup topology is a Gate behind a YAML configuration; a custom
// Transform uses one directly (see ExampleGate).
//
// The keys seen are changelogged through a keyed store of the Transform
// (it declares the store, Gate.Store, in its pipeline.Declaration), in the
// same transaction as the Transform's output, and restored on every
// assignment: a record that passed in a committed transaction is never
// passed again, whatever crashes in between, and a record of an aborted
// transaction is judged again, from the same state, when it is processed
// again. Membership is exact: every key is compared byte for byte.
//
// Memory and changelog. The keys are not one store entry each: the Gate
// keeps them in a compact table of its own (a pointer-free hash index over
// byte batches of keys with their expiries, about 30 to 40 bytes a key of
// ten bytes), and writes each transaction's new keys to the store as a few
// batch entries (up to 256 KiB each) when Flush runs, so the changelog
// gets a record per batch, not per key. A restore reads the batches back
// and indexes their keys.
//
// Retention. Each partition has a clock: the largest time Admit was given
// for it (with event time, the partition's stream time; with processing
// time, the wall clock). A key that passes is held until that clock has
// moved retention past the moment it passed; then it is forgotten and a
// later record with that key passes again. A batch is deleted from the
// store (so its changelog gets a tombstone and compaction drops it) once
// all its keys are forgotten; a batch spans at most a 64th of the
// retention, so memory and changelog size are bounded by the keys that
// passed within 65/64 of one retention.
//
// What can go wrong. Membership is per partition: two records with one key
// in different partitions are both let through, so the records of one key
// must reach one partition (key the input by it, or repartition by it as
// the dedup topology's repartition: true does). A Transform using a Gate
// must call Flush from its pipeline.Flusher's Flush (without it the keys
// of a transaction are never changelogged, and a restore forgets them) and
// Discard from its Discard, which the worker calls whenever a transaction
// will not commit: the store is rolled back then, and the Gate rebuilds its
// table from the store. Call Admit last for a record, after whatever may
// dead-letter it: a dead letter rolls back the record's changes to the
// store, but not the Gate's table, so a key admitted for a dead-lettered
// record would be held (and changelogged) without its record having
// passed. A partition revoked from the worker (its store no longer
// pipeline.Store.Owned) is forgotten at the next Flush or Discard: its table
// goes, and Held no longer counts it.
type Gate struct {
	store     string
	retention int64 // ms
	slack     int64 // ms of expiry one batch may span
	seed      maphash.Seed
	parts     map[int32]*gatePart
	last      *gatePart   // the part of the previous Admit
	touched   []*gatePart // parts admitted to in the open transaction
	ahead     []*uint64   // slots prefetch noted, for prefetchRead
	sink      uint64      // what prefetchRead read, kept so that it is read
}

// gatePart is a Gate's view of one partition of its store.
type gatePart struct {
	partition  int32
	st         *pipeline.Store // the store the table was built from
	streamTime int64           // ms; math.MinInt64 before the first record
	clockMoved bool            // since the last Flush
	tab        *keyTable
	open       uint32   // the batch new keys go to, if pending is not empty
	pending    []uint32 // batches of the open transaction, oldest first
	queue      []uint32 // written batches by expiry, oldest first, from head
	head       int
	seq        uint64 // sequence number of the next batch written
	touched    bool   // in Gate.touched
	stale      bool   // discarded: rebuilt from st when next used
}

// clockKey is the store key of a partition's clock; batches are stored
// under batchPrefix and an 8-byte sequence number.
const (
	clockKey    = ""
	batchPrefix = 'b'
)

// NewGate returns a Gate keeping its keys in the store named store and
// forgetting each retention after it passed. Errors are *eos.ConfigError.
func NewGate(store string, retention time.Duration) (*Gate, error) {
	if store == "" {
		return nil, eos.BadConfig("topologies.Gate.store", "a store name is required")
	}
	if retention < time.Millisecond {
		return nil, eos.BadConfig("topologies.Gate.retention", "want at least 1ms, got %s", retention)
	}
	r := retention.Milliseconds()
	return &Gate{store: store, retention: r, slack: max(r/64, 1), seed: maphash.MakeSeed(), parts: map[int32]*gatePart{}}, nil
}

// Store is the name of the store the Gate keeps its keys in; declare it in
// the Transform's pipeline.Declaration.Stores.
func (g *Gate) Store() string { return g.store }

// ErrEmptyKey is the cause of the dead letter Admit returns for an empty
// key: no key, no way to tell a repeat.
var ErrEmptyKey = errors.New("the de-duplication key is empty")

// Admit reports whether key passes: true the first time the record's
// partition sees it within the retention, false for a repeat. at is the
// record's time (its event time, or time.Now() for processing time); the
// partition's clock moves to it if it is later. An empty key is a
// pipeline.DeadLetter ("dedup-key") wrapping ErrEmptyKey: return it from
// Process. Call Admit only from Process, on the worker's goroutine.
func (g *Gate) Admit(in *pipeline.Record, key string, at time.Time) (bool, error) {
	return g.admit(in, []byte(key), at.UnixMilli())
}

// admit is Admit with the key as bytes (not kept) and the time in Unix ms.
func (g *Gate) admit(in *pipeline.Record, key []byte, ts int64) (bool, error) {
	if len(key) == 0 {
		return false, pipeline.DeadLetter("dedup-key", ErrEmptyKey)
	}
	p := g.last
	if p == nil || p.partition != in.Partition || p.stale {
		p = nil
	}
	st := in.Store(g.store)
	if p == nil || p.st != st {
		var err error
		if p, err = g.part(in.Partition, st); err != nil {
			return false, err
		}
		g.last = p
	}
	if ts > p.streamTime {
		p.streamTime, p.clockMoved = ts, true
		p.expire()
		g.touch(p) // a repeat moves the clock too: Flush must write it
	}
	h := p.tab.hash(key)
	slot, found := p.tab.probe(key, h)
	if found && p.tab.expiryAt(slot) > p.streamTime {
		return false, nil
	}
	expiry := p.streamTime + g.retention
	if p.streamTime > math.MaxInt64-g.retention {
		expiry = math.MaxInt64
	}
	if len(p.pending) == 0 || !p.tab.fits(p.open, len(key), expiry) || expiry-p.tab.batches[p.open].base > g.slack {
		b, err := p.tab.newBatch(expiry)
		if err != nil {
			return false, err
		}
		p.open, p.pending = b, append(p.pending, b)
	}
	p.tab.addAt(slot, found, p.open, key, h, expiry)
	g.touch(p)
	return true, nil
}

// touch lists p for the next Flush.
func (g *Gate) touch(p *gatePart) {
	if !p.touched {
		p.touched = true
		g.touched = append(g.touched, p)
	}
}

// prefetch notes the home slot of key in the table of partition p, if the
// Gate has one, for prefetchRead to read (see pipeline.Prefetcher).
func (g *Gate) prefetch(p int32, key []byte) {
	gp := g.last
	if gp == nil || gp.partition != p {
		if gp = g.parts[p]; gp == nil {
			return
		}
		g.last = gp
	}
	if !gp.stale && len(key) > 0 {
		t := gp.tab
		mask := uint64(len(t.slots) - 1)
		i := t.hash(key) & mask
		g.ahead = append(g.ahead, &t.slots[i])
		if i&7 >= 5 { // the probe is likely to go on into the next 64 bytes
			g.ahead = append(g.ahead, &t.slots[(i|7+1)&mask])
		}
	}
}

// prefetchRead reads the slots prefetch noted, so that the Admits of their
// keys soon after find them in cache. The reads are a loop of their own,
// apart from the hashing, so that dozens of them are in flight at once
// (a read interleaved with a hash and a header search had about two).
func (g *Gate) prefetchRead() {
	var s uint64
	for _, p := range g.ahead {
		s += *p
	}
	g.sink += s
	clear(g.ahead) // no table kept alive by a note
	g.ahead = g.ahead[:0]
}

// Flush writes the keys admitted in the open transaction, and each
// partition's clock, to the store, where the worker changelogs them in the
// transaction about to commit. Call it from the Transform's
// pipeline.Flusher Flush, on the worker's goroutine.
func (g *Gate) Flush() {
	for _, p := range g.touched {
		p.touched = false
		if p.stale {
			continue // discarded since: the store is the truth
		}
		if p.clockMoved {
			p.st.Put(clockKey, binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(p.streamTime)))
			p.clockMoved = false
		}
		for _, b := range p.pending {
			bt := &p.tab.batches[b]
			if bt.maxExp <= p.streamTime {
				p.tab.drop(b) // forgotten before it was written
				continue
			}
			if cap(bt.data)-len(bt.data) > len(bt.data)/8 {
				bt.data = bytes.Clone(bt.data) // the store keeps it: no slack
			}
			bt.name = batchName(p.seq)
			p.seq++
			p.st.Put(bt.name, bt.data)
			p.queue = append(p.queue, b)
		}
		p.pending = p.pending[:0]
	}
	clear(g.touched)
	g.touched = g.touched[:0]
	g.forgetRevoked()
}

// batchName is the store key of the batch with sequence number seq.
func batchName(seq uint64) string {
	return string(binary.BigEndian.AppendUint64([]byte{batchPrefix}, seq))
}

// Held returns the number of keys the Gate holds across the partitions it
// has seen records of and still holds. Call it on the worker's goroutine
// (from Process or Flush). A partition revoked from the worker counts
// until the next Flush or Discard. A key whose retention ended counts until
// its batch is forgotten: at most a 64th of the retention later.
func (g *Gate) Held() int {
	n := 0
	for i, p := range g.parts {
		if p.stale {
			// Rolled back since: the store is the truth.
			var err error
			if p, err = g.part(i, p.st); err != nil {
				continue
			}
		}
		n += p.tab.live
	}
	return n
}

// Discard forgets the Gate's tables: the store was rolled back (a
// transaction aborted) or replaced (a restore), and each partition's table
// is rebuilt from its store when Admit next sees it. Call it from the
// Transform's pipeline.Flusher Discard.
func (g *Gate) Discard() {
	for _, p := range g.parts {
		p.stale = true
	}
	for _, p := range g.touched {
		p.touched = false
	}
	clear(g.touched)
	g.touched = g.touched[:0]
	g.last = nil
	g.forgetRevoked()
}

// forgetRevoked drops the view of every partition whose store the worker
// no longer holds (revoked or lost; a later assignment restores a new
// store, which part rebuilds from), so that a worker that gave partitions
// away to another instance frees their keys' memory. A partition the open
// transaction touched stays until that transaction ends: Flush still
// writes to its store, which the worker then refuses to commit.
func (g *Gate) forgetRevoked() {
	for p, gp := range g.parts {
		if !gp.touched && !gp.st.Owned() {
			delete(g.parts, p)
			if g.last == gp {
				g.last = nil
			}
		}
	}
}

// part returns the Gate's view of partition p, rebuilt from st if it was
// built from another store (a restore after an assignment) or discarded.
func (g *Gate) part(p int32, st *pipeline.Store) (*gatePart, error) {
	if gp := g.parts[p]; gp != nil && gp.st == st && !gp.stale {
		return gp, nil
	}
	gp := &gatePart{partition: p, st: st, streamTime: math.MinInt64, tab: newKeyTable(g.seed)}
	var err error
	st.Range(func(k string, v []byte) bool {
		switch {
		case k == clockKey && len(v) == 8:
			gp.streamTime = int64(binary.BigEndian.Uint64(v))
		case len(k) == 9 && k[0] == batchPrefix:
			var b uint32
			var ok bool
			if b, ok, err = gp.tab.load(k, v); err != nil {
				return false
			} else if ok {
				gp.queue = append(gp.queue, b)
				gp.seq = max(gp.seq, binary.BigEndian.Uint64([]byte(k[1:]))+1)
			}
		}
		return true // anything else is not the Gate's; left alone
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(gp.queue, func(a, b uint32) int { return cmp.Compare(gp.tab.batches[a].maxExp, gp.tab.batches[b].maxExp) })
	g.parts[p] = gp
	return gp, nil
}

// expire forgets every written batch whose keys have all expired by the
// partition's clock, and deletes it from the store.
func (p *gatePart) expire() {
	for p.head < len(p.queue) && p.tab.batches[p.queue[p.head]].maxExp <= p.streamTime {
		b := p.queue[p.head]
		p.queue[p.head] = 0
		p.head++
		p.st.Delete(p.tab.batches[b].name)
		p.tab.drop(b)
	}
	// Reclaim the consumed front once it is most of the slice.
	if p.head > 1024 && p.head*2 > len(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		p.queue, p.head = p.queue[:n], 0
	}
}

// footprint is the memory the Gate's tables take, in bytes (benchmarks
// report it per key).
func (g *Gate) footprint() int64 {
	var n int64
	for _, p := range g.parts {
		n += p.tab.footprint() + int64(cap(p.queue)+cap(p.pending))*4
	}
	return n
}

// String describes the Gate, for logs.
func (g *Gate) String() string {
	return fmt.Sprintf("dedup gate (store %s, retention %s)", g.store, time.Duration(g.retention)*time.Millisecond)
}
