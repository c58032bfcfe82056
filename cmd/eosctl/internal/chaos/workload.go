package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eosctl/eos/internal/admin"
	"github.com/eosctl/eos/internal/aggcheck"
	"github.com/eosctl/eos/internal/committed"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A workload is what a scenario's workers do while its faults run, and how
// the outcome is judged. The faults are the same for every workload, so a
// fault drill is written once and run against a stateless copy and against
// a stateful topology alike.
type workload interface {
	// topology is what `eosctl run` runs: the topology and its flags.
	topology(h *harness) ([]string, error)
	// produce writes n input records to in in the background, at rate
	// records/s or, with rate 0, as fast as the broker takes them.
	produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error)
	// watch starts the read_committed readers that run during the faults.
	watch(ctx context.Context, h *harness, app, out string) error
	// finish waits until the workers have consumed the input, stops them,
	// and judges the output into res.
	finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error
	// close stops the readers.
	close()
}

// newWorkload returns the workload of a topology: "passthrough",
// "aggregate", "sessions" (the aggregate topology with session windows),
// "dedup" or "etl-join".
func newWorkload(topology string) workload {
	switch topology {
	case topologyAggregate:
		return &aggregating{config: aggcheck.Config, newInput: aggcheck.NewInput, judge: aggcheck.Judge}
	case topologySessions:
		return &aggregating{config: aggcheck.SessionConfig, newInput: aggcheck.NewSessionInput, judge: aggcheck.JudgeSessions}
	case topologyDedup:
		return &deduplicating{}
	case topologyJoin:
		return &joining{}
	case topologyAvro:
		return &avroCopying{}
	case topologyAvroAggregate:
		return newAvroAggregating()
	case topologyJSONSchema:
		return &jsonSchemaCopying{}
	case topologyProtobuf:
		return &protoCopying{}
	case topologyProtobufAggregate:
		return newProtoAggregating()
	}
	return &copying{}
}

// Topologies the workers of a scenario can run.
const (
	topologyPassthrough = "passthrough"
	topologyAggregate   = "aggregate"
	// topologySessions is the aggregate topology with session windows.
	topologySessions = "sessions"
)

// copying is the passthrough copy, judged by verify.Run: every input key
// once in the output, in input order per partition.
type copying struct {
	tail *verify.Tail
}

func (*copying) topology(*harness) ([]string, error) { return []string{topologyPassthrough}, nil }

func (*copying) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	return h.Produce(ctx, in, n, partitions, rate)
}

func (c *copying) watch(ctx context.Context, h *harness, _, out string) (err error) {
	c.tail, err = verify.NewTail(ctx, h.Opts, out)
	return err
}

func (c *copying) finish(ctx context.Context, h *harness, res *Result, app, in, out string, _ int32) error {
	if err := h.WaitCaughtUp(ctx, committed.Wait{Group: app, Topics: []string{in}, Within: catchUp()}); err != nil {
		return err
	}
	h.Stop(20 * time.Second)
	return h.judge(ctx, res, in, out, c.tail)
}

func (c *copying) close() {
	if c.tail != nil {
		c.tail.Stop()
	}
}

// aggregating runs the aggregate topology with its default repartition step
// (so state, changelog and repartition topics are all in play) on an input
// of regular, late and poison records, judged against a reference computed
// in memory from the input (aggcheck.Judge): every window once with
// its exact count, sum, min, max and avg, every dead letter once. Two
// concurrent readers watch the results (by window) and the dead letters (by
// source record).
type aggregating struct {
	// The configuration, its input and its judge: aggcheck's time windows
	// or its sessions.
	config      string
	newInput    func(topic string, n int, seed uint64) *aggcheck.Input
	judge       func(context.Context, []kgo.Opt, aggcheck.Topics) (*aggcheck.Report, error)
	input       *aggcheck.Input
	results     *verify.Tail
	deadLetters *verify.Tail
}

// aggregateSeed makes every run's input the same for the same size.
const aggregateSeed = 7

func (a *aggregating) topology(h *harness) ([]string, error) {
	cfg := filepath.Join(h.dir, "aggregate.yaml")
	if err := os.WriteFile(cfg, []byte(a.config), 0o644); err != nil {
		return nil, fmt.Errorf("writing the aggregate configuration: %w", err)
	}
	return []string{topologyAggregate, "--config", cfg}, nil
}

// produce writes half of n regular records, with their late records and
// poison pills, at half the rate, so that the input lasts as long as a
// copy's, which the faults are timed by. Each record passes through the
// workers twice (the input, then the repartition topic) and changes state
// that is written to the changelog, in the same transaction: under the
// broker bounce's slowed transactions, a stateful run of n records takes
// three times as long as a copy of n.
func (a *aggregating) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	if n/2 > aggcheck.MaxRecords {
		return nil, fmt.Errorf("%d records: a stateful scenario takes at most %d (twice aggcheck.MaxRecords)", n, 2*aggcheck.MaxRecords)
	}
	if _, _, err := admin.EnsureTopic(ctx, h.Client, in, partitions, nil); err != nil {
		return nil, err
	}
	a.input = a.newInput(in, int(n/2), aggregateSeed)
	done := make(chan error, 1)
	go func() { done <- a.input.Produce(ctx, h.Client, (rate+1)/2) }()
	return done, nil
}

func (a *aggregating) watch(ctx context.Context, h *harness, app, out string) (err error) {
	if a.results, err = verify.NewTailBy(ctx, h.Opts, out, aggcheck.WindowID); err != nil {
		return err
	}
	a.deadLetters, err = verify.NewTailBy(ctx, h.Opts, deadLetterTopic(app), aggcheck.DeadLetterSourceID)
	return err
}

// deadLetterTopic is where `eosctl run` sends app's dead letters by default.
func deadLetterTopic(app string) string { return app + "-dlq" }

// finish drains the input and the repartition topic, closes every window
// with heartbeats, drains again, stops the workers and judges.
func (a *aggregating) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	// The outputs are waited on too: every window closes only when the
	// heartbeats reach it (the grace period outlasts the input), so the
	// last transactions of stage two write most of the results, and on
	// Apache Kafka their markers can reach the output after the group's
	// offsets show them committed (a CI run judged 1,080 of 1,600
	// windows in that gap).
	drained := func() error {
		return h.WaitCaughtUp(ctx, committed.Wait{Group: app, Topics: []string{in, app + "-windows-repartition"}, Outputs: []string{out, deadLetterTopic(app)}, Within: catchUp()})
	}
	if err := drained(); err != nil {
		return err
	}
	if err := a.input.ProduceHeartbeats(ctx, h.Client, int(partitions)); err != nil {
		return err
	}
	if err := drained(); err != nil {
		return fmt.Errorf("after the heartbeats: %w", err)
	}
	h.Stop(20 * time.Second)
	rep, err := a.judge(ctx, h.Opts, aggcheck.Topics{Input: in, Output: out, DeadLetters: deadLetterTopic(app), Timeout: 2 * time.Minute})
	if err != nil {
		return err
	}
	res.Aggregate, res.Records = rep, rep.InputRecords
	res.Tail, res.DeadLetterTail = readToEnd(ctx, res, a.results), readToEnd(ctx, res, a.deadLetters)
	return nil
}

// readToEnd lets a concurrent reader read to the end of what was committed,
// stops it and returns what it saw; a reader that could not get there
// leaves a note, since it judged less than the whole output.
func readToEnd(ctx context.Context, res *Result, t *verify.Tail) *verify.TailReport {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := t.WaitEnd(wctx); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	r := t.Stop()
	return &r
}

func (a *aggregating) close() {
	for _, t := range []*verify.Tail{a.results, a.deadLetters} {
		if t != nil {
			t.Stop()
		}
	}
}
