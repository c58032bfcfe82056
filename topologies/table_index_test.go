package topologies

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A rowIndex answers every get as a map given the same puts and deletes
// does, through growth, tombstones, values of every size (empty, and
// larger than a chunk) and compactions; values it returned earlier keep
// their bytes.
func TestRowIndexAgreesWithAMap(t *testing.T) {
	defer func(v int64) { rowCompactAt = v }(rowCompactAt)
	rowCompactAt = 4 << 10
	rng := rand.New(rand.NewPCG(1, 2))
	var x rowIndex
	ref := map[string][]byte{}
	type kept struct{ got, want []byte }
	var held []kept
	for i := range 200_000 {
		k := []byte("k" + strconv.Itoa(rng.IntN(5_000)))
		switch op := rng.IntN(10); {
		case op < 6:
			v := bytes.Repeat([]byte{byte(i)}, rng.IntN(40))
			if i%50_000 == 7 {
				v = bytes.Repeat([]byte{'x'}, rowChunkBytes+10)
			}
			x.put(k, v)
			ref[string(k)] = v
		case op < 8:
			x.delete(k)
			delete(ref, string(k))
		default:
			got, ok := x.get(k)
			want, wok := ref[string(k)]
			if ok != wok || !bytes.Equal(got, want) {
				t.Fatalf("op %d: get %s = %q %v, want %q %v", i, k, got, ok, want, wok)
			}
			if ok && rng.IntN(100) == 0 {
				held = append(held, kept{got, bytes.Clone(got)})
			}
		}
		if x.len() != len(ref) {
			t.Fatalf("op %d: %d entries, want %d", i, x.len(), len(ref))
		}
	}
	for k, want := range ref {
		if got, ok := x.get([]byte(k)); !ok || !bytes.Equal(got, want) {
			t.Fatalf("get %s = %q %v at the end", k, got, ok)
		}
	}
	for _, h := range held {
		if !bytes.Equal(h.got, h.want) {
			t.Fatalf("a value returned earlier changed to %q", h.got)
		}
	}
}

// Lookups after a prefetch answer as lookups without one: the key's own
// row, no row, or the partition's dead letter, whatever the prefetched run
// held (repeated keys, nil keys, keys of partitions not held) and whatever
// the lookups do with it (skip records, look up in another order, look up
// keys never prefetched, or after the rows changed).
func TestPrefetchedLookupsAnswerAsUnprefetchedOnes(t *testing.T) {
	tb, err := NewTable("cat", "")
	if err != nil {
		t.Fatal(err)
	}
	tb.nparts = 4
	tb.owned[0], tb.owned[1], tb.owned[3] = &tablePart{}, &tablePart{}, &tablePart{}
	rd, plain := tb.Reader(), tb.Reader()
	rng := rand.New(rand.NewPCG(3, 4))
	key := func() []byte {
		if rng.IntN(20) == 0 {
			return nil
		}
		return []byte("k" + strconv.Itoa(rng.IntN(3_000)))
	}
	put := func(k []byte) {
		if tp := tb.owned[plain.partitionOf(k)]; tp != nil {
			tp.rows.put(k, []byte("row of "+string(k)+" "+strconv.Itoa(rng.IntN(9))))
		}
	}
	for range 2_000 {
		put(key())
	}
	for run := range 3_000 {
		recs := make([]*kgo.Record, 1+rng.IntN(130))
		for i := range recs {
			recs[i] = &kgo.Record{Key: key()}
			if i > 0 && rng.IntN(8) == 0 {
				recs[i].Key = recs[i-1].Key // a repeat
			}
		}
		rd.prefetch(recs)
		for i := 0; i < len(recs); i++ {
			k := recs[i].Key
			switch op := rng.IntN(20); {
			case op == 0:
				continue // another path took this one
			case op == 1:
				k = key() // never prefetched
			case op == 2 && i+1 < len(recs):
				k = recs[i+1].Key // out of order
			case op == 3:
				put(k) // the row changed since the prefetch
			}
			if k == nil {
				continue
			}
			got, gerr := rd.row(k)
			want, werr := plain.row(k)
			if !bytes.Equal(got, want) || (got == nil) != (want == nil) || (gerr == nil) != (werr == nil) {
				t.Fatalf("run %d, record %d, key %s: %q %v after a prefetch, %q %v without", run, i, k, got, gerr, want, werr)
			}
		}
	}
}
