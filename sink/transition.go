package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/eosctl/eos/pipeline"
)

// transitions applies ModeTransition rows one by one:
//
//	UPDATE table SET status = TO, cols... WHERE key = ? AND status = FROM
//
// No row changed means the transition was applied before (the row is at
// TO already: a repeat, absorbed) or is illegal (no row, or another
// status): the record is dead-lettered as "illegal-transition" with the
// status found.
func (s *Sink) transitions(ctx context.Context, tx *sql.Tx, good []*item, out *outcome) error {
	d, m := s.db.d, s.cfg.Mapping
	var set strings.Builder
	fmt.Fprintf(&set, "%s = %s", d.Quote(m.StatusColumn), d.Ph(1))
	for i, c := range m.Columns {
		fmt.Fprintf(&set, ", %s = %s", d.Quote(c.Name), d.Ph(i+2))
	}
	n := len(m.Columns) + 2
	update := fmt.Sprintf("UPDATE %s SET %s WHERE %s = %s AND %s = %s", d.Quote(m.Table), set.String(),
		d.Quote(m.KeyColumn), d.Ph(n), d.Quote(m.StatusColumn), d.Ph(n+1))
	current := fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", d.Quote(m.StatusColumn), d.Quote(m.Table), d.Quote(m.KeyColumn), d.Ph(1))
	for _, it := range good {
		args := append(append([]any{it.row.to}, it.row.vals...), it.row.key, it.row.from)
		var changed int64
		var status sql.NullString
		err := savepoint(ctx, tx, func() error {
			res, err := tx.ExecContext(ctx, update, args...)
			if err != nil {
				return err
			}
			if changed, err = res.RowsAffected(); err != nil || changed > 0 {
				return err
			}
			err = tx.QueryRowContext(ctx, current, it.row.key).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			return err
		})
		if err != nil {
			if rejected(it, err, out) {
				continue
			}
			return err
		}
		switch {
		case changed > 0:
			out.rows++
		case status.Valid && status.String == fmt.Sprint(it.row.to):
			out.dups++
		default:
			found := "no row"
			if status.Valid {
				found = fmt.Sprintf("status %q", status.String)
			}
			out.dead = append(out.dead, item{rec: it.rec, dead: &pipeline.DeadLetterError{Reason: "illegal-transition",
				Err: fmt.Errorf("%s %v: want status %v to move to %v, found %s", m.KeyColumn, it.row.key, it.row.from, it.row.to, found)}})
		}
	}
	return nil
}
