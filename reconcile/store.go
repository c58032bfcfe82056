package reconcile

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/eosctl/eos/internal/sqldialect"
	"github.com/eosctl/eos/sink"
)

// store is the run's access to the database: the table compared, and the
// reconciler's own state and report tables.
type store struct {
	db  *sink.DB
	d   *sqldialect.Dialect // quoting and placeholders
	cfg Config
}

func (s *store) create(ctx context.Context) error {
	text, ts := "TEXT", "TIMESTAMP(6)"
	if s.db.Dialect() == "mysql" {
		text = "VARCHAR(255)"
	}
	for _, q := range []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (name %s NOT NULL, topic %s NOT NULL, kafka_partition INTEGER NOT NULL,
			watermark BIGINT NOT NULL, PRIMARY KEY (name, topic, kafka_partition))`, s.d.Quote(s.cfg.StateTable), text, text),
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (name %s NOT NULL, run_started %s NOT NULL, kind %s NOT NULL, record_key TEXT NOT NULL,
			kafka_partition INTEGER, kafka_offset BIGINT, column_name TEXT, topic_value TEXT, table_value TEXT)`, s.d.Quote(s.cfg.ReportTable), text, ts, text),
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the reconciler's tables: %w", err)
		}
	}
	return nil
}

// watermarks reads the stored watermark of each partition.
func (s *store) watermarks(ctx context.Context) (map[int32]int64, error) {
	return partitionOffsets(ctx, s.db, fmt.Sprintf("SELECT kafka_partition, watermark FROM %s WHERE name = %s AND topic = %s",
		s.d.Quote(s.cfg.StateTable), s.d.Ph(1), s.d.Ph(2)), s.cfg.Name, s.cfg.Topic)
}

// partitionOffsets reads (partition, offset) rows into a map.
func partitionOffsets(ctx context.Context, q querier, query string, args ...any) (map[int32]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var o int64
		if err := rows.Scan(&p, &o); err != nil {
			return nil, err
		}
		out[p] = o
	}
	return out, rows.Err()
}

// save stores the watermark and the findings, in one transaction.
func (s *store) save(ctx context.Context, rep *Report) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	st := s.d.Quote(s.cfg.StateTable)
	for _, r := range rep.Ranges {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE name = %s AND topic = %s AND kafka_partition = %s", st, s.d.Ph(1), s.d.Ph(2), s.d.Ph(3)),
			s.cfg.Name, s.cfg.Topic, r.Partition); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (name, topic, kafka_partition, watermark) VALUES (%s, %s, %s, %s)", st, s.d.Ph(1), s.d.Ph(2), s.d.Ph(3), s.d.Ph(4)),
			s.cfg.Name, s.cfg.Topic, r.Partition, r.End); err != nil {
			return err
		}
	}
	ins := fmt.Sprintf("INSERT INTO %s (name, run_started, kind, record_key, kafka_partition, kafka_offset, column_name, topic_value, table_value) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
		s.d.Quote(s.cfg.ReportTable), s.d.Ph(1), s.d.Ph(2), s.d.Ph(3), s.d.Ph(4), s.d.Ph(5), s.d.Ph(6), s.d.Ph(7), s.d.Ph(8), s.d.Ph(9))
	for _, fs := range [][]Finding{rep.Missing, rep.Changed, rep.Extra} {
		for _, f := range fs {
			if _, err := tx.ExecContext(ctx, ins, s.cfg.Name, rep.Started, f.Kind, f.Key, nullInt(f.Kind != "extra", int64(f.Partition)),
				nullInt(f.Kind != "extra", f.Offset), nullStr(f.Column), nullStr(f.Topic), nullStr(f.Table)); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}

func nullInt(ok bool, v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: ok} }
func nullStr(s string) sql.NullString        { return sql.NullString{String: s, Valid: s != ""} }
