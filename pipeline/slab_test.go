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
		in.Offset, in.Partition = int64(i), int32(i/100) // the prefix changes now and then
		keys = append(keys, s.idempotencyKey(in, i%13))
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
		in.Offset, in.Partition = int64(i), int32(i/100)
		if want := string(idempotencyKey(in, i%13)); string(keys[i]) != want {
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

// BenchmarkIdempotencyKey is the cost of one output record's key:
//
//	go test ./pipeline -run '^$' -bench IdempotencyKey -benchmem
func BenchmarkIdempotencyKey(b *testing.B) {
	in := &Record{Topic: "eosbench-0123abcd-in-100", Partition: 3}
	b.Run("slab", func(b *testing.B) {
		var s slab
		for i := range b.N {
			in.Offset = int64(i)
			_ = s.idempotencyKey(in, 0)
		}
	})
	b.Run("alloc", func(b *testing.B) {
		for i := range b.N {
			in.Offset = int64(i)
			_ = idempotencyKey(in, 0)
		}
	})
}
