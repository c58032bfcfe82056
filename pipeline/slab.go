package pipeline

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Chunk sizes of the slab. A chunk stays alive until every record carved
// from it has been produced and released by the client, so they are small
// next to what a transaction holds in flight (thousands of records).
const (
	slabRecords = 256
	slabHeaders = 512
	slabBytes   = 16 << 10
)

// slab hands out the output records, header slices and idempotency keys of
// the collector from chunks, instead of three heap allocations per output
// record. Profiles of a passthrough worker against a bare franz-go loop
// (BENCHMARKS.md, issue 14) put those allocations, and the GC work they
// cause, at most of the engine's extra CPU per record. Nothing is ever
// reused: the client keeps a record (and its headers and key) until its
// produce promise runs, so each piece is handed out once and the chunk is
// freed by the GC when the last of its records is.
type slab struct {
	recs []kgo.Record
	hdrs []kgo.RecordHeader
	buf  []byte

	// prefix is "<topic>/<partition>/" of the last key made, which the
	// records of one fetched batch share: formatting only the offset and
	// the index halves what a key costs.
	prefix    []byte
	prefTopic string
	prefPart  int32
}

// record returns a zeroed record.
func (s *slab) record() *kgo.Record {
	if len(s.recs) == 0 {
		s.recs = make([]kgo.Record, slabRecords)
	}
	r := &s.recs[0]
	s.recs = s.recs[1:]
	return r
}

// headers returns an empty slice with capacity n, which appends cannot grow
// into a neighbour's.
func (s *slab) headers(n int) []kgo.RecordHeader {
	if n > slabHeaders/4 {
		return make([]kgo.RecordHeader, 0, n)
	}
	if len(s.hdrs) < n {
		s.hdrs = make([]kgo.RecordHeader, slabHeaders)
	}
	h := s.hdrs[:0:n]
	s.hdrs = s.hdrs[n:]
	return h
}

// idempotencyKey returns "<topic>/<partition>/<offset>/<index>" of in, as
// the package-level idempotencyKey does, carved from the byte chunk.
func (s *slab) idempotencyKey(in *Record, index int) []byte {
	need := len(in.Topic) + 3*20 + 3
	if need > slabBytes/4 {
		return idempotencyKey(in, index)
	}
	if cap(s.buf)-len(s.buf) < need {
		s.buf = make([]byte, 0, slabBytes)
	}
	if s.prefix == nil || in.Topic != s.prefTopic || in.Partition != s.prefPart {
		s.prefix = append(strconv.AppendInt(append(append(s.prefix[:0], in.Topic...), '/'), int64(in.Partition), 10), '/')
		s.prefTopic, s.prefPart = in.Topic, in.Partition
	}
	start := len(s.buf)
	b := append(s.buf, s.prefix...)
	b = strconv.AppendInt(b, in.Offset, 10)
	b = append(b, '/')
	if index < 10 {
		b = append(b, byte('0'+index))
	} else {
		b = strconv.AppendInt(b, int64(index), 10)
	}
	s.buf = b
	return b[start:len(b):len(b)]
}
