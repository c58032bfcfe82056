package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kadm"
)

// The aggregate topology's runs differ from the copies' in four ways:
//
//   - The backlog is aggcheck.NewInput (orders with late records and
//     poison pills, whose exact windows and dead letters are known), written
//     once and drained by every run, like a copy's backlog.
//   - Each run has a second input topic, <run>-hb, for the heartbeats that
//     close the last windows (aggcheck.Input.Heartbeats). They cannot
//     go into the shared backlog: a heartbeat is ten hours of event time
//     ahead, and one read from a partition before another partition's
//     orders reached the same repartition partition would make those orders
//     late. They are written once the drain is over.
//   - The drain ends when the run's group has consumed everything on the
//     backlog and on the repartition topic (committed.CaughtUp, polled every
//     aggregatePoll), for eos and Kafka Streams alike: neither a Kafka
//     Streams nor an eos commit event says how many backlog records it
//     consumed (eos's count includes the repartition topic's records, and
//     eos pre-aggregates them, so its count means something else than a
//     copy's).
//   - The judgement is aggcheck.Judge after the heartbeats (every
//     window's final result and every dead letter once and exactly right),
//     and there is no latency phase: a window's result is written when the
//     window closes, ten minutes of event time (the grace period) after its
//     end, so the time from an order to "its" output is the input's event
//     time span, not the processor's latency. The e2e cells are "-".

// topologyAggregate is the topology these runs are for.
const topologyAggregate = "aggregate"

// aggregateSeed makes every benchmark's aggregate input the same for the
// same number of records.
const aggregateSeed = 14

// aggregateWindow and aggregateGrace are the window of
// aggcheck.Config, which the Kafka Streams peer is given as flags
// (its defaults are the same; the flags keep them from drifting apart
// silently). TestAggregateWindowIsVerifysConfig holds them to it.
const (
	aggregateWindow = 5 * time.Second
	aggregateGrace  = 10 * time.Minute
)

// aggregatePoll is how often an aggregate run asks the broker whether its
// group has caught up: the resolution of its drain time.
const aggregatePoll = 25 * time.Millisecond

// writeAggregateConfig writes aggcheck.Config into dir, for the eos
// workers' --config (or topologies.Options.Config in process), and the same
// with preaggregate: false, for the eos-nopreagg mode.
func writeAggregateConfig(dir string) (with, without string, err error) {
	with, without = filepath.Join(dir, "aggregate.yaml"), filepath.Join(dir, "aggregate-nopreagg.yaml")
	for _, f := range []struct{ path, text string }{
		{with, aggcheck.Config},
		{without, strings.TrimRight(aggcheck.Config, "\n") + "\npreaggregate: false\n"},
	} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			return "", "", fmt.Errorf("bench: writing the aggregate configuration: %w", err)
		}
	}
	return with, without, nil
}

// produceAggregateInput writes the aggregate backlog to topic, once for
// every run.
func (b *bencher) produceAggregateInput(ctx context.Context, topic string) error {
	if err := b.createTopic(ctx, topic, false); err != nil {
		return err
	}
	in := aggcheck.NewInput(topic, int(b.cfg.records(0)), aggregateSeed)
	var bytes int
	for _, r := range in.Records {
		bytes += len(r.Value)
	}
	b.aggInput, b.aggMeanBytes = in, float64(bytes)/float64(len(in.Records))
	start := time.Now()
	total := int64(len(in.Records))
	if b.cfg.Progress != nil {
		b.cfg.Progress(Progress{Phase: "input", Done: 0, Total: total, Runs: b.totalRuns()})
	}
	if err := in.Produce(ctx, b.adm, 0); err != nil {
		return fmt.Errorf("bench: producing the aggregate input: %w", err)
	}
	if b.cfg.Progress != nil {
		b.cfg.Progress(Progress{Phase: "input", Done: total, Total: total, Elapsed: time.Since(start), Runs: b.totalRuns()})
	}
	return nil
}

// records returns the input records of a run with record size size: for
// the aggregate topology every record of the backlog (orders, late records
// and poison pills; not the heartbeats), otherwise Config.records.
func (b *bencher) records(size int) int64 {
	if b.aggInput != nil {
		return int64(len(b.aggInput.Records))
	}
	return b.cfg.records(size)
}

// aggregateDrain waits until job's group has consumed the whole backlog
// and everything its first stage wrote to the repartition topic, and
// returns when it saw that. A copier failure (from log) ends the wait at
// once.
func (b *bencher) aggregateDrain(ctx context.Context, job copyJob, log *runLog, progress func(int64)) (time.Time, error) {
	adm := kadm.NewClient(b.adm)
	var failed error
	// The repartition topic appears with the first stage's first
	// transaction: until then the wait cannot list it, and the group is
	// not caught up anyway.
	err := committed.WaitCaughtUp(ctx, b.opts, committed.Wait{
		Group: job.app, Topics: []string{job.inputs[0], job.app + "-windows-repartition"},
		Within: b.cfg.RunTimeout, Poll: aggregatePoll,
		Each: func() error {
			log.mu.Lock()
			fail := log.failure
			log.mu.Unlock()
			if fail != nil {
				failed = fmt.Errorf("a copier failed: %w", fail)
				return failed
			}
			if progress != nil {
				n, _ := committedOn(ctx, adm, job.app, job.inputs[0]) // 0 if unknown: only the bar
				progress(n)
			}
			return nil
		},
	})
	switch {
	case failed != nil:
		return time.Time{}, failed
	case err != nil:
		return time.Time{}, fmt.Errorf("the group had not consumed the backlog and the repartition topic: %w", err)
	}
	return time.Now(), nil
}

// aggregateStats are the drain figures of an aggregate run: throughput is
// the backlog's records over the time from the first transaction's first
// record (for Kafka Streams: RUNNING) to the moment the group was seen
// caught up, and the commit figures are those of the commits up to then.
// The drain so includes the last transaction, idle until its commit
// interval ran out, and the poll's resolution: unlike a copy's, an
// aggregate's commits do not say how many backlog records they consumed,
// so the tail cannot be left out.
func aggregateStats(commits []pipeline.Event, records int64, done time.Time) drainStats {
	var cs []pipeline.Event
	var consumed int64
	for _, c := range commits {
		if !c.Time.After(done) {
			cs = append(cs, c)
			consumed += int64(c.Consumed)
		}
	}
	if len(cs) == 0 {
		return drainStats{}
	}
	st := drain(cs, consumed)
	begin := slices.MinFunc(cs, func(a, b pipeline.Event) int {
		return a.Time.Add(-a.Duration).Compare(b.Time.Add(-b.Duration))
	})
	st.window = done.Sub(begin.Time.Add(-begin.Duration))
	st.rps, st.txnPerSec = 0, 0
	if st.window > 0 {
		st.rps = float64(records) / st.window.Seconds()
		st.txnPerSec = float64(len(cs)) / st.window.Seconds()
	}
	st.commits = len(cs)
	st.shortWindow = len(cs) < 3
	return st
}

// finishAggregate closes every window with the heartbeats, waits until the
// group has consumed them and their results are committed, and judges the
// output and the dead letters into res. A judgement that is not exact is
// an error: both modes are exactly-once.
func (b *bencher) finishAggregate(ctx context.Context, res *RunResult, job copyJob, log *runLog) error {
	hb := b.aggInput.Heartbeats(int(b.cfg.Partitions))
	for _, r := range hb {
		r.Topic = job.inputs[1]
	}
	if err := b.adm.ProduceSync(ctx, hb...).FirstErr(); err != nil {
		return fmt.Errorf("producing the heartbeats that close the windows: %w", err)
	}
	hbJob := job
	hbJob.inputs = []string{job.inputs[1]}
	if _, err := b.aggregateDrain(ctx, hbJob, log, nil); err != nil {
		return fmt.Errorf("after the heartbeats: %w", err)
	}
	for _, t := range []string{job.output, job.dlq} {
		if err := b.awaitStable(ctx, t); err != nil {
			return err
		}
	}
	rep, err := aggcheck.Judge(ctx, b.opts, aggcheck.Topics{Input: job.inputs[0], Output: job.output,
		DeadLetters: job.dlq, Timeout: b.cfg.RunTimeout})
	if err != nil {
		return fmt.Errorf("judging the aggregate: %w", err)
	}
	res.Aggregate = rep
	res.Verified = rep.OK()
	res.Duplicates = rep.Windows.Twice + rep.DeadLetters.Twice
	res.Missing = rep.Windows.Missing + rep.DeadLetters.Missing
	if !rep.OK() {
		return fmt.Errorf("the %s output is not every window and dead letter exactly once: %s", res.Mode, rep.Summary())
	}
	return nil
}

// deleteRunTopics deletes every topic of a run: the ones the bench created
// and the internal ones the copiers did (repartition, changelogs), all
// named <run>-...
func (b *bencher) deleteRunTopics(ctx context.Context, stem string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(b.adm).ListTopics(ctx)
	if err != nil {
		b.cfg.Logger.Warn("listing a run's topics to delete them failed", "run", stem, "err", err)
		return
	}
	var mine []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, stem+"-") {
			mine = append(mine, t)
		}
	}
	if len(mine) > 0 {
		b.deleteTopics(mine...)
	}
}
