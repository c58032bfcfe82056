package topologies

import (
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// The key table answers membership exactly as a map of key to latest
// expiry does, through growth, keys re-added in later batches, batches
// dropped in any order and a rebuild from the batches alone (a restore).
// Its fingerprints are forced to collide in half the runs, so the byte
// comparison decides; in the other half of each, growth fills the table
// region by region (as it does past 16,384 slots) from regions of 16
// slots.
func TestKeyTableMatchesAMapThroughGrowthDropsAndReload(t *testing.T) {
	for run := range 8 {
		rng := rand.New(rand.NewPCG(uint64(run), 7))
		seed := maphash.MakeSeed()
		weak := func(t *keyTable) *keyTable {
			if run%2 == 1 {
				t.weak = 0xffff // every fingerprint equal, few home slots
			}
			if run&2 != 0 {
				t.regionBits = 4
			}
			return t
		}
		tab := weak(newKeyTable(seed))
		hash := tab.hash
		type ref struct {
			exp   int64
			batch uint32
		}
		want := map[string]ref{}
		var live []uint32
		for round := range 60 {
			b, err := tab.newBatch(int64(round) * 1000)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, b)
			for i := range 500 {
				k := []byte("id-" + strconv.Itoa(rng.IntN(20_000)))
				exp := int64(round)*1000 + int64(i)
				if !tab.fits(b, len(k), exp) {
					t.Fatalf("batch %d does not fit a key", b)
				}
				off := len(tab.batches[b].data)
				tab.add(b, k, hash(k), exp)
				if tab.find(k, hash(k)) < 0 || uint64Slot(tab.slots[tab.find(k, hash(k))]).off() != off {
					t.Fatalf("run %d: %s not indexed at its new entry", run, k)
				}
				want[string(k)] = ref{exp, b}
			}
			if rng.IntN(3) == 0 && len(live) > 1 { // drop the oldest batch, as expiry does
				d := live[0]
				live = live[1:]
				tab.drop(d)
				for k, r := range want {
					if r.batch == d {
						delete(want, k)
					}
				}
			}
		}
		check := func(what string, tab *keyTable) {
			t.Helper()
			if tab.live != len(want) {
				t.Fatalf("run %d, %s: %d keys live, want %d", run, what, tab.live, len(want))
			}
			for i := range 20_000 {
				k := []byte("id-" + strconv.Itoa(i))
				e, ok := tab.lookup(k, hash(k))
				r, wok := want[string(k)]
				if ok != wok || e != r.exp {
					t.Fatalf("run %d, %s: %s gives %d %v, want %d %v", run, what, k, e, ok, r.exp, wok)
				}
			}
		}
		check("built", tab)
		// One big batch into an empty table: far more entries than the
		// table has slots when its first growth comes.
		big := weak(newKeyTable(seed))
		bb, _ := big.newBatch(0)
		for i := range 15_000 {
			k := []byte("big-" + strconv.Itoa(i))
			if !big.fits(bb, len(k), int64(i)) {
				t.Fatalf("key %d does not fit one batch", i)
			}
			big.add(bb, k, big.hash(k), int64(i))
		}
		if again := weak(newKeyTable(seed)); true {
			if _, ok, err := again.load("big", big.batches[bb].data); !ok || err != nil || again.live != 15_000 {
				t.Fatalf("run %d: loading one batch of 15,000 keys: %v %v, %d live", run, ok, err, again.live)
			}
		}
		again := weak(newKeyTable(seed))
		for _, b := range live {
			if _, ok, err := again.load("x", tab.batches[b].data); !ok || err != nil {
				t.Fatalf("reloading batch %d: %v %v", b, ok, err)
			}
		}
		check("reloaded", again)
	}
}

// BenchmarkKeyTableAdmit is the key table's share of the dedup gate's
// per-record cost: a probe and an insert for each of 10,000,000 distinct
// 7- and 8-digit keys in six tables (a partition's each, as the dedup
// benchmarks hold them), in batches of 16,384 keys, growth included. It
// reports nanoseconds and table bytes per key.
//
//	go test ./topologies -run '^$' -bench KeyTableAdmit -benchtime 1x
func BenchmarkKeyTableAdmit(b *testing.B) {
	const keys, parts = 10_000_000, 6
	var bytes int64
	for range b.N {
		tabs := make([]*keyTable, parts)
		open := make([]uint32, parts)
		for i := range tabs {
			tabs[i] = newKeyTable(maphash.MakeSeed())
		}
		var key []byte
		for i := range keys {
			p := i % parts
			t := tabs[p]
			key = strconv.AppendInt(key[:0], int64(1_000_000+i), 10)
			if i%(16_384*parts) < parts {
				open[p], _ = t.newBatch(int64(i))
			}
			h := t.hash(key)
			slot, found := t.probe(key, h)
			if found {
				b.Fatalf("%s found before it was added", key)
			}
			t.addAt(slot, found, open[p], key, h, int64(i))
		}
		bytes = 0
		for _, t := range tabs {
			bytes += t.footprint()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/key")
	b.ReportMetric(float64(bytes)/keys, "B/key")
}

// A table doubles while it is small, grows fourfold from quadGrowthFrom
// slots up to quadGrowthTo, then doubles again, keeping every key; a
// resize that only clears deletion markers (the keys dropped) does not
// grow it.
func TestKeyTableGrowthSizes(t *testing.T) {
	tab := newKeyTable(maphash.MakeSeed())
	b, _ := tab.newBatch(0)
	sizes := []int{len(tab.slots)}
	add := func(k []byte) {
		t.Helper()
		if !tab.fits(b, len(k), 1) {
			if b, _ = tab.newBatch(0); !tab.fits(b, len(k), 1) {
				t.Fatalf("%s does not fit a new batch", k)
			}
		}
		tab.add(b, k, tab.hash(k), 1)
		if n := len(tab.slots); n != sizes[len(sizes)-1] {
			sizes = append(sizes, n)
		}
	}
	const keys = 200_000 // past 3/4 of 2^18 slots
	for i := range keys {
		add([]byte("k" + strconv.Itoa(i)))
	}
	want := []int{1 << 10, 1 << 11, 1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16, 1 << 18, 1 << 20}
	if !slices.Equal(sizes, want) {
		t.Fatalf("sizes %v, want %v", sizes, want)
	}
	if tab.live != keys {
		t.Fatalf("%d keys live, want %d", tab.live, keys)
	}
	for i := range keys {
		if k := []byte("k" + strconv.Itoa(i)); tab.find(k, tab.hash(k)) < 0 {
			t.Fatalf("%s lost in growth", k)
		}
	}
	// Past 2^22 slots the table doubles again: 3/4 of 2^22 keys and more
	// take 2^23 slots, not 2^24.
	const more = 3_200_000
	for i := keys; i < more; i++ {
		add([]byte("k" + strconv.Itoa(i)))
	}
	if want = append(want, 1<<22, 1<<23); !slices.Equal(sizes, want) {
		t.Fatalf("sizes %v, want %v", sizes, want)
	}
	if tab.live != more {
		t.Fatalf("%d keys live, want %d", tab.live, more)
	}

	// 40,000 keys in 2^16 slots, all dropped: new keys fill the table
	// with markers and keys (fewer than growth needs), and the resize that
	// causes keeps or shrinks it.
	tab = newKeyTable(maphash.MakeSeed())
	b, _ = tab.newBatch(0)
	var held []uint32
	for i := range 40_000 {
		add([]byte("d" + strconv.Itoa(i)))
		if len(held) == 0 || held[len(held)-1] != b {
			held = append(held, b)
		}
	}
	if len(tab.slots) != 1<<16 {
		t.Fatalf("40,000 keys in %d slots, want %d", len(tab.slots), 1<<16)
	}
	for _, d := range held {
		tab.drop(d)
	}
	b, _ = tab.newBatch(0)
	n := 0
	for ; tab.used > tab.live; n++ { // until a resize clears the markers
		if n == 30_000 {
			t.Fatalf("no resize after %d keys added to a table of markers", n)
		}
		add([]byte("e" + strconv.Itoa(n)))
	}
	if len(tab.slots) > 1<<16 || tab.live != n {
		t.Fatalf("after a resize of markers: %d slots, %d live; want at most %d slots, %d live", len(tab.slots), tab.live, 1<<16, n)
	}
}
