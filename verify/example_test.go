package verify_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Judging a copy: every input key once in the output, read with
// read_committed as of the moment Run starts. Here the output holds key 3
// twice and lacks key 7.
func ExampleRun() {
	b, err := broker.Start(broker.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, "in", "out"); err != nil {
		log.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 10 {
		key := []byte(strconv.Itoa(i))
		recs = append(recs, &kgo.Record{Topic: "in", Key: key})
		if i != 7 {
			recs = append(recs, &kgo.Record{Topic: "out", Key: key})
		}
	}
	recs = append(recs, &kgo.Record{Topic: "out", Key: []byte("3")})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		log.Fatal(err)
	}

	rep, err := verify.Run(ctx, opts, verify.Config{Input: "in", Output: "out", Timeout: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.OK(), rep.Duplicates, rep.Missing)
	// Output: false 1 1
}
