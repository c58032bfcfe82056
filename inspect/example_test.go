package inspect_test

import (
	"context"
	"fmt"
	"log"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/inspect"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A group's lag measured against the last stable offset, what a
// read_committed consumer can read: ten records, six of them not yet
// consumed by the group "billing".
func ExampleLag() {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "invoices"); err != nil {
		log.Fatal(err)
	}
	for range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "invoices", Value: []byte("{}")}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}
	var offsets kadm.Offsets
	offsets.Add(kadm.Offset{Topic: "invoices", Partition: 0, At: 4, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "billing", offsets); err != nil {
		log.Fatal(err)
	}

	lag, err := inspect.Lag(ctx, adm, "billing", "invoices")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lag.TotalLag, lag.TotalUnstable)
	// Output: 6 0
}
