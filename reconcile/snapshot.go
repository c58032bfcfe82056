package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/eosctl/eos"
)

// querier is what a run reads the database through: the snapshot
// transaction (PostgreSQL, MySQL), or the pool (SQLite).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// snapshot opens the read-only REPEATABLE READ transaction every read of a
// run goes through, so that the sink's offsets and the table are read as of
// one instant: the sink commits its rows and its offsets in one
// transaction, so every row in this snapshot comes from a record below the
// offsets it shows, and a row the sink commits during the run (from a
// record beyond them) is not seen as an extra. The snapshot is taken by the
// first read, the offsets'. SQLite (demos only) reads without one: its
// write lock would stop the sink, and a repair, for the whole run.
func (s *store) snapshot(ctx context.Context) (querier, func(), error) {
	if s.db.Dialect() == "sqlite" {
		return s.db, func() {}, nil
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: opening the read snapshot: %w", err)
	}
	if s.db.Dialect() == "postgres" {
		// The snapshot stays idle while the topic is read (minutes for
		// millions of records): a server-wide
		// idle_in_transaction_session_timeout must not end it. SET takes
		// no snapshot.
		if _, err := tx.ExecContext(ctx, "SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
			_ = tx.Rollback()
			return nil, nil, fmt.Errorf("reconcile: opening the read snapshot: %w", err)
		}
	}
	return tx, func() { _ = tx.Rollback() }, nil
}

// sinkOffsets reads the next offset the sink of cfg.Group has committed for
// each partition of the topic, from the sink's offsets table (the sink's
// table and column names: consumer_group, topic, kafka_partition,
// next_offset). A group with no row for the topic is a configuration error:
// nothing could be judged, and a mistyped group must not read as "all
// pending".
func (s *store) sinkOffsets(ctx context.Context, q querier) (map[int32]int64, error) {
	out, err := partitionOffsets(ctx, q, fmt.Sprintf("SELECT kafka_partition, next_offset FROM %s WHERE consumer_group = %s AND topic = %s",
		s.d.Quote(s.cfg.OffsetsTable), s.d.Ph(1), s.d.Ph(2)), s.cfg.Group, s.cfg.Topic)
	if err != nil && (strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "doesn't exist") || strings.Contains(err.Error(), "no such table")) {
		return nil, eos.BadConfig("reconcile.Config", "OffsetsTable %s: the sink's offsets table is not in this database: %w", s.cfg.OffsetsTable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the sink's offsets from %s: %w", s.cfg.OffsetsTable, err)
	}
	if len(out) == 0 {
		return nil, eos.BadConfig("reconcile.Config", "Group: the sink's offsets table %s has no offsets of group %q for topic %q (is Group the sink's consumer group, and has it committed once?)",
			s.cfg.OffsetsTable, s.cfg.Group, s.cfg.Topic)
	}
	return out, nil
}

// keyText is the SQL of the key column as text, in the select list only:
// a look-up compares the column itself, so that its index is used.
func (s *store) keyText() string {
	k := s.d.Quote(s.cfg.Mapping.KeyColumn)
	switch s.db.Dialect() {
	case "postgres":
		return k + "::text"
	case "mysql":
		return "CAST(" + k + " AS CHAR)"
	}
	return "CAST(" + k + " AS TEXT)"
}

// textKeys reports whether the key column holds text, from the catalog.
// MySQL compares a text column with a number as numbers, which cannot use
// the column's index, so the look-up then passes keys as text; PostgreSQL
// types each parameter as the column, so it needs nothing.
func (s *store) textKeys(ctx context.Context) (bool, error) {
	if s.db.Dialect() != "mysql" {
		return false, nil
	}
	var typ string
	err := s.db.QueryRowContext(ctx, "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?",
		s.cfg.Mapping.Table, s.cfg.Mapping.KeyColumn).Scan(&typ)
	if err != nil {
		return false, eos.BadConfig("reconcile.Config", "Mapping: key column %s.%s: %w", s.cfg.Mapping.Table, s.cfg.Mapping.KeyColumn, err)
	}
	switch strings.ToLower(typ) {
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		return true, nil
	}
	return false, nil
}

// lookup reads the rows of keys (at most a few thousand) with WHERE key IN
// (...), the keys in the column's own type, and calls fn with each row's
// key as text and its mapped columns' values.
func (s *store) lookup(ctx context.Context, q querier, keys []any, fn func(key string, vals []any)) error {
	m := s.cfg.Mapping
	cols := make([]string, len(m.Columns))
	for i, c := range m.Columns {
		cols[i] = s.d.Quote(c.Name)
	}
	phs := make([]string, len(keys))
	for i := range keys {
		phs[i] = s.d.Ph(i + 1)
	}
	sel := s.keyText()
	if len(cols) > 0 {
		sel += ", " + strings.Join(cols, ", ")
	}
	rows, err := q.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s IN (%s)", sel, s.d.Quote(m.Table), s.d.Quote(m.KeyColumn), strings.Join(phs, ", ")), keys...)
	if err != nil {
		return fmt.Errorf("reading table %s: %w", m.Table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols)+1)
		ptrs[0] = &key
		for i := range vals {
			ptrs[i+1] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		fn(key, vals)
	}
	return rows.Err()
}

// tableKeys streams every key of the table, as text.
func (s *store) tableKeys(ctx context.Context, q querier, fn func(string) error) error {
	m := s.cfg.Mapping
	rows, err := q.QueryContext(ctx, fmt.Sprintf("SELECT %s FROM %s", s.keyText(), s.d.Quote(m.Table)))
	if err != nil {
		return fmt.Errorf("reading table %s: %w", m.Table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
	}
	return rows.Err()
}
