package broker_test

import (
	"context"
	"fmt"
	"log"

	"github.com/eosctl/eos/broker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An embedded cluster on a free loopback port: a real Kafka-protocol
// listener any client reaches over TCP, here franz-go's, for a test or a
// first try of eos without Apache Kafka.
func Example() {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("greetings"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "greetings"); err != nil {
		log.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello")}).FirstErr(); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", cl.PollFetches(ctx).Records()[0].Value)
	// Output: hello
}
