package topologies

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
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
// The keys seen live in a keyed store of the Transform (it declares the
// store, Gate.Store, in its pipeline.Declaration), so they are changelogged
// in the same transaction as the Transform's output and restored on every
// assignment: a record that passed in a committed transaction is never
// passed again, whatever crashes in between, and a record of an aborted
// transaction is judged again, from the same state, when it is processed
// again.
//
// Retention. Each partition has a clock: the largest time Admit was given
// for it (with event time, the partition's stream time; with processing
// time, the wall clock). A key that passes is held until that clock has
// moved retention past the moment it passed; then it is forgotten (deleted
// from the store, so its changelog gets a tombstone and compaction drops
// it) and a later record with that key passes again. Held keys are kept in
// a queue ordered by expiry, so forgetting costs O(1) per expired key, not
// a scan of the store; memory and changelog size are bounded by the keys
// that passed within one retention.
//
// What can go wrong. Membership is per partition: two records with one key
// in different partitions are both let through, so the records of one key
// must reach one partition (key the input by it, or repartition by it as
// the dedup topology's repartition: true does). A Transform using a Gate
// must call Discard from its pipeline.Flusher's Discard, which the worker
// calls whenever a transaction will not commit: the store is rolled back
// then, and the Gate rebuilds its expiry queue from the store. Call Admit
// last for a record, after whatever may dead-letter it: a dead letter rolls
// back the record's changes to the store, and a key Admit expired for it
// would come back with no place in the queue (held until the next Discard
// or restore instead of expiring).
type Gate struct {
	store     string
	retention int64 // ms
	parts     map[int32]*gatePart
}

// gatePart is a Gate's view of one partition of its store.
type gatePart struct {
	st         *pipeline.Store // the store the queue was built from
	streamTime int64           // ms; math.MinInt64 before the first record
	queue      []gateEntry     // held keys by expiry, oldest first, from head
	head       int
	held       int  // keys in the store (without the clock's own key)
	stale      bool // discarded: rebuilt from st when next used
}

type gateEntry struct {
	expiry int64 // ms
	key    string
}

// clockKey is the store key of a partition's clock. No record key can be
// empty (Admit refuses one), so it cannot collide with a held key.
const clockKey = ""

// NewGate returns a Gate keeping its keys in the store named store and
// forgetting each retention after it passed. Errors are *eos.ConfigError.
func NewGate(store string, retention time.Duration) (*Gate, error) {
	if store == "" {
		return nil, eos.BadConfig("topologies.Gate.store", "a store name is required")
	}
	if retention < time.Millisecond {
		return nil, eos.BadConfig("topologies.Gate.retention", "want at least 1ms, got %s", retention)
	}
	return &Gate{store: store, retention: retention.Milliseconds(), parts: map[int32]*gatePart{}}, nil
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
	if key == "" {
		return false, pipeline.DeadLetter("dedup-key", ErrEmptyKey)
	}
	st := in.Store(g.store)
	p := g.part(in.Partition, st)
	if ts := at.UnixMilli(); ts > p.streamTime {
		p.streamTime = ts
		st.Put(clockKey, binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(ts)))
		p.expire()
	}
	if _, seen := st.Get(key); seen {
		return false, nil
	}
	expiry := p.streamTime + g.retention
	if p.streamTime > math.MaxInt64-g.retention {
		expiry = math.MaxInt64
	}
	st.Put(key, binary.BigEndian.AppendUint64(make([]byte, 0, 8), uint64(expiry)))
	p.queue = append(p.queue, gateEntry{expiry, key})
	p.held++
	return true, nil
}

// Held returns the number of keys the Gate holds across the partitions it
// has seen records of. Call it on the worker's goroutine (from Process or
// Flush). A partition revoked from the worker still counts until the Gate
// sees a record of it again (and so a new store).
func (g *Gate) Held() int {
	n := 0
	for _, p := range g.parts {
		if p.stale {
			// Rolled back since: the store is the truth.
			_, clock := p.st.Get(clockKey)
			n += p.st.Len()
			if clock {
				n--
			}
			continue
		}
		n += p.held
	}
	return n
}

// Discard forgets the Gate's expiry queues: the store was rolled back (a
// transaction aborted) or replaced (a restore), and each partition's queue
// is rebuilt from its store when Admit next sees it. Call it from the
// Transform's pipeline.Flusher Discard.
func (g *Gate) Discard() {
	for _, p := range g.parts {
		p.stale = true
	}
}

// part returns the Gate's view of partition p, rebuilt from st if it was
// built from another store (a restore after an assignment) or discarded.
func (g *Gate) part(p int32, st *pipeline.Store) *gatePart {
	if gp := g.parts[p]; gp != nil && gp.st == st && !gp.stale {
		return gp
	}
	gp := &gatePart{st: st, streamTime: math.MinInt64}
	st.Range(func(k string, v []byte) bool {
		if len(v) != 8 {
			return true // not the Gate's; left alone
		}
		t := int64(binary.BigEndian.Uint64(v))
		if k == clockKey {
			gp.streamTime = t
			return true
		}
		gp.queue = append(gp.queue, gateEntry{t, k})
		return true
	})
	slices.SortFunc(gp.queue, func(a, b gateEntry) int { return cmp.Compare(a.expiry, b.expiry) })
	gp.held = len(gp.queue)
	g.parts[p] = gp
	return gp
}

// expire forgets every key whose expiry the partition's clock has reached.
// A queue entry whose key is gone or holds another expiry (rolled back and
// admitted again) is skipped: the store is the truth.
func (p *gatePart) expire() {
	for p.head < len(p.queue) && p.queue[p.head].expiry <= p.streamTime {
		e := p.queue[p.head]
		p.queue[p.head] = gateEntry{}
		p.head++
		if v, ok := p.st.Get(e.key); ok && len(v) == 8 && int64(binary.BigEndian.Uint64(v)) == e.expiry {
			p.st.Delete(e.key)
			p.held--
		}
	}
	// Reclaim the consumed front once it is most of the slice.
	if p.head > 1024 && p.head*2 > len(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
}

// String describes the Gate, for logs.
func (g *Gate) String() string {
	return fmt.Sprintf("dedup gate (store %s, retention %s)", g.store, time.Duration(g.retention)*time.Millisecond)
}
