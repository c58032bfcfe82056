package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/eosctl/eos/internal/rangeread"
	"github.com/eosctl/eos/verify"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// judge verifies the output under read_committed, counts what a
// read_uncommitted reader would see, and states the verdict.
func (r *run) judge(ctx context.Context) error {
	rep, err := verify.Run(ctx, r.opts, verify.Config{Input: r.rep.Input, Output: r.rep.Output, Timeout: time.Minute})
	if err != nil {
		return err
	}
	r.rep.Verify = rep
	if r.rep.LogRecords, err = countLog(ctx, r.cl, r.opts, r.rep.Output); err != nil {
		return err
	}
	hidden := r.rep.LogRecords - rep.OutputRecords
	switch r.cfg.Scenario {
	case ScenarioUnsafe:
		r.rep.OK = rep.Duplicates > 0
		r.rep.Verdict = fmt.Sprintf("UNSAFE, as expected: %d duplicates of %d input records (e.g. keys %v): what A wrote after its last offset commit, B wrote again, and both copies are visible; the group fence (FENCED_INSTANCE_ID) stopped A only after the fact, since an idempotent producer cannot be fenced",
			rep.Duplicates, rep.InputRecords, rep.DuplicateExamples)
		if !r.rep.OK {
			r.rep.Verdict = "the unsafe copier produced no duplicates this time: the demonstration did not demonstrate anything; run it again"
		}
	default:
		r.rep.OK = rep.OK() && (r.cfg.Scenario != ScenarioZombie || r.rep.ZombieExit == 3)
		r.rep.Verdict = fmt.Sprintf("EXACTLY ONCE: %d input records, %d in the output under read_committed, %d duplicates, %d missing; %d aborted records sit in the log, visible only to read_uncommitted readers",
			rep.InputRecords, rep.OutputRecords, rep.Duplicates, rep.Missing, hidden)
		if !r.rep.OK {
			r.rep.Verdict = "FAILED: " + rep.Summary()
			if r.cfg.Scenario == ScenarioZombie && r.rep.ZombieExit != 3 {
				r.rep.Verdict += fmt.Sprintf("; the zombie exited %d, not 3 (fenced)", r.rep.ZombieExit)
			}
		}
	}
	r.step("verify", 0, 0, "%s", r.rep.Verdict)
	return nil
}

// countLog counts the data records in topic from its log start to its high
// watermark as a read_uncommitted consumer sees them: committed and aborted
// alike.
func countLog(ctx context.Context, cl *kgo.Client, opts []kgo.Opt, topic string) (int64, error) {
	ranges, err := rangeread.Whole(ctx, kadm.NewClient(cl), topic, true)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var n int64
	if err := rangeread.Read(ctx, opts, ranges, rangeread.Options{Uncommitted: true}, func(*kgo.Record) { n++ }); err != nil {
		return 0, fmt.Errorf("reading %s read_uncommitted: %w", topic, err)
	}
	return n, nil
}
