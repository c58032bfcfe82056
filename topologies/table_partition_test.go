package topologies

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKeyPartitionIsKafkasDefault checks keyPartition against franz-go's
// partitioner, which producers of the table use, on keys of every length
// up to 40 bytes (every tail of murmur2), the datagen keys and random
// bytes, for partition counts from 1 to 64: a table row found in another
// partition than the one a lookup asks would be a miss.
func TestKeyPartitionIsKafkasDefault(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var keys [][]byte
	for n := range 41 {
		for range 50 {
			k := make([]byte, n)
			for i := range k {
				k[i] = byte(rng.Uint32())
			}
			keys = append(keys, k)
		}
	}
	for i := range 2000 {
		keys = append(keys, []byte(strconv.Itoa(i*7919)))
	}
	for _, n := range []int{1, 2, 3, 6, 7, 12, 64} {
		p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for _, k := range keys {
			want := int32(p.Partition(&kgo.Record{Key: k}, n))
			if got := keyPartition(k, int32(n)); got != want {
				t.Fatalf("key %q among %d partitions: keyPartition says %d, franz-go %d", k, n, got, want)
			}
		}
	}
}
