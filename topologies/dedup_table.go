package topologies

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"unsafe"
)

// keyTable is the set of keys one partition of a Gate holds, each with its
// expiry: an exact membership index built to hold tens of millions of keys
// in little memory, without giving the garbage collector anything to scan.
//
// The keys live in batches: byte slices of an 8-byte base expiry (Unix ms)
// then entries (uvarint key length, key, 4-byte expiry as milliseconds
// after the base), appended in
// the order the keys passed. A batch is also the unit of the changelog: the
// Gate writes each one as a single store value (key 'b' + sequence
// number) when its transaction commits, and deletes it (a tombstone) once
// every key in it has expired. So the changelog gets one record per batch
// instead of one per key, and restore reads the batches back as they are.
//
// The index is open addressing with linear probing over a []uint64: each
// slot holds 16 bits of the key's hash (a fingerprint, to skip most
// comparisons with other keys), a batch number and the entry's offset in
// the batch. The slots and the batches' bytes hold no pointers; the
// batches' slice headers, a few thousand at most, are the only things the
// collector looks at.
type keyTable struct {
	seed    maphash.Seed
	weak    uint64 // all ones; tests keep a few bits to make keys collide
	slots   []uint64
	live    int // slots holding an entry
	used    int // live + deleted markers
	batches []keyBatch
	free    []uint32 // batch numbers to reuse
	// regionBits overrides resizeRegionBits (tests make it small, so that
	// small tables take the region by region path of resize).
	regionBits uint
}

// keyBatch is one batch of entries.
type keyBatch struct {
	data   []byte // the base, then the entries (batchHeader bytes in)
	base   int64  // expiry of entries is base + their 4-byte delta, ms
	maxExp int64  // the latest expiry in the batch
	name   string // store key once written, "" before
	inUse  bool
	n      int // entries
}

const (
	slotEmpty   = 0
	slotDeleted = 1 // never a real slot: a real one has the fingerprint's top bit set

	offsetBits = 18 // entries start below 256 KiB into their batch
	batchBits  = 30
	// maxBatchBytes is where a batch is closed: entries start below it,
	// and a changelog record of one batch stays well under Kafka's default
	// 1 MiB limit (message.max.bytes) unless a key is huge.
	maxBatchBytes = 1 << offsetBits
	maxBatches    = 1 << batchBits

	batchHeader = 8 // the base expiry
)

// errTooManyBatches is returned when a partition would hold more batches
// than a slot can number: about a billion transactions' worth within one
// retention, far past what fits in memory anyway.
var errTooManyBatches = errors.New("the dedup gate holds too many batches of keys in one partition (over 2^30 transactions within one retention)")

func newKeyTable(seed maphash.Seed) *keyTable {
	return &keyTable{seed: seed, weak: ^uint64(0), slots: make([]uint64, 1024)}
}

// hash is the hash of key the table indexes it by.
func (t *keyTable) hash(key []byte) uint64 { return maphash.Bytes(t.seed, key) & t.weak }

func slotOf(fp uint64, batch uint32, off int) uint64 {
	return fp<<(offsetBits+batchBits) | uint64(batch)<<offsetBits | uint64(off)
}

func (s uint64Slot) batch() uint32 { return uint32(uint64(s) >> offsetBits & (maxBatches - 1)) }
func (s uint64Slot) off() int      { return int(uint64(s) & (maxBatchBytes - 1)) }

type uint64Slot uint64

// fingerprint is the slot's top 16 bits for hash h; its top bit is set so
// that no slot is ever empty or a deletion marker.
func fingerprint(h uint64) uint64 { return h>>48 | 0x8000 }

// entry decodes the entry at off in b: its key and expiry.
func (b *keyBatch) entry(off int) (key []byte, expiry int64, next int) {
	n, w := binary.Uvarint(b.data[off:])
	k := off + w
	e := k + int(n)
	return b.data[k:e], b.base + int64(binary.BigEndian.Uint32(b.data[e:])), e + 4
}

// probe returns the index of the slot holding key, and true; or, if the
// table does not hold it, the index of the slot an insertion would take
// (the first deletion marker on its path, or the empty slot ending it),
// and false.
func (t *keyTable) probe(key []byte, h uint64) (int, bool) {
	mask := uint64(len(t.slots) - 1)
	fp := fingerprint(h)
	free := -1
	for i := h & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		switch {
		case s == slotEmpty:
			if free < 0 {
				free = int(i)
			}
			return free, false
		case s == slotDeleted:
			if free < 0 {
				free = int(i)
			}
		case s>>(offsetBits+batchBits) == fp:
			sl := uint64Slot(s)
			if k, _, _ := t.batches[sl.batch()].entry(sl.off()); bytes.Equal(k, key) {
				return int(i), true
			}
		}
	}
}

// find returns the slot index holding key, or -1.
func (t *keyTable) find(key []byte, h uint64) int {
	if i, ok := t.probe(key, h); ok {
		return i
	}
	return -1
}

// expiryAt is the expiry of the entry slot i points at.
func (t *keyTable) expiryAt(i int) int64 {
	sl := uint64Slot(t.slots[i])
	_, e, _ := t.batches[sl.batch()].entry(sl.off())
	return e
}

// lookup returns the expiry of key, if the table holds it.
func (t *keyTable) lookup(key []byte, h uint64) (int64, bool) {
	i, ok := t.probe(key, h)
	if !ok {
		return 0, false
	}
	return t.expiryAt(i), true
}

// set points key's slot at the entry at off in batch b, replacing an older
// entry of the same key if there is one (its bytes stay in their batch,
// unreferenced, until that batch expires).
func (t *keyTable) set(key []byte, h uint64, b uint32, off int) {
	i, found := t.probe(key, h)
	t.setAt(i, found, key, h, b, off)
}

// setAt is set with the result of probe for the key: i and found.
func (t *keyTable) setAt(i int, found bool, key []byte, h uint64, b uint32, off int) {
	if !found && t.slots[i] == slotEmpty && (t.used+1)*4 > len(t.slots)*3 {
		// The entry may be in its batch already, and so in the new
		// table: probe again.
		t.resize()
		i, found = t.probe(key, h)
	}
	if found {
		t.slots[i] = slotOf(fingerprint(h), b, off)
		return
	}
	if t.slots[i] == slotEmpty {
		t.used++
	}
	t.slots[i] = slotOf(fingerprint(h), b, off)
	t.live++
}

// remove deletes key's slot if it points at the entry at off in batch b.
func (t *keyTable) remove(key []byte, h uint64, b uint32, off int) bool {
	i := t.find(key, h)
	if i < 0 {
		return false
	}
	if sl := uint64Slot(t.slots[i]); sl.batch() != b || sl.off() != off {
		return false // the key passed again since: a later entry holds it
	}
	t.slots[i] = slotDeleted
	t.live--
	return true
}

// resize rebuilds the index from the batches into a table at most half
// full, which also drops the deletion markers. It reads the batches in
// order, never the old slots: rehashing from the old slots would read
// every key at random as well. A key in two batches (it expired and passed
// again) keeps its later entry, as load does; every other entry of a batch
// in use is live (entries leave only with their whole batch, drop).
//
// A table larger than the CPU's caches is filled region by region (see
// fill): inserting the entries in batch order would make every one a
// cache miss, which was most of what a growing table cost. A table of
// quadGrowthFrom to quadGrowthTo/4 slots that must grow grows fourfold.
func (t *keyTable) resize() {
	// Room for every entry of every batch, not only the live keys: a
	// batch being loaded holds entries not indexed yet, and the table
	// must never fill (probe ends at an empty slot).
	entries := 0
	for b := range t.batches {
		if t.batches[b].inUse {
			entries += t.batches[b].n
		}
	}
	n := 1024
	for n < max(t.live, entries)*2+2 {
		n *= 2
	}
	if n > len(t.slots) && len(t.slots) >= quadGrowthFrom && len(t.slots)*4 <= quadGrowthTo {
		n = max(n, len(t.slots)*4)
	}
	old := t.slots // garbage once the new table is built from the batches
	t.slots = make([]uint64, n)
	t.live, t.used = 0, 0
	regionBits := t.regionBits
	if regionBits == 0 {
		regionBits = resizeRegionBits
	}
	if n>>regionBits < 2 || n > math.MaxUint32 { // small, or homes beyond fill's uint32
		t.each(func(b uint32, off int, h uint64) { t.insert(slotOf(fingerprint(h), b, off), h) })
		return
	}
	t.fill(entries, regionBits, old)
}

// quadGrowthFrom and quadGrowthTo bound the table sizes, in slots, at
// which a table that grows grows fourfold instead of twofold: from 2^16
// slots, through 2^18 and 2^20, up to 2^22 (32 MiB); then it doubles again.
// Every growth re-inserts every entry (hashing its key again), and growth
// was a third of the dedup gate's own CPU a record while a table filled:
// a table that doubles re-inserts between 1 and 2 entries for each key it
// ends with. Through these sizes the steps are fourfold, and the
// 1,670,000 keys of each of 6 partitions holding 10,000,000 take
// 1,000,000 re-inserts instead of 3,100,000 (the 2^17, 2^19 and 2^21
// tables are never built).
//
// What it costs is index memory at unlucky key counts: a table whose keys
// stop just after a fourfold step is under a fifth full instead of under
// two fifths, so it has up to twice the slots a twofold step would give
// it. The cap bounds that at 16 MiB a partition (2^22 slots instead of
// 2^21, for 786,000 to 1,570,000 keys; 8 bytes a slot); a larger table
// doubles as before and ends at the size doubling gives, so a partition
// of tens of millions of keys pays no extra memory. Below 2^16 slots
// (512 KiB) a table is in the caches and growth is cheap, so small tables
// double too. (A resize without growth, which clears deletion markers,
// may leave a table at an odd power of two; it then steps from there.)
const (
	quadGrowthFrom = 1 << 16
	quadGrowthTo   = 1 << 22
)

// resizeRegionBits sizes the regions fill inserts into one at a time:
// 2^14 slots, 128 KiB, well inside a core's L2 cache.
const resizeRegionBits = 14

// fill inserts the entries of every batch in use into the empty table,
// one region of 2^regionBits slots after the other: it sorts the entries
// by the region of their home slot (a counting sort over the batches, in
// order, hashing each key once) into a scratch of 12 bytes an entry, then
// inserts each region's entries, in batch order, while that region is in
// cache. The order of insertion within a key's entries (all in one
// region) is the batch order, as in a direct insertion, so the same entry
// wins. The hashes, 8 bytes an entry, go into spare (the old table's
// slots, read no more) when it has room.
func (t *keyTable) fill(entries int, regionBits uint, spare []uint64) {
	mask := uint64(len(t.slots) - 1)
	start := make([]int, len(t.slots)>>regionBits+1)
	hs := spare[:0]
	if cap(hs) < entries {
		hs = make([]uint64, 0, entries)
	}
	t.each(func(_ uint32, _ int, h uint64) {
		hs = append(hs, h)
		start[(h&mask)>>regionBits+1]++
	})
	for r := 1; r < len(start); r++ {
		start[r] += start[r-1]
	}
	homes := make([]uint32, len(hs))
	vals := make([]uint64, len(hs))
	next := start[:len(start)-1]
	j := 0
	for b := range t.batches {
		bt := &t.batches[b]
		if !bt.inUse {
			continue
		}
		for off := batchHeader; off < len(bt.data); j++ {
			h := hs[j]
			r := (h & mask) >> regionBits
			homes[next[r]], vals[next[r]] = uint32(h&mask), slotOf(fingerprint(h), uint32(b), off)
			next[r]++
			_, _, off = bt.entry(off)
		}
	}
	for j := range homes {
		t.insertAt(vals[j], uint64(homes[j]))
	}
}

// each calls fn for every entry of every batch in use, in order, with the
// entry's hash.
func (t *keyTable) each(fn func(b uint32, off int, h uint64)) {
	for b := range t.batches {
		bt := &t.batches[b]
		if !bt.inUse {
			continue
		}
		for off := batchHeader; off < len(bt.data); {
			k, _, next := bt.entry(off)
			fn(uint32(b), off, t.hash(k))
			off = next
		}
	}
}

// insert indexes the entry of slot value s, whose key hashes to h, during
// a resize (see insertAt).
func (t *keyTable) insert(s uint64, h uint64) { t.insertAt(s, h&uint64(len(t.slots)-1)) }

// insertAt indexes the entry of slot value s, probing from home: in the
// first empty slot, or in place of the same key's entry if that expires
// earlier. The table has no deletion markers (resize builds it afresh).
func (t *keyTable) insertAt(s uint64, home uint64) {
	mask := uint64(len(t.slots) - 1)
	fp := s >> (offsetBits + batchBits)
	for i := home; ; i = (i + 1) & mask {
		cur := t.slots[i]
		if cur == slotEmpty {
			t.slots[i] = s
			t.live++
			t.used++
			return
		}
		if cur>>(offsetBits+batchBits) != fp {
			continue
		}
		c, n := uint64Slot(cur), uint64Slot(s)
		ck, ce, _ := t.batches[c.batch()].entry(c.off())
		nk, ne, _ := t.batches[n.batch()].entry(n.off())
		if bytes.Equal(ck, nk) {
			if ce < ne {
				t.slots[i] = s
			}
			return
		}
	}
}

// touch reads the home slot of hash h, so that the memory system starts
// fetching it; it returns the slot for the caller to keep (a read whose
// result is unused may be left out).
func (t *keyTable) touch(h uint64) uint64 { return t.slots[h&uint64(len(t.slots)-1)] }

// newBatch returns the number of a fresh batch whose entries expire from
// base on.
func (t *keyTable) newBatch(base int64) (uint32, error) {
	var b uint32
	if n := len(t.free); n > 0 {
		b, t.free = t.free[n-1], t.free[:n-1]
	} else {
		if len(t.batches) >= maxBatches {
			return 0, errTooManyBatches
		}
		b = uint32(len(t.batches))
		t.batches = append(t.batches, keyBatch{})
	}
	t.batches[b] = keyBatch{data: binary.BigEndian.AppendUint64(make([]byte, 0, 256), uint64(base)), base: base, maxExp: math.MinInt64, inUse: true}
	return b, nil
}

// fits reports whether an entry of a key of n bytes expiring at expiry
// may go into batch b.
func (t *keyTable) fits(b uint32, n int, expiry int64) bool {
	bt := &t.batches[b]
	d := expiry - bt.base
	return d >= 0 && d <= math.MaxUint32 && (len(bt.data) == batchHeader || len(bt.data)+n+binary.MaxVarintLen64+4 <= maxBatchBytes)
}

// add appends key's entry to batch b (which fits it) and indexes it.
func (t *keyTable) add(b uint32, key []byte, h uint64, expiry int64) {
	i, found := t.probe(key, h)
	t.addAt(i, found, b, key, h, expiry)
}

// addAt is add with the result of probe for the key: i and found.
func (t *keyTable) addAt(i int, found bool, b uint32, key []byte, h uint64, expiry int64) {
	bt := &t.batches[b]
	off := len(bt.data)
	bt.data = binary.AppendUvarint(bt.data, uint64(len(key)))
	bt.data = append(bt.data, key...)
	bt.data = binary.BigEndian.AppendUint32(bt.data, uint32(expiry-bt.base))
	bt.maxExp = max(bt.maxExp, expiry)
	bt.n++
	t.setAt(i, found, key, h, b, off)
}

// drop removes batch b's entries from the index and frees its number.
func (t *keyTable) drop(b uint32) {
	bt := &t.batches[b]
	for off := batchHeader; off < len(bt.data); {
		k, _, next := bt.entry(off)
		t.remove(k, t.hash(k), b, off)
		off = next
	}
	t.batches[b] = keyBatch{}
	t.free = append(t.free, b)
}

// load indexes a batch read back from the store, keeping for each key the
// entry that expires last. It reports false if data is not a batch.
func (t *keyTable) load(name string, data []byte) (uint32, bool, error) {
	if len(data) < batchHeader {
		return 0, false, nil
	}
	// Validate before indexing anything.
	entries := 0
	for off := batchHeader; off < len(data); entries++ {
		n, w := binary.Uvarint(data[off:])
		if off >= maxBatchBytes || w <= 0 || uint64(len(data)-off-w) < n+4 {
			return 0, false, nil
		}
		off += w + int(n) + 4
	}
	b, err := t.newBatch(int64(binary.BigEndian.Uint64(data)))
	if err != nil {
		return 0, false, err
	}
	bt := &t.batches[b]
	bt.data, bt.name, bt.n = data, name, entries
	for off := batchHeader; off < len(data); {
		k, e, next := bt.entry(off)
		bt.maxExp = max(bt.maxExp, e)
		h := t.hash(k)
		if prev, ok := t.lookup(k, h); !ok || prev < e {
			t.set(k, h, b, off)
		}
		off = next
	}
	return b, true, nil
}

// footprint is the memory the table takes, in bytes: its slots, its
// batches' bytes (their capacity) and their records.
func (t *keyTable) footprint() int64 {
	n := int64(cap(t.slots))*8 + int64(cap(t.batches))*int64(unsafe.Sizeof(keyBatch{})) + int64(cap(t.free))*4
	for i := range t.batches {
		n += int64(cap(t.batches[i].data))
	}
	return n
}
