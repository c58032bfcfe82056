package topologies

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"

	"github.com/twmb/franz-go/pkg/kgo"
)

// rowIndex maps keys to values, as a Table partition holds its rows,
// without a pointer per row: keys and values are copied into append-only
// byte chunks, and the index is open addressing over uint64 slots. A
// million rows held as map[string][]byte are two million objects the
// collector marks on every cycle, with write barriers slowing everything
// while it does; here they are a few chunks it never looks inside.
//
// A value returned by get aliases a chunk: chunks are never written again
// once an entry is in them, so it stays valid (and must not be modified).
// Replaced and deleted entries stay in their chunk as garbage until the
// garbage outweighs the live bytes; then the live entries are copied into
// fresh chunks.
type rowIndex struct {
	slots []uint64 // 0: empty; rowTombstone: deleted; else used (see slot)
	used  int      // live entries
	tombs int      // tombstones
	// chunks hold the entries, each uvarint(len key) uvarint(len value)
	// key value; the last one is appended to.
	chunks        [][]byte
	live, garbage int64 // bytes of entries
}

// A used slot is 1<<63 | tag<<43 | chunk<<22 | offset: tag is 20 bits of
// the key's hash (most probes that miss never read the entry), chunk
// indexes chunks (21 bits), offset is the entry's place in it (22 bits:
// chunks are at most 4 MiB, except one holding a single larger entry at
// offset 0).
const (
	rowTombstone  = 1
	rowSlotUsed   = 1 << 63
	rowChunkBytes = 4 << 20
)

var rowIndexSeed = maphash.MakeSeed()

func rowSlot(h uint64, chunk, off int) uint64 {
	return rowSlotUsed | (h>>44)<<43 | uint64(chunk)<<22 | uint64(off)
}

func rowSameTag(s, h uint64) bool { return (s>>43)&(1<<20-1) == h>>44 }

// entry returns the key and value of a used slot.
func (x *rowIndex) entry(s uint64) (key, val []byte) {
	c := x.chunks[(s>>22)&(1<<21-1)]
	off := int(s & (1<<22 - 1))
	kl, n := binary.Uvarint(c[off:])
	off += n
	vl, n := binary.Uvarint(c[off:])
	off += n
	return c[off : off+int(kl)], c[off+int(kl) : off+int(kl)+int(vl)]
}

// find returns the slot index holding key, or -1, and the index of the
// first free slot (rowTombstone or empty) on its probe sequence.
func (x *rowIndex) find(key []byte, h uint64) (at, free int) {
	free = -1
	if len(x.slots) == 0 {
		return -1, -1
	}
	mask := len(x.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := x.slots[i]
		switch {
		case s == 0:
			if free < 0 {
				free = i
			}
			return -1, free
		case s == rowTombstone:
			if free < 0 {
				free = i
			}
		case rowSameTag(s, h):
			if k, _ := x.entry(s); bytes.Equal(k, key) {
				return i, free
			}
		}
	}
}

func (x *rowIndex) get(key []byte) ([]byte, bool) {
	return x.getHashed(key, maphash.Bytes(rowIndexSeed, key))
}

// getHashed is get of a key whose hash is h.
func (x *rowIndex) getHashed(key []byte, h uint64) ([]byte, bool) {
	at, _ := x.find(key, h)
	if at < 0 {
		return nil, false
	}
	_, v := x.entry(x.slots[at])
	return v, true
}

func (x *rowIndex) len() int { return x.used }

// put sets key's value (a copy of val).
func (x *rowIndex) put(key, val []byte) {
	if (x.used+x.tombs+1)*4 >= len(x.slots)*3 {
		x.rehash(max(16, 2*x.used*4/3+16))
	}
	h := maphash.Bytes(rowIndexSeed, key)
	at, free := x.find(key, h)
	chunk, off, size := x.append(key, val)
	x.live += size
	if at >= 0 {
		x.forget(x.slots[at])
		x.slots[at] = rowSlot(h, chunk, off)
		x.compactIfWasteful()
		return
	}
	if x.slots[free] == rowTombstone {
		x.tombs--
	}
	x.slots[free] = rowSlot(h, chunk, off)
	x.used++
}

// delete removes key, if it is there.
func (x *rowIndex) delete(key []byte) {
	at, _ := x.find(key, maphash.Bytes(rowIndexSeed, key))
	if at < 0 {
		return
	}
	x.forget(x.slots[at])
	x.slots[at] = rowTombstone
	x.used--
	x.tombs++
	x.compactIfWasteful()
}

// forget counts a replaced or deleted entry as garbage.
func (x *rowIndex) forget(s uint64) {
	k, v := x.entry(s)
	size := int64(rowEntrySize(len(k), len(v)))
	x.live -= size
	x.garbage += size
}

func rowEntrySize(kl, vl int) int {
	return uvarintLen(kl) + uvarintLen(vl) + kl + vl
}

func uvarintLen(n int) int {
	l := 1
	for n >= 0x80 {
		n >>= 7
		l++
	}
	return l
}

// append copies an entry into the chunks and says where it is.
func (x *rowIndex) append(key, val []byte) (chunk, off int, size int64) {
	n := rowEntrySize(len(key), len(val))
	last := len(x.chunks) - 1
	if last < 0 || len(x.chunks[last])+n > cap(x.chunks[last]) {
		x.chunks = append(x.chunks, make([]byte, 0, max(rowChunkBytes, n)))
		last++
	}
	c := x.chunks[last]
	off = len(c)
	c = binary.AppendUvarint(c, uint64(len(key)))
	c = binary.AppendUvarint(c, uint64(len(val)))
	c = append(append(c, key...), val...)
	x.chunks[last] = c
	return last, off, int64(n)
}

// rehash rebuilds the slots with room for n entries (a power of two at
// least n), dropping tombstones.
func (x *rowIndex) rehash(n int) {
	size := 16
	for size < n {
		size *= 2
	}
	old := x.slots
	x.slots, x.tombs = make([]uint64, size), 0
	mask := size - 1
	for _, s := range old {
		if s&rowSlotUsed == 0 {
			continue
		}
		k, _ := x.entry(s)
		h := maphash.Bytes(rowIndexSeed, k)
		i := int(h) & mask
		for x.slots[i] != 0 {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// rowCompactAt is the garbage (bytes of replaced and deleted entries)
// below which a rowIndex never compacts; tests lower it.
var rowCompactAt int64 = 64 << 20

// compactIfWasteful copies the live entries into fresh chunks once the
// garbage is over rowCompactAt and outweighs them.
func (x *rowIndex) compactIfWasteful() {
	if x.garbage < rowCompactAt || x.garbage < x.live {
		return
	}
	old := *x
	*x = rowIndex{}
	x.rehash(max(16, old.used*4/3+16))
	for _, s := range old.slots {
		if s&rowSlotUsed != 0 {
			k, v := old.entry(s)
			x.put(k, v)
		}
	}
}

// rowsAhead are the home slots of the keys of records about to be joined,
// noted by Table.prefetch, and the keys' partitions and hashes, which
// row takes rather than computing them again.
type rowsAhead struct {
	notes []rowNote
	keys  []keyNote // the last run prefetched, in its order
	next  int       // the index in keys of the next record's key
	sink  uint64    // what the reads summed, so that they are not optimised away
}

type rowNote struct {
	x *rowIndex
	i int
	h uint64
}

// keyNote is a key's table partition and hash (rowIndexSeed).
type keyNote struct {
	key []byte
	p   int32
	h   uint64
}

// hashed returns key's partition and hash as prefetch noted them, if it
// did: the records are looked up in the order they were prefetched, so
// the note is nearly always the next one; a record that was not looked
// up (it took another path) is stepped over. The key is compared, so a
// note is never taken for another key.
func (a *rowsAhead) hashed(key []byte) (int32, uint64, bool) {
	for k := a.next; k < len(a.keys) && k < a.next+4; k++ {
		if n := &a.keys[k]; bytes.Equal(n.key, key) {
			a.next = k + 1
			return n.p, n.h, true
		}
	}
	return 0, 0, false
}

// prefetch reads the memory the lookups of records' keys will touch (see
// pipeline.Prefetcher): each key's home slot, then the entry that slot
// points to if its tag matches. Each is a loop of its own, so that the
// misses of a whole run of records are in flight at once rather than two
// a record, one after the other, in Process. It changes nothing a lookup
// could observe.
func (rd *TableReader) prefetch(records []*kgo.Record) {
	t, a := rd.t, &rd.ahead
	clear(a.keys) // no fetch buffer kept alive by an old note
	a.keys, a.next = a.keys[:0], 0
	for _, r := range records {
		if r.Key == nil {
			continue
		}
		p := rd.partitionOf(r.Key)
		h := maphash.Bytes(rowIndexSeed, r.Key)
		a.keys = append(a.keys, keyNote{r.Key, p, h})
		if tp := t.owned[p]; tp != nil && len(tp.rows.slots) > 0 {
			a.notes = append(a.notes, rowNote{&tp.rows, int(h) & (len(tp.rows.slots) - 1), h})
		}
	}
	var s uint64
	for _, n := range a.notes {
		s += n.x.slots[n.i]
	}
	for _, n := range a.notes {
		if v := n.x.slots[n.i]; v&rowSlotUsed != 0 && rowSameTag(v, n.h) {
			s += uint64(n.x.chunks[(v>>22)&(1<<21-1)][v&(1<<22-1)])
		}
	}
	a.sink += s
	clear(a.notes) // no index kept alive by a note
	a.notes = a.notes[:0]
}
