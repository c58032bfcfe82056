package topologies

import (
	"hash/maphash"
	"math/rand/v2"
	"strconv"
	"testing"
)

// The key table answers membership exactly as a map of key to latest
// expiry does, through growth, keys re-added in later batches, batches
// dropped in any order and a rebuild from the batches alone (a restore).
// Its fingerprints are forced to collide in half the runs, so the byte
// comparison decides.
func TestKeyTableMatchesAMapThroughGrowthDropsAndReload(t *testing.T) {
	for run := range 4 {
		rng := rand.New(rand.NewPCG(uint64(run), 7))
		seed := maphash.MakeSeed()
		weak := func(t *keyTable) *keyTable {
			if run%2 == 1 {
				t.weak = 0xffff // every fingerprint equal, few home slots
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
		again := weak(newKeyTable(seed))
		for _, b := range live {
			if _, ok, err := again.load("x", tab.batches[b].data); !ok || err != nil {
				t.Fatalf("reloading batch %d: %v %v", b, ok, err)
			}
		}
		check("reloaded", again)
	}
}
