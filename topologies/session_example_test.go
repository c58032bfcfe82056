package topologies_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eosctl/eos/pipeline"
	"github.com/eosctl/eos/topologies"
)

// addCounts merges two view counts into a new accumulator (acc nil: a copy
// of add); the store holds both, so neither is modified.
func addCounts(acc, add []byte) []byte {
	var n uint64
	if acc != nil {
		n = binary.BigEndian.Uint64(acc)
	}
	return binary.BigEndian.AppendUint64(nil, n+binary.BigEndian.Uint64(add))
}

// pageViews is a custom processor that counts each user's page views per
// activity session (the record key is the user, its timestamp the view's
// time) with a Sessioniser: it declares the Sessioniser's store, adds each
// record's accumulator in Process, and writes every session's final count.
type pageViews struct{ sessions *topologies.Sessioniser }

func (p *pageViews) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	one := binary.BigEndian.AppendUint64(nil, 1)
	// A late record comes back as a dead letter, with reason late-record.
	return p.sessions.Add(in, string(in.Key), in.Timestamp, one, func(e topologies.SessionEvent) {
		if e.Kind != topologies.SessionFinal {
			return // updates and retractions: what a live view would write
		}
		value := fmt.Appendf(nil, `{"user":%q,"start":%d,"end":%d,"views":%d}`,
			e.Key, e.Start.UnixMilli(), e.End.UnixMilli(), binary.BigEndian.Uint64(e.Acc))
		out.Emit(pipeline.Output{Key: []byte(e.Key), Value: value, Timestamp: e.End})
	})
}

func (p *pageViews) Declare() pipeline.Declaration {
	return pipeline.Declaration{Stores: []string{p.sessions.Store()}, DeadLetters: true}
}

// A Sessioniser in a custom Transform: page views per user and session of
// activity (30 minutes without a view ends one), exactly once through
// crashes, since the open sessions are changelogged in the transaction of
// the output.
func ExampleSessioniser() {
	sessions, err := topologies.NewSessioniser("sessions", 30*time.Minute, time.Minute, addCounts)
	if err != nil {
		fmt.Println(err)
		return
	}
	var t pipeline.Transform = &pageViews{sessions: sessions}
	fmt.Println(sessions, "declares:", t.(pipeline.Declarer).Declare().Stores)
	// Then: pipeline.New(pipeline.Config{...}, t) and Run, as in pipeline's examples.

	// Output: sessioniser (store sessions, gap 30m0s, grace 1m0s) declares: [sessions]
}
