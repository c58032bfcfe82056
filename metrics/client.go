package metrics

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// clientHooks makes one kprom.Metrics serve every client created with the
// same options. kprom registers its collectors when a client is created and
// unregisters them when it is closed, so two clients alive at once (a
// worker's admin client next to its session, a session reopened while
// another helper client lives) would register twice and panic, and the
// first close would drop the second client's metrics. clientHooks forwards
// only the first creation and the last close; the per-broker hooks, which
// kprom implements and the embedding promotes, count every client's
// traffic into the same series.
type clientHooks struct {
	*kprom.Metrics
	mu   sync.Mutex
	live int
}

func newClientHooks(r *registry) *clientHooks {
	return &clientHooks{Metrics: kprom.NewMetrics("eos",
		kprom.Subsystem("client"),
		kprom.Registerer(r.wrap), kprom.Gatherer(r.reg),
		kprom.Histograms(kprom.RequestDurationE2E, kprom.RequestThrottled),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.ByTopic, kprom.Batches, kprom.Records, kprom.UncompressedBytes, kprom.CompressedBytes, kprom.ConsistentNaming),
	)}
}

// OnNewClient implements kgo.HookNewClient.
func (h *clientHooks) OnNewClient(cl *kgo.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.live == 0 {
		h.Metrics.OnNewClient(cl)
	}
	h.live++
}

// OnClientClosed implements kgo.HookClientClosed.
func (h *clientHooks) OnClientClosed(cl *kgo.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live--
	if h.live == 0 {
		h.Metrics.OnClientClosed(cl)
	}
}
