package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// tp is a topic partition.
type tp struct {
	topic     string
	partition int32
}

// noRow is the stored offset of a partition the database has no row for:
// the sink starts it at the earliest offset.
const noRow = -1

// errConflict: the offsets in the database are not where this process
// resumed from; another process (or this one, in a commit whose outcome was
// lost) committed the range.
var errConflict = errors.New("the stored offsets moved: another process committed this range")

// StoredOffsets reads the next offsets the sink of group has stored in the
// database, by topic and partition.
func StoredOffsets(ctx context.Context, db *DB, table, group string) (map[string]map[int32]int64, error) {
	d := db.d
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT topic, kafka_partition, next_offset FROM %s WHERE consumer_group = %s",
		d.Quote(table), d.Ph(1)), group)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[int32]int64{}
	for rows.Next() {
		var topic string
		var p int32
		var next int64
		if err := rows.Scan(&topic, &p, &next); err != nil {
			return nil, err
		}
		if out[topic] == nil {
			out[topic] = map[int32]int64{}
		}
		out[topic][p] = next
	}
	return out, rows.Err()
}

// advance moves p's stored offset from from to next in tx, compare-and-set:
// it returns errConflict when the stored offset is not from. It runs before
// the rows are written, so the row lock it takes orders two processes that
// race for the same range, and the second finds the offset moved.
func advance(ctx context.Context, tx *sql.Tx, d *dialect, table, group string, p tp, from, next int64) error {
	if from == noRow {
		_, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (consumer_group, topic, kafka_partition, next_offset) VALUES (%s, %s, %s, %s)",
			d.Quote(table), d.Ph(1), d.Ph(2), d.Ph(3), d.Ph(4)), group, p.topic, p.partition, next)
		if err != nil && isUniqueViolation(err) {
			return errConflict
		}
		return err
	}
	res, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET next_offset = %s, updated_at = %s WHERE consumer_group = %s AND topic = %s AND kafka_partition = %s AND next_offset = %s",
		d.Quote(table), d.Ph(1), d.now(), d.Ph(2), d.Ph(3), d.Ph(4), d.Ph(5)), next, group, p.topic, p.partition, from)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return errConflict
	}
	return nil
}
