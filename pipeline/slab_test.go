package pipeline

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Pieces handed out by the slab never share memory: a key written later
// does not change an earlier one, an append to a header slice at capacity
// does not overwrite the next slice, and records are distinct.
func TestSlabPiecesAreIndependent(t *testing.T) {
	var s slab
	in := &Record{Topic: "orders", Partition: 3}
	var keys [][]byte
	var hdrs [][]kgo.RecordHeader
	seen := map[*kgo.Record]bool{}
	for i := range 3 * slabRecords {
		in.Offset = int64(i)
		keys = append(keys, s.idempotencyKey(in, i%3))
		h := s.headers(1)
		h = append(h, kgo.RecordHeader{Key: "k", Value: []byte(strconv.Itoa(i))})
		hdrs = append(hdrs, h)
		r := s.record()
		if seen[r] || r.Topic != "" {
			t.Fatalf("record %d handed out twice or not zeroed", i)
		}
		r.Topic = "x"
		seen[r] = true
	}
	for i := range keys {
		in.Offset = int64(i)
		if want := string(idempotencyKey(in, i%3)); string(keys[i]) != want {
			t.Fatalf("key %d is %q, want %q", i, keys[i], want)
		}
		if cap(keys[i]) != len(keys[i]) || cap(hdrs[i]) != 1 {
			t.Fatalf("piece %d can be appended into a neighbour (key cap %d, headers cap %d)", i, cap(keys[i]), cap(hdrs[i]))
		}
		if string(hdrs[i][0].Value) != strconv.Itoa(i) {
			t.Fatalf("headers %d were overwritten: %q", i, hdrs[i][0].Value)
		}
	}
	if got := s.headers(slabHeaders); cap(got) != slabHeaders || len(got) != 0 {
		t.Fatalf("a large header slice: len %d cap %d", len(got), cap(got))
	}
}
