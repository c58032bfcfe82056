package topologies

import "encoding/binary"

// keyPartition is the partition of key among n under Kafka's default
// partitioner: murmur2 of the key, its sign bit cleared, modulo n. It is
// what kgo.StickyKeyPartitioner gives a record with a non-nil key
// (TestKeyPartitionIsKafkasDefault compares the two), without the
// partitioner's interface call and scratch record, which profiles of the
// join put at a third of its prefetch.
func keyPartition(key []byte, n int32) int32 {
	return int32(murmur2(key)&0x7fffffff) % n
}

// murmur2 is MurmurHash2 (32 bits) with Kafka's seed, as Kafka's
// Utils.murmur2 computes it: four-byte little-endian words, then the
// tail, then the final mix.
func murmur2(b []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
	)
	h := seed ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := binary.LittleEndian.Uint32(b)
		k *= m
		k ^= k >> 24
		k *= m
		h = h*m ^ k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
