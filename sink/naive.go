package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// RunNaive runs the sink eos replaces, kept as the counter-example for
// `eosctl demo sink` and the benchmark: it inserts each record as its own
// autocommitted row (no idempotent clause, no offsets in the database) and
// commits the offsets to Kafka after the rows. A crash between the inserts
// and the Kafka commit makes the next owner insert those rows again: it is
// at-least-once, and its duplicates are real rows. It uses cfg's DSN,
// Group, Topics, Mapping (insert mode), BatchSize (records per Kafka
// commit) and ClientOpts, and runs until ctx ends or an error.
func RunNaive(ctx context.Context, cfg Config) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	db, err := Open(cfg.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Ping(ctx, cfg.Retry); err != nil {
		return err
	}
	m := cfg.Mapping
	cols := append([]string{m.KeyColumn}, columnNames(m)...)
	quoted := make([]string, len(cols))
	phs := make([]string, len(cols))
	for i, c := range cols {
		quoted[i], phs[i] = db.d.Quote(c), db.d.Ph(i+1)
	}
	insert := fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", db.d.Quote(m.Table), strings.Join(quoted, ", "), strings.Join(phs, ", "))
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topics...),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(cfg.SessionTimeout), kgo.HeartbeatInterval(heartbeat(cfg.SessionTimeout)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, cfg.ClientOpts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fetches := cl.PollRecords(ctx, cfg.BatchSize)
		if ctx.Err() != nil {
			return nil
		}
		for _, r := range fetches.Records() {
			row, err := m.mapRecord(r)
			if err != nil {
				cfg.Logger.Warn("naive sink: skipping a record it cannot map", "error", err)
				continue
			}
			if _, err := db.ExecContext(ctx, insert, append([]any{row.key}, row.vals...)...); err != nil {
				return fmt.Errorf("naive sink: %w", err)
			}
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("naive sink: committing offsets: %w", err)
		}
	}
}
