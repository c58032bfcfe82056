package topologies_test

import (
	"context"
	"fmt"
	"time"

	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
)

// orderOnce is a custom processor that passes each order once by the
// order-id header its producer sets, with a Gate: it declares the Gate's
// store, admits each record's id in Process, has the Gate write
// them at each commit from its Flusher's Flush, and lets the Gate rebuild
// after an aborted transaction from its Discard.
type orderOnce struct{ gate *topologies.Gate }

func (o *orderOnce) Declare() pipeline.Declaration {
	return pipeline.Declaration{Stores: []string{o.gate.Store()}, DeadLetters: true}
}

func (o *orderOnce) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	var id string
	for _, h := range in.Headers {
		if h.Key == "order-id" {
			id = string(h.Value)
		}
	}
	pass, err := o.gate.Admit(in, id, in.Timestamp) // an empty id is a dead letter
	if err != nil || !pass {
		return err
	}
	out.Emit(pipeline.Output{Key: in.Key, Value: in.Value, Headers: in.Headers})
	return nil
}

// Flush has the Gate write the transaction's ids to its store, which the
// worker changelogs in the transaction; Discard has it rebuild from the
// rolled-back store.
func (o *orderOnce) Flush(context.Context, pipeline.Emitter) error { o.gate.Flush(); return nil }
func (o *orderOnce) Discard()                                      { o.gate.Discard() }

// A Gate in a custom Transform: each order id passes once per 24 hours of
// event time, exactly once through crashes, since the ids seen are
// changelogged in the transaction of the output.
func ExampleGate() {
	gate, err := topologies.NewGate("orders-seen", 24*time.Hour)
	if err != nil {
		fmt.Println(err)
		return
	}
	var t pipeline.Transform = &orderOnce{gate: gate}
	_, flusher := t.(pipeline.Flusher)
	fmt.Println(gate, "flusher:", flusher)
	// Then: pipeline.New(pipeline.Config{...}, t) and Run, as in pipeline's examples.

	// Output: dedup gate (store orders-seen, retention 24h0m0s) flusher: true
}
