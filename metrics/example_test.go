package metrics_test

import (
	"context"
	"log"
	"net/http"

	"github.com/eosctl/eos/metrics"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The standalone exporter of eosctl monitor, for any cluster: LSO lag of
// the groups, open and hanging transactions, served for Prometheus.
func ExampleNewMonitor() {
	m, err := metrics.NewMonitor(metrics.MonitorConfig{
		Instance:   "ops-1",
		Groups:     []string{"billing"},
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	go func() {
		if err := m.Run(context.Background()); err != nil {
			log.Print(err)
		}
	}()
	log.Fatal(http.ListenAndServe("127.0.0.1:9465", m.Handler()))
}
