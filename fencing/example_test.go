package fencing_test

import (
	"errors"
	"fmt"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/fencing"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A worker's transactional.id is fixed by its app and instance, so that its
// next incarnation fences this one; a name Kafka would refuse is a
// configuration error before anything connects.
func ExampleTransactionalID() {
	id, err := fencing.TransactionalID("orders", "pod-0")
	fmt.Println(id, err)
	_, err = fencing.TransactionalID("orders", "pod/0")
	fmt.Println(errors.Is(err, eos.ErrConfig))
	// Output:
	// orders-pod-0 <nil>
	// true
}

// IsFenced tells a fenced producer (or group member) from every other
// failure: the one error after which a worker must stop, not retry.
func ExampleIsFenced() {
	reason, fenced := fencing.IsFenced(fmt.Errorf("ending the transaction: %w", kerr.ProducerFenced))
	fmt.Println(reason, fenced)
	_, fenced = fencing.IsFenced(kerr.RequestTimedOut)
	fmt.Println(fenced)
	// Output:
	// producer-epoch true
	// false
}
