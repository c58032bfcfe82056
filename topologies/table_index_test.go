package topologies

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"testing"
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
