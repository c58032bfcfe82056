package sink

import (
	"context"
	"fmt"
	"strings"

	"github.com/eosctl/eos"
)

// uniqueIndex is one PRIMARY KEY or UNIQUE index of a table: its name and
// its columns in order ("(expression)" for an expression's part).
type uniqueIndex struct {
	name string
	cols []string
	// arbiter: PostgreSQL can name it in ON CONFLICT (cols): not
	// partial, not deferrable, valid.
	arbiter bool
}

func (u uniqueIndex) String() string { return u.name + " (" + strings.Join(u.cols, ", ") + ")" }

// isKey reports whether u makes exactly the key column unique.
func (u uniqueIndex) isKey(keyCol string) bool {
	return len(u.cols) == 1 && strings.EqualFold(u.cols[0], keyCol)
}

// uniqueIndexes reads the unique indexes of table. The sink needs them to
// tell a repeat of a key (absorbed) from a collision on another unique
// index (a row the database rejects: a dead letter), which a bare ON
// CONFLICT DO NOTHING or ON DUPLICATE KEY UPDATE cannot.
func uniqueIndexes(ctx context.Context, db *DB, table string) ([]uniqueIndex, error) {
	var q string
	switch db.d.Name {
	case "postgres":
		q = `SELECT i.relname, COALESCE(a.attname, '(expression)'),
	x.indpred IS NULL AND x.indimmediate AND x.indisvalid
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum AND k.attnum > 0
WHERE x.indrelid = to_regclass(quote_ident($1)) AND x.indisunique AND k.ord <= x.indnkeyatts
ORDER BY i.relname, k.ord`
	case "mysql":
		q = `SELECT INDEX_NAME, COALESCE(COLUMN_NAME, '(expression)'), 1
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND NON_UNIQUE = 0
ORDER BY INDEX_NAME, SEQ_IN_INDEX`
	default: // sqlite: an INTEGER PRIMARY KEY has no index of its own
		q = `SELECT il.name, ii.name, il.partial = 0 FROM pragma_index_list(?1) il JOIN pragma_index_info(il.name) ii
WHERE il."unique" = 1
UNION ALL SELECT 'PRIMARY KEY', name, 1 FROM pragma_table_info(?1) WHERE pk > 0 AND (SELECT COUNT(*) FROM pragma_table_info(?1) WHERE pk > 0) = 1`
	}
	rows, err := db.QueryContext(ctx, q, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uniqueIndex
	for rows.Next() {
		var name, col string
		var arbiter bool
		if err := rows.Scan(&name, &col, &arbiter); err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].name == name {
			out[n-1].cols = append(out[n-1].cols, col)
			out[n-1].arbiter = out[n-1].arbiter && arbiter
			continue
		}
		out = append(out, uniqueIndex{name: name, cols: []string{col}, arbiter: arbiter})
	}
	return out, rows.Err()
}

// conflictTarget decides, from the table's unique indexes, how the sink
// absorbs a repeated key (it sets s.keyUnique), and refuses what it cannot
// write safely:
//
//   - a unique index on exactly the key column: PostgreSQL and SQLite
//     write ON CONFLICT (key), so only a repeat of the key is absorbed and a
//     collision on any other unique index is an error, a dead letter;
//     MySQL's ON DUPLICATE KEY UPDATE cannot name its index, so a table
//     with another unique index is refused.
//   - none: a plain INSERT (the offsets compare-and-set is the only guard
//     against a repeat; a replay inserts again). Mode upsert needs the
//     unique key and is refused.
func (s *Sink) conflictTarget(ctx context.Context) error {
	m := s.cfg.Mapping
	var idx []uniqueIndex
	err := retry(ctx, s.cfg.Retry, func(err error, class string) { s.cfg.Metrics.dbError(class) }, func(ctx context.Context) error {
		var err error
		idx, err = uniqueIndexes(ctx, s.db, m.Table)
		return err
	})
	if err != nil {
		return fmt.Errorf("reading the unique indexes of table %s: %w", m.Table, err)
	}
	var others []string
	for _, u := range idx {
		if u.isKey(m.KeyColumn) && (u.arbiter || s.db.d.Name == "mysql") {
			s.keyUnique = true
		} else {
			others = append(others, u.String())
		}
	}
	if m.Mode == ModeTransition {
		return nil // UPDATEs only: a collision is an error, a dead letter
	}
	if m.Mode == ModeUpsert && !s.keyUnique {
		return eos.BadConfig("sink.Config", "Mapping: mode upsert needs a PRIMARY KEY or UNIQUE index on exactly key_column %s of table %s; it has none", m.KeyColumn, m.Table)
	}
	if s.db.d.Name == "mysql" && s.keyUnique && len(others) > 0 {
		return eos.BadConfig("sink.Config", "Mapping: table %s has unique index %s besides the key %s: MySQL's ON DUPLICATE KEY cannot tell which index a row collided on, so a collision on it would be absorbed as a repeat and the record lost; drop that index, or make %s the only unique key", m.Table, others[0], m.KeyColumn, m.KeyColumn)
	}
	return nil
}

// dbReason is the database's reason for rejecting a row, with its detail
// (PostgreSQL says which key value collided) when there is one.
func dbReason(err error) string {
	if d := pgDetail(err); d != "" {
		return err.Error() + ": " + d
	}
	return err.Error()
}
