package topologies

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// The output slab never hands out bytes that overlap an output not yet
// released, reuses released chunks without allocating, and keeps no more
// of them than the last transaction filled, at most outputSlabKeep.
func TestOutputSlabReusesOnlyReleasedChunks(t *testing.T) {
	var s outputSlab
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 6 {
		// One transaction's outputs, each filled with its own byte,
		// checked intact at its end: an overlap would spoil one.
		outs := make([][]byte, 0, 4000)
		for i := range 3000 + round*1000 {
			n := 1 + rng.IntN(300)
			if i%997 == 0 {
				n = outputSlabBytes/8 + 1 // too large for a chunk
			}
			b := s.make(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("make(%d): len %d cap %d", n, len(b), cap(b))
			}
			for k := range b {
				b[k] = byte(i)
			}
			outs = append(outs, b)
		}
		for i, b := range outs {
			if !bytes.Equal(b, bytes.Repeat([]byte{byte(i)}, len(b))) {
				t.Fatalf("round %d: output %d was overwritten before the release", round, i)
			}
		}
		filled := len(s.used)
		s.release()
		if len(s.free) != min(filled, outputSlabKeep) || len(s.used) != 0 || len(s.buf) != 0 {
			t.Fatalf("round %d: %d chunks filled, %d kept, %d still used, %d bytes current", round, filled, len(s.free), len(s.used), len(s.buf))
		}
	}
	if a := testing.AllocsPerRun(100, func() {
		for range 1000 {
			s.make(100)
		}
		s.release()
	}); a != 0 {
		t.Errorf("%v allocations a transaction of 100,000 bytes after a larger one, want 0", a)
	}
	// A burst beyond outputSlabKeep keeps only that many, and a smaller
	// transaction after it drops the rest.
	for range (outputSlabKeep + 10) * (outputSlabBytes / 1000) {
		s.make(1000)
	}
	s.release()
	if len(s.free) != outputSlabKeep {
		t.Fatalf("%d chunks kept after a burst, want %d", len(s.free), outputSlabKeep)
	}
	s.make(1000)
	s.release()
	if len(s.free) != 0 {
		t.Fatalf("%d chunks kept after a transaction that filled none, want 0", len(s.free))
	}
	// Never released (an ETL outside the worker), it keeps no more than
	// outputSlabKeep chunks.
	var never outputSlab
	for range 3 * outputSlabKeep * (outputSlabBytes / 1000) {
		never.make(1000)
	}
	if len(never.used) != outputSlabKeep || len(never.free) != 0 {
		t.Fatalf("never released: %d chunks kept, want %d", len(never.used), outputSlabKeep)
	}
}
