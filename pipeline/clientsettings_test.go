package pipeline

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The settings a worker runs with are read back from a kgo client built
// with its options: kgo's producer defaults, the fetch bounds, and
// ClientOpts over them; a benchmark hands exactly these to its peers.
func TestWorkerClientSettingsAreWhatTheClientResolves(t *testing.T) {
	s, err := WorkerClientSettings()
	if err != nil {
		t.Fatal(err)
	}
	want := ClientSettings{Compression: "snappy", BatchMaxBytes: 1000012, LingerMs: 10, Acks: "all", MaxInFlight: 5, Idempotent: true,
		FetchMaxPartitionBytes: 256 << 10, FetchMaxBytes: 8 << 20, FetchMinBytes: 1, FetchMaxWaitMs: 5000}
	if s != want {
		t.Errorf("worker settings %+v, want %+v", s, want)
	}
	s, err = WorkerClientSettings(kgo.ProducerBatchCompression(kgo.Lz4Compression()), kgo.FetchMaxBytes(16<<20), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	if s.Compression != "lz4" || s.FetchMaxBytes != 16<<20 || s.LingerMs != 0 || s.FetchMaxPartitionBytes != 256<<10 {
		t.Errorf("ClientOpts did not override the defaults: %+v", s)
	}
}
