package committed

import (
	"slices"
	"strings"
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
	c := withInput(t, "mid")
	adm := kadm.NewClient(c.Client)
	commit := func(topic string, at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		if err := mustCommit(adm.CommitOffsets(c.Ctx, "g", os)); err != nil {
			t.Fatal(err)
		}
	}

	// The group starts with nothing consumed.
	firstCommit(t, c, "g", "in", 0)

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

// withInput starts a broker with one-partition topics in and second, and
// one record in in.
func withInput(t *testing.T, second string) *testbroker.Conn {
	t.Helper()
	c := testbroker.Connect(t, testbroker.Start(t, broker.Config{}), time.Minute)
	for _, topic := range []string{"in", second} {
		if _, _, err := admin.EnsureTopic(c.Ctx, c.Client, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Client.ProduceSync(c.Ctx, &kgo.Record{Topic: "in", Value: []byte("r")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c
}

// firstCommit commits group's offset at on topic's partition 0, retrying:
// on a fresh Apache Kafka cluster the first commit waits for the offsets
// topic to be created.
func firstCommit(t *testing.T, c *testbroker.Conn, group, topic string, at int64) {
	t.Helper()
	adm := kadm.NewClient(c.Client)
	for {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		err := mustCommit(adm.CommitOffsets(c.Ctx, group, os))
		if err == nil {
			return
		}
		if c.Ctx.Err() != nil {
			t.Fatalf("committing group %s's offset %d on %s: %v", group, at, topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mustCommit(r kadm.OffsetResponses, err error) error {
	if err != nil {
		return err
	}
	return r.Error()
}

// The group has committed everything it consumed, but the transaction that
// wrote its output is not finished: on Apache Kafka a commit's markers land
// on each partition independently, so the group's offsets can show before
// the output's marker does, and a read of the output then misses the last
// transaction. Waiting with the output named, the group is not caught up
// until that transaction ends.
func TestCaughtUpWaitsForTheOutputsLastTransaction(t *testing.T) {
	c := withInput(t, "out")
	p, err := kgo.NewClient(append(slices.Clip(c.Opts), kgo.TransactionalID("out-writer"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(c.Ctx, &kgo.Record{Topic: "out", Value: []byte("r")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	firstCommit(t, c, "g", "in", 1)

	w := Wait{Group: "g", Topics: []string{"in"}}
	if ok, err := Check(c.Ctx, c.Opts, w); err != nil || !ok {
		t.Fatalf("on its input alone the group is caught up: got %v, %v", ok, err)
	}
	w.Outputs = []string{"out"}
	if ok, err := Check(c.Ctx, c.Opts, w); err != nil || ok {
		t.Fatalf("caught up with the output's transaction open: got %v, %v", ok, err)
	}
	w.Within = 500 * time.Millisecond
	if err := WaitCaughtUp(c.Ctx, c.Opts, w); err == nil || !strings.Contains(err.Error(), "no transaction left open on [out]") {
		t.Fatalf("waiting with the output's transaction open: got %v, want an error naming the output", err)
	}
	if err := p.EndTransaction(c.Ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// An output not made yet (a dead-letter topic before its first dead
	// letter) has no transaction open on it.
	w.Within, w.Outputs = 30*time.Second, []string{"out", "no-dead-letters-yet"}
	if err := WaitCaughtUp(c.Ctx, c.Opts, w); err != nil {
		t.Fatal(err)
	}
}
