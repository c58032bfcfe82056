package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/pipeline"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Under transactions v2 (KIP-890, on by default on new Kafka 4 clusters)
// the producer epoch moves at every commit, so a transactional.id uses up
// its 32,767 epochs after that many commits and the coordinator rotates it
// to a new producer id (Apache Kafka fixed a race there that left a
// transaction Ongoing, KAFKA-20090). A worker committing every 10ms crosses
// that point twice, with input flowing: no commit is lost or doubled, it
// neither takes the new producer id for a fence nor re-initialises, and
// no gap between two commits, the rotation's included, exceeds
// maxCommitStall.
//
// Reaching exhaustion by commits takes 10-20 minutes per crossing on a
// 2-core machine, so the epochs are first burned by re-initialising the
// worker's transactional.id with raw InitProducerId requests (each bumps
// the epoch by one, as a commit does), with no worker running, up to
// epochMargin short of the end; the worker then commits across it. Both
// brokers rotate the id (kfake does so in its epoch bump too), so the drill
// runs in both suites.
func TestEpochExhaustionRotatesProducerIDTwiceExactlyOnce(t *testing.T) {
	testenv.Long(t)
	const (
		app, in, out = "epoch", "epoch-in", "epoch-out"
		parts        = 3
		rate         = 500 // records/s, for the whole drill
		interval     = 10 * time.Millisecond
		// commits the worker makes before the rotation: enough to be in
		// its steady state when it crosses.
		epochMargin = 200
		// commits after the rotation before the phase ends.
		after = 100
	)
	e := newEnv(t, broker.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(cancel)
	e.ctx = ctx
	txnID, err := fencing.TransactionalID(app, "0")
	if err != nil {
		t.Fatal(err)
	}
	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	produced := e.produceAsyncCtx(pctx, in, math.MaxInt32, parts, rate)
	tl := e.tail(out)

	start := time.Now()
	var rotations []string
	var stalls []time.Duration
	for phase := 1; phase <= 2; phase++ {
		bt := time.Now()
		pid, epoch, bumps := burnEpochs(ctx, t, e.cl, txnID, math.MaxInt16-epochMargin)
		t.Logf("phase %d: burned %d epochs of %q in %s (%.0f/s): producer id %d at epoch %d",
			phase, bumps, txnID, time.Since(bt).Round(time.Millisecond), float64(bumps)/time.Since(bt).Seconds(), pid, epoch)
		first := len(e.Events())
		e.worker(app, 0, in, out, "--commit-interval", interval.String())
		var newPid int64
		e.eventually(3*time.Minute, fmt.Sprintf("phase %d: %d commits under a new producer id after producer id %d", phase, after, pid), func() (bool, string) {
			evs := commitEvents(e.Events()[first:])
			n := 0
			for _, ev := range evs {
				if ev.ProducerID != pid {
					newPid = ev.ProducerID
					n++
				}
			}
			last := "no commit yet"
			if len(evs) > 0 {
				l := evs[len(evs)-1]
				last = fmt.Sprintf("%d commits, last under producer id %d epoch %d", len(evs), l.ProducerID, l.Epoch)
			}
			return n >= after, last
		})
		e.stop()
		evs := e.Events()[first:]
		rot, err := judgeRotation(evs, pid)
		if err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
		t.Logf("phase %d: %s", phase, rot)
		rotations = append(rotations, fmt.Sprintf("%d/%d -> %d/%d", rot.oldPid, rot.oldEpoch, rot.newPid, rot.newEpoch))
		stalls = append(stalls, rot.rotationGap)
		if newPid == pid {
			t.Fatalf("phase %d: the producer id did not change", phase)
		}
	}
	stopProducing()
	if err := <-produced; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	n := e.endOffsets(in)
	last := e.worker(app, 0, in, out, "--commit-interval", interval.String())
	// If phase 2's worker copied everything, the group is caught up at
	// once: wait for this one to start before stopping it, or the SIGTERM
	// lands before eosctl handles signals and it exits 143.
	e.eventually(time.Minute, "the last worker started", func() (bool, string) {
		return last.Count(pipeline.EventStarted) > 0, fmt.Sprintf("last event %s", last.Last().Kind)
	})
	e.waitCaughtUp(app, 2*time.Minute, in)
	e.stop()
	if c := e.Count("reinit") + e.Count("fenced"); c != 0 {
		t.Fatalf("%d re-initialisations or fences: the worker took a producer-id rotation for a failure", c)
	}
	t.Logf("rotations %v, commit gap at each rotation %v, %d input records, drill took %s",
		rotations, stalls, n, time.Since(start).Round(time.Second))
	e.requireExactlyOnce(in, out, tl, n)
}

// rotation is what one phase of the exhaustion drill saw.
type rotation struct {
	oldPid, newPid     int64
	oldEpoch, newEpoch int16
	commits            int           // in the phase
	p50, p99, maxGap   time.Duration // between consecutive commits
	rotationGap        time.Duration // from the last commit under the old id to the first under the new
}

func (r rotation) String() string {
	return fmt.Sprintf("producer id %d epoch %d -> producer id %d epoch %d; %d commits, gap between commits p50 %s p99 %s max %s (bound %s); at the rotation %s",
		r.oldPid, r.oldEpoch, r.newPid, r.newEpoch, r.commits, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.maxGap.Round(time.Millisecond), maxCommitStall, r.rotationGap.Round(time.Millisecond))
}

// judgeRotation checks one phase's events: its commits run under producer
// id pid up to epoch 32,766 at most, then under one other id from a low
// epoch, with epochs rising by one a commit (nothing else bumped them),
// and no gap between commits (the rotation's included) over maxCommitStall.
func judgeRotation(evs []pipeline.Event, pid int64) (rotation, error) {
	var r rotation
	for _, ev := range evs {
		if ev.Kind == pipeline.EventFenced || ev.Kind == pipeline.EventReinit || ev.Kind == pipeline.EventAborted {
			return r, fmt.Errorf("a %s event (producer id %d epoch %d, %s): the worker took the rotation for a failure", ev.Kind, ev.ProducerID, ev.Epoch, ev.Err)
		}
	}
	cs := commitEvents(evs)
	r.commits = len(cs)
	r.oldPid = pid
	var gaps []time.Duration
	for i, ev := range cs {
		if i >= warmUpCommits {
			gaps = append(gaps, ev.Time.Sub(cs[i-1].Time))
		}
		if ev.ProducerID == pid {
			if r.newPid != 0 {
				return r, fmt.Errorf("commit %d is under the old producer id %d again after the rotation to %d", i, pid, r.newPid)
			}
			r.oldEpoch = ev.Epoch
			continue
		}
		if r.newPid == 0 {
			if i == 0 {
				return r, fmt.Errorf("the first commit is already under producer id %d, not %d", ev.ProducerID, pid)
			}
			r.newPid, r.newEpoch = ev.ProducerID, ev.Epoch
			r.rotationGap = ev.Time.Sub(cs[i-1].Time)
			continue
		}
		if ev.ProducerID != r.newPid {
			return r, fmt.Errorf("a second rotation, to producer id %d, in one phase", ev.ProducerID)
		}
	}
	if r.newPid == 0 {
		return r, fmt.Errorf("no rotation: %d commits, all under producer id %d, the last at epoch %d", len(cs), pid, r.oldEpoch)
	}
	if r.newEpoch > 10 {
		return r, fmt.Errorf("the first commit under the new producer id %d has epoch %d: the id was not fresh", r.newPid, r.newEpoch)
	}
	if r.oldEpoch < math.MaxInt16-2 {
		return r, fmt.Errorf("the rotation came at epoch %d, before exhaustion", r.oldEpoch)
	}
	if len(gaps) == 0 {
		return r, fmt.Errorf("only %d commits", len(cs))
	}
	sorted := slices.Clone(gaps)
	slices.Sort(sorted)
	r.p50, r.p99, r.maxGap = sorted[len(sorted)/2], sorted[len(sorted)*99/100], sorted[len(sorted)-1]
	if r.maxGap > maxCommitStall || r.rotationGap > maxCommitStall {
		return r, fmt.Errorf("stalled: a gap between commits over %s: %s", maxCommitStall, r)
	}
	return r, nil
}

func commitEvents(evs []pipeline.Event) []pipeline.Event {
	var cs []pipeline.Event
	for _, ev := range evs {
		if ev.Kind == pipeline.EventCommitted {
			cs = append(cs, ev)
		}
	}
	return cs
}

// burnEpochs re-initialises transactional.id id with raw InitProducerId
// requests until its epoch reaches target, and returns the producer id and
// epoch it ends at and how many bumps it made. No producer may be using id
// meanwhile: every request fences it.
func burnEpochs(ctx context.Context, t *testing.T, cl *kgo.Client, id string, target int16) (int64, int16, int) {
	t.Helper()
	bumps := 0
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = 60_000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
		case errors.Is(err, kerr.ConcurrentTransactions) || kerr.IsRetriable(err):
			// The coordinator is still aborting or completing what the
			// last worker left; try again.
			time.Sleep(10 * time.Millisecond)
			continue
		default:
			t.Fatalf("burning epochs of %q: InitProducerId after %d bumps: %v", id, bumps, err)
		}
		bumps++
		if resp.ProducerEpoch >= target {
			return resp.ProducerID, resp.ProducerEpoch, bumps
		}
	}
}
