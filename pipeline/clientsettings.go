package pipeline

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FetchBounds are the fetch limits every worker's client starts from
// (Config.ClientOpts come after them and may raise them). Fetches are
// bounded in compressed bytes, and a worker holds about two of them
// decompressed (one being processed, one buffered): with kgo's defaults
// (1 MiB a partition, 50 MiB a response) a compressible backlog grows a
// worker's memory several-fold. These bound it whatever the backlog and
// still carry enough per round trip not to cost throughput (BENCHMARKS.md
// has the measurements that chose them).
//
// They are a function, not a variable, so that no caller can change what
// the workers use; the at-least-once baseline of eosctl bench and the
// settings a benchmark hands to its JVM peers read them from here.
func FetchBounds() []kgo.Opt {
	return []kgo.Opt{kgo.FetchMaxPartitionBytes(256 << 10), kgo.FetchMaxBytes(8 << 20)}
}

// ClientSettings are the producer and consumer settings of a Kafka client
// that decide its throughput, in the names a Java client would recognise
// beside them: what a benchmark must match when it compares eos with
// another client (see WorkerClientSettings).
type ClientSettings struct {
	// Compression is the producer's batch codec: none, gzip, snappy, lz4
	// or zstd.
	Compression string `json:"compression"`
	// BatchMaxBytes is the largest record batch the producer builds
	// (Java's batch.size is the size at which it sends one).
	BatchMaxBytes int32 `json:"batch_max_bytes"`
	// LingerMs is how long a partition's batch waits for more records.
	LingerMs float64 `json:"linger_ms"`
	// Acks is all, leader or none.
	Acks string `json:"acks"`
	// MaxInFlight is the produce requests in flight per broker.
	MaxInFlight int `json:"max_in_flight"`
	// Idempotent says the producer writes with a producer id and sequence
	// numbers (every transactional producer does).
	Idempotent bool `json:"idempotent"`
	// FetchMaxPartitionBytes and FetchMaxBytes bound a fetch per partition
	// and per response; FetchMinBytes and FetchMaxWaitMs say how long a
	// broker may hold a fetch for more data.
	FetchMaxPartitionBytes int32   `json:"fetch_max_partition_bytes"`
	FetchMaxBytes          int32   `json:"fetch_max_bytes"`
	FetchMinBytes          int32   `json:"fetch_min_bytes"`
	FetchMaxWaitMs         float64 `json:"fetch_max_wait_ms"`
}

// String is one line: compression, batch, linger, acks, in-flight and the
// fetch bounds.
func (s ClientSettings) String() string {
	idem := ""
	if s.Idempotent {
		idem = ", idempotent"
	}
	return fmt.Sprintf("compression %s, batch %d B, linger %g ms, acks %s, in-flight %d%s; fetch %d B/partition, %d B/response, min %d B, wait %g ms",
		s.Compression, s.BatchMaxBytes, s.LingerMs, s.Acks, s.MaxInFlight, idem,
		s.FetchMaxPartitionBytes, s.FetchMaxBytes, s.FetchMinBytes, s.FetchMaxWaitMs)
}

// WorkerClientSettings returns the settings a worker's client runs with
// when Config.ClientOpts are opts: kgo's defaults (snappy, 1 MB batches,
// 10 ms linger, acks=all, idempotent), FetchBounds, then opts. They are
// read back from a kgo client built with exactly those options, so they
// are what the worker's client resolves, not a copy of the numbers. An
// error means opts do not make a valid client.
func WorkerClientSettings(opts ...kgo.Opt) (ClientSettings, error) {
	return ClientSettingsOf(append(FetchBounds(), opts...)...)
}

// ClientSettingsOf returns the settings a kgo client built with opts
// resolves (it connects to nothing).
func ClientSettingsOf(opts ...kgo.Opt) (ClientSettings, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return ClientSettings{}, fmt.Errorf("pipeline: client settings: %w", err)
	}
	defer cl.Close()
	var s ClientSettings
	if cs, _ := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec); len(cs) > 0 {
		s.Compression = codecName(cs[0])
	}
	s.BatchMaxBytes, _ = cl.OptValue(kgo.ProducerBatchMaxBytes).(int32)
	if d, ok := cl.OptValue(kgo.ProducerLinger).(time.Duration); ok {
		s.LingerMs = float64(d) / float64(time.Millisecond)
	}
	switch cl.OptValue(kgo.RequiredAcks) {
	case kgo.AllISRAcks():
		s.Acks = "all"
	case kgo.LeaderAck():
		s.Acks = "leader"
	case kgo.NoAck():
		s.Acks = "none"
	}
	disabled, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool)
	s.Idempotent = !disabled
	// An idempotent kgo producer keeps up to 5 produce requests in flight
	// per broker (Kafka's limit for idempotence); otherwise
	// MaxProduceRequestsInflightPerBroker, default 1.
	s.MaxInFlight = 5
	if disabled {
		s.MaxInFlight, _ = cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker).(int)
	}
	s.FetchMaxPartitionBytes, _ = cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
	s.FetchMaxBytes, _ = cl.OptValue(kgo.FetchMaxBytes).(int32)
	s.FetchMinBytes, _ = cl.OptValue(kgo.FetchMinBytes).(int32)
	if d, ok := cl.OptValue(kgo.FetchMaxWait).(time.Duration); ok {
		s.FetchMaxWaitMs = float64(d) / float64(time.Millisecond)
	}
	return s, nil
}

// codecName names a kgo codec as Java's compression.type does.
func codecName(c kgo.CompressionCodec) string {
	for name, k := range map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()} {
		if c == k {
			return name
		}
	}
	return "custom"
}
