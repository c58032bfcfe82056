package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readThroughLeaderMoves has a consumer read 3 partitions of 100 records,
// moves every partition's leader (twice, by two kfake operations), polls a
// little longer, and returns the data losses the consumer reported and the
// records it was given more than once, and how many answers the guard, if
// any, corrected.
func readThroughLeaderMoves(t *testing.T, cfg Config) (losses, again int, corrected int64) {
	t.Helper()
	cfg.Nodes = 3
	b, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := b.Cluster()
	if err := c.CreateTopic("t", 3, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	for p := range int32(3) {
		for range 100 {
			pcl.Produce(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")}, nil)
		}
	}
	if err := pcl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics("t"), kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[[2]int64]int{}
	poll := func(until func() bool, within time.Duration) {
		pctx, pcancel := context.WithTimeout(ctx, within)
		defer pcancel()
		for !until() && pctx.Err() == nil {
			fs := cl.PollFetches(pctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if _, ok := errors.AsType[*kgo.ErrDataLoss](err); ok {
					losses++
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				k := [2]int64{int64(r.Partition), r.Offset}
				if seen[k]++; seen[k] > 1 {
					again++
				}
			})
		}
	}
	poll(func() bool { return len(seen) == 300 }, 20*time.Second)
	if len(seen) != 300 {
		t.Fatalf("read %d of 300 records before moving leaders", len(seen))
	}
	c.ShufflePartitionLeaders()
	poll(func() bool { return false }, time.Second)
	for p := range int32(3) {
		if err := c.MoveTopicPartition("t", p, (c.LeaderFor("t", p)+1)%3); err != nil {
			t.Fatal(err)
		}
	}
	poll(func() bool { return false }, time.Second)
	if g := b.EpochGuard(); g != nil {
		corrected = g.Corrected()
	}
	return losses, again, corrected
}

// kfake alone answers OffsetForLeaderEpoch wrongly after a leader move with
// nothing appended since (the defect EpochGuard exists for): the consumer
// reports data loss and reads records again. If this starts to fail, kfake
// has fixed the defect and the guard can go.
func TestRawLeaderEpochsReportFalseDataLoss(t *testing.T) {
	losses, again, _ := readThroughLeaderMoves(t, Config{RawLeaderEpochs: true})
	if losses == 0 || again == 0 {
		t.Fatalf("no false data loss without the guard (%d losses, %d records again): has kfake fixed OffsetForLeaderEpoch? Then EpochGuard can go", losses, again)
	}
	t.Logf("without the guard: %d data losses reported, %d records delivered again", losses, again)
}

// With the guard a consumer reads through the same leader moves without a
// data loss and without reading a record twice, and the guard says it
// corrected answers.
func TestEpochGuardKeepsConsumersThroughLeaderMoves(t *testing.T) {
	losses, again, corrected := readThroughLeaderMoves(t, Config{})
	if losses != 0 || again != 0 || corrected == 0 {
		t.Fatalf("with the guard: %d data losses reported, %d records delivered again, %d answers corrected; want none, none, some", losses, again, corrected)
	}
	t.Logf("with the guard: %d answers corrected", corrected)
}
