package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// replaysSuffix names the table of done replays: OffsetsTable + it.
const replaysSuffix = "_replays"

// replaysDDL creates the table of the replays done, one row per group and
// replay id, beside the offsets table (whose columns it leaves alone).
func (d *dialect) replaysDDL(table string) string {
	text, ts := d.textAndTimestamp()
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	consumer_group %s NOT NULL,
	replay_id %s NOT NULL,
	replayed_at %s NOT NULL DEFAULT %s,
	PRIMARY KEY (consumer_group, replay_id))`, d.Quote(table), text, text, ts, d.now())
}

// replay deletes the group's stored offsets unless this replay id was done
// before, recording the id in the same transaction: a crash leaves either
// both (replayed, and a restart does not replay again) or neither (the
// restart replays).
func (s *Sink) replay(ctx context.Context) error {
	d, id, group := s.db.d, s.cfg.ReplayID, s.cfg.Group
	table := s.cfg.OffsetsTable + replaysSuffix
	onErr := func(err error, class string) { s.cfg.Metrics.dbError(class) }
	err := retry(ctx, s.cfg.Retry, onErr, func(ctx context.Context) error {
		_, err := s.db.ExecContext(ctx, d.replaysDDL(table))
		return err
	})
	if err != nil {
		return fmt.Errorf("Replay: creating table %s: %w", table, err)
	}
	var done string // as the database prints it: MySQL's driver gives no time.Time without parseTime
	var reset int64
	err = retry(ctx, s.cfg.Retry, onErr, func(ctx context.Context) error {
		done, reset = "", 0
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // a no-op after Commit
		_, err = tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (consumer_group, replay_id) VALUES (%s, %s)", d.Quote(table), d.Ph(1), d.Ph(2)), group, id)
		if err != nil && isUniqueViolation(err) {
			return s.db.QueryRowContext(ctx, fmt.Sprintf("SELECT replayed_at FROM %s WHERE consumer_group = %s AND replay_id = %s", d.Quote(table), d.Ph(1), d.Ph(2)), group, id).Scan(&done)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE consumer_group = %s", d.Quote(s.cfg.OffsetsTable), d.Ph(1)), group)
		if err != nil {
			return err
		}
		if reset, err = res.RowsAffected(); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("Replay %q: %w", id, err)
	}
	if done != "" {
		s.cfg.Logger.Info(fmt.Sprintf("replay %s of group %s was done at %s: NOT replaying again, resuming from the stored offsets (give a new replay id to replay again)", id, group, done),
			"replay_id", id, "group", group, "replayed_at", done)
		return nil
	}
	s.cfg.Logger.Info(fmt.Sprintf("replay %s of group %s: deleted the stored offsets of %d partitions; reading the topics again from the earliest offset", id, group, reset),
		"replay_id", id, "group", group, "partitions_reset", reset)
	return nil
}
