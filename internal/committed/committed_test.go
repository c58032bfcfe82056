package committed

import (
	"sync"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A two-stage pipeline: the group consumes "in", writes to "mid" and
// commits its offset on "in"; it also consumes "mid". If stage one writes
// and commits while CaughtUp is between its reads, the group must still
// not look caught up: the record it wrote to "mid" is unconsumed. Read in
// the other order (the topics' offsets, then the group's), it did look
// caught up, and the e2e aggregate test stopped its worker with every
// window unwritten.
func TestCaughtUpIsNotFooledByAStageCommittingBetweenItsReads(t *testing.T) {
	b := testbroker.Start(t, broker.Config{})
	c := testbroker.Connect(t, b, time.Minute)
	adm := kadm.NewClient(c.Client)
	for _, topic := range []string{"in", "mid"} {
		if _, _, err := admin.EnsureTopic(c.Ctx, c.Client, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Client.ProduceSync(c.Ctx, &kgo.Record{Topic: "in", Value: []byte("r")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit := func(topic string, at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		if err := mustCommit(adm.CommitOffsets(c.Ctx, "g", os)); err != nil {
			t.Fatal(err)
		}
	}

	// The group starts with nothing consumed. On a fresh Apache Kafka
	// cluster the first commit waits for the offsets topic to be created.
	for {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "in", Partition: 0, At: 0, LeaderEpoch: -1})
		err := mustCommit(adm.CommitOffsets(c.Ctx, "g", os))
		if err == nil {
			break
		}
		if c.Ctx.Err() != nil {
			t.Fatalf("committing the group's first offset: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	var once sync.Once
	stageOne := func() {
		once.Do(func() {
			if err := c.Client.ProduceSync(c.Ctx, &kgo.Record{Topic: "mid", Value: []byte("r")}).FirstErr(); err != nil {
				t.Error(err)
			}
			commit("in", 1)
		})
	}
	w := Wait{Group: "g", Topics: []string{"in", "mid"}, afterGroupOffsets: stageOne}
	ok, err := caughtUp(c.Ctx, c.Opts, w)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("caught up with a record in mid unconsumed")
	}

	// Stage two consumes it: now the group is caught up, and says so.
	commit("mid", 1)
	if err := WaitCaughtUp(c.Ctx, c.Opts, Wait{Group: "g", Topics: []string{"in", "mid"}, Within: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
}

func mustCommit(r kadm.OffsetResponses, err error) error {
	if err != nil {
		return err
	}
	return r.Error()
}
