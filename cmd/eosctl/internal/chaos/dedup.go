package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/datagen"
)

// topologyDedup is the dedup topology's workload: see deduplicating.
const topologyDedup = "dedup"

// dedupConfig de-duplicates datagen records by seq, their key: every copy
// of a seq is in one partition. Retention outlasts any run.
const dedupConfig = "topology: dedup\nkey: seq\nretention: 24h\n"

// deduplicating runs the dedup topology on an input in which every record
// is written twice (datagen's n/2 records, then the same n/2 again, as a
// producer re-sending everything would), judged by verify like a copy:
// every seq once in the output, in input order per partition, nothing
// else, and the concurrent read_committed reader sees no seq twice. The
// input's second copies are verify's InputDuplicates; a run without them
// proved nothing and fails.
type deduplicating struct {
	copying
	half int64
}

func (*deduplicating) topology(h *harness) ([]string, error) {
	cfg := filepath.Join(h.dir, "dedup.yaml")
	if err := os.WriteFile(cfg, []byte(dedupConfig), 0o644); err != nil {
		return nil, fmt.Errorf("writing the dedup configuration: %w", err)
	}
	return []string{topologyDedup, "--config", cfg}, nil
}

func (d *deduplicating) produce(ctx context.Context, h *harness, in string, partitions int32, n int64, rate int) (<-chan error, error) {
	d.half = n / 2
	done := make(chan error, 1)
	go func() {
		for i := range 2 {
			ch, err := h.ProduceConfig(ctx, datagen.Config{Topic: in, Count: d.half, Size: 100, Partitions: partitions, Rate: rate, Again: i == 1})
			if err == nil {
				err = <-ch
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	return done, nil
}

func (d *deduplicating) finish(ctx context.Context, h *harness, res *Result, app, in, out string, partitions int32) error {
	if err := d.copying.finish(ctx, h, res, app, in, out, partitions); err != nil {
		return err
	}
	if got := res.Verify.InputDuplicates; got != d.half {
		return fmt.Errorf("the input repeats %d records, want %d: the drill did not test de-duplication", got, d.half)
	}
	return nil
}

// dedupKills SIGKILLs the dedup topology's two workers mid-transaction at
// random; each restart restores the seen keys from the changelog before it
// processes a record.
func dedupKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "dedup")
}

// sessionKills SIGKILLs the workers of the aggregate topology with session
// windows mid-transaction at random; each restart restores the open
// sessions from the changelog before it processes a record.
func sessionKills(ctx context.Context, h *harness, sz Size, res *Result, w workload) error {
	return killsMidTransaction(ctx, h, sz, res, w, "sessions")
}

// killsMidTransaction runs app's two workers on the embedded broker and
// SIGKILLs one of them at random sz.Faults times, restarting it. Every kill
// must be followed by a commit (a recovery), or the drill ran after the
// input and proved nothing.
func killsMidTransaction(ctx context.Context, h *harness, sz Size, res *Result, w workload, app string) error {
	if err := h.inProcessBroker(ctx, broker.Config{}); err != nil {
		return err
	}
	res.Faults = fmt.Sprintf("%d SIGKILLs mid-transaction", sz.Faults)
	var kills []time.Time
	err := runWith(ctx, h, sz, res, w, app, 6, 2, nil, func() error {
		for range sz.Faults {
			time.Sleep(spread(sz, sz.Faults))
			if err := h.KillAndRestart(ctx, fmt.Sprintf("%s-%d", app, h.rng.IntN(2))); err != nil {
				return err
			}
			kills = append(kills, time.Now())
		}
		return nil
	})
	for _, at := range kills {
		res.Recovery = append(res.Recovery, h.Recoveries(at)...)
	}
	if err == nil && len(res.Recovery) < sz.Faults {
		err = fmt.Errorf("only %d worker commits followed the %d kills: the input was done before the faults, so they proved nothing", len(res.Recovery), sz.Faults)
	}
	return err
}
