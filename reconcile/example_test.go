package reconcile_test

import (
	"context"
	"fmt"
	"log"

	"github.com/eosctl/eos/reconcile"
	"github.com/eosctl/eos/sink"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A scheduled check of the table a sink writes: the topic is judged up to
// the offsets the sink (group "payments-sink") has committed in its own
// offsets table, each row against the record the sink keeps, and anything
// the sink has not committed yet is pending, never missing.
func ExampleRun() {
	mapping, err := sink.ParseMapping("payments.yaml", []byte("table: payments\nkey_column: order_id\nkey: order_id\ncolumns:\n  amount_cents: int(round(amount * 100))\n"))
	if err != nil {
		log.Fatal(err)
	}
	rep, err := reconcile.Run(context.Background(), reconcile.Config{
		DSN:        "postgres://eos:eos@127.0.0.1:5432/shop?sslmode=disable",
		Topic:      "payments",
		Group:      "payments-sink",
		Mapping:    mapping,
		ClientOpts: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:9092")},
	})
	if err != nil {
		log.Fatal(err) // no judgment could be made
	}
	fmt.Printf("%d missing, %d changed, %d extra; %d offsets pending\n",
		rep.MissingCount, rep.ChangedCount, rep.ExtraCount, rep.PendingOffsets)
}
