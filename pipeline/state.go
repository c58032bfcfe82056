package pipeline

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/eosctl/eos/internal/txn"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Store is one partition's share of a keyed state store: the state that
// belongs to the partition of the record being processed (Record.Store).
//
// Reads and writes are plain map operations in memory. The worker makes them
// exactly-once: every key changed in a transaction is written once, with its
// final value (or a tombstone), to partition i of the store's changelog topic
// inside that transaction, just before the commit; if the transaction aborts,
// the changes are undone in memory, so the next transaction starts from
// exactly the state the broker has committed. A Store is only valid during
// the Process call that got it, and only on the worker's goroutine.
type Store struct {
	name  string
	part  *partitionState
	m     map[string][]byte
	dirty map[string]struct{} // keys changed in the open transaction
}

// Name returns the store's name.
func (s *Store) Name() string { return s.name }

// Partition returns the partition the store belongs to.
func (s *Store) Partition() int32 { return s.part.partition }

// Owned reports whether the worker still holds the store's partition: it
// turns false for good once the partition is revoked or lost (a later
// assignment of the same partition restores a new Store). A Transform
// that keeps its own view of a Store beyond one Process call (an index, a
// cache) drops that view once Owned is false, or it keeps the revoked
// partition's state in memory. Safe to call from any goroutine.
func (s *Store) Owned() bool { return !s.part.withdrawn.Load() }

// Get returns the value of key. The slice belongs to the store: do not
// modify it; Put a new one instead.
func (s *Store) Get(key string) ([]byte, bool) {
	v, ok := s.m[key]
	return v, ok
}

// Put sets key to value. The store keeps value (it is written to the
// changelog later, at commit), so the caller must not modify it afterwards.
// A nil value is stored as an empty one; use Delete to remove a key.
func (s *Store) Put(key string, value []byte) {
	if value == nil {
		value = []byte{}
	}
	prev, existed := s.m[key]
	s.part.set.record(s, key, prev, existed)
	s.m[key] = value
}

// Delete removes key. The changelog gets a tombstone, so compaction drops
// the key for good.
func (s *Store) Delete(key string) {
	prev, existed := s.m[key]
	if !existed {
		return
	}
	s.part.set.record(s, key, prev, existed)
	delete(s.m, key)
}

// Len returns the number of keys.
func (s *Store) Len() int { return len(s.m) }

// Range calls fn for every key in unspecified order until fn returns false.
// fn may Put or Delete the key it is given, but no other key.
func (s *Store) Range(fn func(key string, value []byte) bool) {
	for k, v := range s.m {
		if !fn(k, v) {
			return
		}
	}
}

// Store returns the partition of the named store that the record belongs
// to. It panics if the Transform did not declare the store, or if the record
// has no state: records of an input topic when state lives on the
// repartition topic.
func (r *Record) Store(name string) *Store {
	if r.state == nil {
		panic(fmt.Sprintf("pipeline: record from %s[%d] has no state: state belongs to the partitions of the state topic only", r.Topic, r.Partition))
	}
	for i, n := range r.state.set.names {
		if n == name {
			return r.state.stores[i]
		}
	}
	panic(fmt.Sprintf("pipeline: store %q is not declared (declared: %v)", name, r.state.set.names))
}

// partitionState is every store's share of one partition.
type partitionState struct {
	set       *stateSet
	partition int32
	stores    []*Store    // parallel to set.names
	touched   bool        // listed in set.touched for the open transaction
	withdrawn atomic.Bool // revoked, lost or reset: see Store.Owned
}

func (set *stateSet) newPartition(p int32) *partitionState {
	ps := &partitionState{set: set, partition: p}
	for _, n := range set.names {
		ps.stores = append(ps.stores, &Store{name: n, part: ps, m: map[string][]byte{}, dirty: map[string]struct{}{}})
	}
	return ps
}

// journalEntry is one change, for undoing it.
type journalEntry struct {
	s       *Store
	key     string
	prev    []byte
	existed bool
}

// stateSet is all of a worker's keyed state: the restored partitions of every
// store, and the open transaction's changes to them.
//
// Two goroutines meet here. The client's group goroutine publishes restored
// partitions and withdraws revoked ones (assign, drop) under mu; the worker's
// goroutine looks partitions up under mu and then owns what it got: the maps,
// the journal and the touched list are only ever used by it. A partition
// withdrawn while the worker still holds it is harmless: the group session
// aborts the open transaction on any revocation, and flush refuses to commit
// a transaction that touched a withdrawn partition anyway.
type stateSet struct {
	names      []string // store names
	changelogs []string // changelog topic of each store
	topic      string   // the topic whose partitions own the state

	mu         sync.Mutex
	current    map[int32]*partitionState
	restoreErr error // a failed restore; the worker reopens its session

	// The worker goroutine's own.
	touched []*partitionState
	journal []journalEntry
	tainted string // why the open transaction must not commit, if it must not
}

func newStateSet(l layout) *stateSet {
	if len(l.stores) == 0 {
		return nil
	}
	return &stateSet{names: l.stores, changelogs: l.changelogs, topic: l.stateTopic, current: map[int32]*partitionState{}}
}

// lookup returns the restored state of partition p for a record about to be
// processed. A partition without restored state can only be one this worker
// no longer owns (revoked while its records were in hand): the record gets
// throwaway state and the open transaction is marked to abort.
func (set *stateSet) lookup(p int32) *partitionState {
	set.mu.Lock()
	ps := set.current[p]
	set.mu.Unlock()
	if ps == nil {
		set.tainted = fmt.Sprintf("processed a record of %s[%d] without its restored state", set.topic, p)
		ps = set.newPartition(p)
		ps.withdrawn.Store(true) // throwaway state, owned by nobody
	}
	return ps
}

func (set *stateSet) record(s *Store, key string, prev []byte, existed bool) {
	set.journal = append(set.journal, journalEntry{s, key, prev, existed})
	s.dirty[key] = struct{}{}
	if ps := s.part; !ps.touched {
		ps.touched = true
		set.touched = append(set.touched, ps)
	}
}

// mark returns a savepoint for rollbackTo.
func (set *stateSet) mark() int { return len(set.journal) }

// rollbackTo undoes every change since mark: a dead-lettered record leaves
// no trace in the state.
func (set *stateSet) rollbackTo(mark int) {
	for i := len(set.journal) - 1; i >= mark; i-- {
		e := set.journal[i]
		if e.existed {
			e.s.m[e.key] = e.prev
		} else {
			delete(e.s.m, e.key)
		}
	}
	clear(set.journal[mark:])
	set.journal = set.journal[:mark]
	// Keys stay dirty: writing their committed value again is harmless.
}

// flush writes every key changed in the open transaction to its changelog,
// with its current value or a tombstone, and returns how many records it
// produced. It reports whether the transaction may commit.
func (set *stateSet) flush(sess *txn.Session) (int, bool) {
	if set.tainted != "" {
		return 0, false
	}
	set.mu.Lock()
	for _, ps := range set.touched {
		if set.current[ps.partition] != ps {
			set.tainted = fmt.Sprintf("state of %s[%d] was withdrawn (partition revoked) during the transaction", set.topic, ps.partition)
		}
	}
	set.mu.Unlock()
	if set.tainted != "" {
		return 0, false
	}
	n := 0
	for _, ps := range set.touched {
		for i, s := range ps.stores {
			for key := range s.dirty {
				r := &kgo.Record{Topic: set.changelogs[i], Partition: ps.partition, Key: []byte(key)}
				if v, ok := s.m[key]; ok {
					r.Value = v
				}
				sess.Produce(r)
				n++
			}
		}
	}
	return n, true
}

// committed forgets the journal after a commit: the changes are now the
// broker's committed state.
func (set *stateSet) committed() {
	for _, ps := range set.touched {
		for _, s := range ps.stores {
			clear(s.dirty)
		}
		ps.touched = false
	}
	clear(set.touched)
	set.touched = set.touched[:0]
	clear(set.journal)
	set.journal = set.journal[:0]
	set.tainted = ""
}

// aborted undoes the open transaction's changes after a known abort, so the
// state is again what the broker has committed, matching the offsets the
// consumer rewinds to.
func (set *stateSet) aborted() {
	set.rollbackTo(0)
	set.committed()
}

// reset discards all state. The worker calls it before it reopens its
// session after an unknown outcome: it cannot know whether the last
// transaction's changes committed, so the next assignment restores
// everything from the changelog.
func (set *stateSet) reset() {
	set.mu.Lock()
	for _, ps := range set.current {
		ps.withdrawn.Store(true)
	}
	set.current = map[int32]*partitionState{}
	set.restoreErr = nil
	set.mu.Unlock()
	set.committed()
}

// drop withdraws revoked or lost partitions.
func (set *stateSet) drop(ps []int32) {
	set.mu.Lock()
	defer set.mu.Unlock()
	for _, p := range ps {
		if st := set.current[p]; st != nil {
			st.withdrawn.Store(true)
		}
		delete(set.current, p)
	}
}

// publish makes restored partitions available to the worker.
func (set *stateSet) publish(parts map[int32]*partitionState) {
	set.mu.Lock()
	defer set.mu.Unlock()
	for p, ps := range parts {
		set.current[p] = ps
	}
}

// failed returns a restore failure, if one happened since the last reset.
func (set *stateSet) failed() error {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.restoreErr
}

func (set *stateSet) fail(err error) {
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.restoreErr == nil {
		set.restoreErr = err
	}
}

// snapshot copies the state of store name in parts, by partition, for tests
// and diagnostics. Only the worker's goroutine may call it on published
// partitions, since only it changes them.
func (set *stateSet) snapshot(name string, parts map[int32]*partitionState) map[int32]map[string]string {
	i := slices.Index(set.names, name)
	out := map[int32]map[string]string{}
	for p, ps := range parts {
		m := make(map[string]string, len(ps.stores[i].m))
		for k, v := range ps.stores[i].m {
			m[k] = string(v)
		}
		out[p] = m
	}
	return out
}

// published returns a copy of the published partitions.
func (set *stateSet) published() map[int32]*partitionState {
	set.mu.Lock()
	defer set.mu.Unlock()
	out := make(map[int32]*partitionState, len(set.current))
	for p, ps := range set.current {
		out[p] = ps
	}
	return out
}

// changelogPartitioner sends changelog records to the partition they name
// (partition i of the changelog is the state of partition i of the state
// topic) and every other record where kgo's default partitioner would.
type changelogPartitioner struct {
	changelogs map[string]bool
	manual     kgo.Partitioner
	def        kgo.Partitioner
}

func newChangelogPartitioner(changelogs []string) kgo.Partitioner {
	p := changelogPartitioner{changelogs: map[string]bool{}, manual: kgo.ManualPartitioner(),
		def: kgo.UniformBytesPartitioner(64<<10, true, true, nil)} // kgo's default
	for _, c := range changelogs {
		p.changelogs[c] = true
	}
	return p
}

func (p changelogPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	if p.changelogs[t] {
		return p.manual.ForTopic(t)
	}
	return p.def.ForTopic(t)
}
