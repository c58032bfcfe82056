package sink

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// copyAll is PostgreSQL's fast path for insertAll: the rows go with the
// COPY protocol, in its text format, into a staging table (ensureStage),
// and
// one INSERT ... SELECT ... ON CONFLICT (key) moves them into the table,
// inside the batch's transaction, the same that advances the offsets. So
// it keeps every property of the multi-row INSERT: the offsets commit with
// the rows or not at all, a repeated key is absorbed (the first of a batch
// wins in insert mode, the last in upsert mode), and a row the table's
// constraints reject fails the statement, after which the batch is written
// again row by row and that record dead-lettered.
func (s *Sink) copyAll(ctx context.Context, conn *sql.Conn, tx *sql.Tx, good []*item, out *outcome) error {
	d, m := s.db.d, s.cfg.Mapping
	upsert := m.Mode == ModeUpsert
	n := len(good)
	switch {
	case upsert:
		good = lastPerKey(good)
	case s.keyUnique:
		good = firstPerKey(good)
	}
	if len(good) == 0 {
		return nil
	}
	stage := stageName(m.Table)
	var buf bytes.Buffer
	for _, it := range good {
		appendCopyValue(&buf, it.row.key)
		for _, v := range it.row.vals {
			buf.WriteByte('\t')
			appendCopyValue(&buf, v)
		}
		buf.WriteByte('\n')
	}
	copySQL := fmt.Sprintf("COPY %s (%s) FROM STDIN", d.Quote(stage), d.columnList(s.cols))
	err := conn.Raw(func(dc any) error {
		_, err := dc.(*stdlib.Conn).Conn().PgConn().CopyFrom(ctx, &buf, copySQL)
		return err
	})
	if err != nil {
		return copyErr(ctx, err)
	}
	res, err := tx.ExecContext(ctx, d.insertSelectSQL(m.Table, stage, s.cols, m.KeyColumn, upsert, s.keyUnique))
	if err != nil {
		return copyErr(ctx, err)
	}
	s.count(res, len(good), out)
	if !upsert {
		out.dups += n - len(good) // repeats within the batch
	}
	return nil
}

// copyMinRows is the smallest batch written by COPY. Measured on the
// 2-core machine of BENCHMARKS.md (PostgreSQL 15, fsync on), COPY with its
// staging table and INSERT ... SELECT was slower than one multi-row INSERT
// at 1,000 rows a batch (write stage, medians: 71,131 against 76,826
// rows/s) and faster at 5,000 (95,460 against 88,299): its extra statement
// and the staging table's truncation at commit cost more than binding the
// parameters saves, until batches are large.
const copyMinRows = 5000

// useCopy says whether a batch of n records goes by COPY.
func (s *Sink) useCopy(n int, oneByOne bool) bool {
	if s.db.d.Name != "postgres" || oneByOne || s.cfg.Mapping.Mode == ModeTransition {
		return false
	}
	switch s.cfg.PostgresWritePath {
	case "copy":
		return true
	case "insert":
		return false
	}
	return n >= copyMinRows // "auto"
}

// stageName is the staging table of table.
func stageName(table string) string { return "eos_stage_" + table }

// ensureStage creates the staging table on conn's session if this sink has
// not yet, outside any transaction (a rollback would drop it): a
// temporary table with the columns of the target, and no constraints, its
// rows deleted at every commit.
func (s *Sink) ensureStage(ctx context.Context, conn *sql.Conn) error {
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn().PgConn()
		if _, ok := s.staged.Load(pc); ok {
			return nil
		}
		d, m := s.db.d, s.cfg.Mapping
		q := fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s ON COMMIT DELETE ROWS AS SELECT %s FROM %s WITH NO DATA",
			d.Quote(stageName(m.Table)), d.columnList(s.cols), d.Quote(m.Table))
		if _, err := pc.Exec(ctx, q).ReadAll(); err != nil {
			return err
		}
		s.staged.Store(pc, true)
		return nil
	})
}

// appendCopyValue writes v in COPY's text format: the server parses it as
// the column's type, as it does a text parameter.
func appendCopyValue(b *bytes.Buffer, v any) {
	var tmp [32]byte
	switch x := v.(type) {
	case nil:
		b.WriteString(`\N`)
	case string:
		for i := 0; i < len(x); i++ {
			switch c := x[i]; c {
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteByte(c)
			}
		}
	case int:
		b.Write(strconv.AppendInt(tmp[:0], int64(x), 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.Write(strconv.AppendFloat(tmp[:0], x, 'g', -1, 64))
		}
	case bool:
		b.WriteString(strconv.FormatBool(x))
	default:
		appendCopyValue(b, fmt.Sprint(x))
	}
}

// copyErr sorts a failure of the COPY path: the database rejecting a row's
// data, or pgx unable to encode a value for its column's type (an error
// without a server code or a connection), mean some row cannot be written:
// errRowFailed, so the batch is written again row by row and that row
// dead-lettered. Anything else is returned as it is, to be retried.
func copyErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	var pe *pgconn.PgError
	c, label := classify(err)
	if c == permanent || (!errors.As(err, &pe) && label == "other") {
		return fmt.Errorf("%w: %w", errRowFailed, err)
	}
	return err
}

// firstPerKey keeps the first row of each key: insert mode's "first write
// wins" within one INSERT ... SELECT, whose order PostgreSQL does not
// promise.
func firstPerKey(items []*item) []*item {
	seen := make(map[any]struct{}, len(items))
	out := items[:0:0]
	for _, it := range items {
		if _, dup := seen[it.row.key]; !dup {
			seen[it.row.key] = struct{}{}
			out = append(out, it)
		}
	}
	return out
}
