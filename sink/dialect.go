package sink

import (
	"fmt"
	"strings"

	"github.com/eosctl/eos/internal/sqldialect"
)

// dialect is what differs between the databases the sink writes to: the
// shared answers of sqldialect, and the sink's own statements below.
type dialect struct{ *sqldialect.Dialect }

var (
	postgres = &dialect{sqldialect.Postgres}
	mysqlDB  = &dialect{sqldialect.MySQL}
	sqliteDB = &dialect{sqldialect.SQLite}
)

// now is the SQL for the current timestamp.
func (d *dialect) now() string {
	if d.Name == "sqlite" {
		return "CURRENT_TIMESTAMP"
	}
	return "CURRENT_TIMESTAMP(6)"
}

// insertSQL returns the INSERT of n rows into table with cols, and, when
// keyCol has a unique index of its own (keyUnique), the clause that makes
// it idempotent on keyCol: a row whose key exists is left as it is (insert
// mode) or overwritten with the new values (upsert mode). The clause names
// the key (ON CONFLICT (keyCol)), so a collision on any other unique index
// stays an error and its record a dead letter; MySQL cannot name it, and
// the sink refuses a MySQL table with another unique index (conflictTarget).
func (d *dialect) insertSQL(table string, cols []string, keyCol string, n int, upsert, keyUnique bool) string {
	var v strings.Builder
	v.WriteString("VALUES ")
	p := 1
	for r := range n {
		if r > 0 {
			v.WriteString(", ")
		}
		v.WriteByte('(')
		for i := range cols {
			if i > 0 {
				v.WriteString(", ")
			}
			v.WriteString(d.Ph(p))
			p++
		}
		v.WriteByte(')')
	}
	return d.insertFrom(table, cols, v.String(), keyCol, upsert, keyUnique)
}

// insertSelectSQL is insertSQL reading the rows from the staging table
// stage, which has the same column names (the COPY path).
func (d *dialect) insertSelectSQL(table, stage string, cols []string, keyCol string, upsert, keyUnique bool) string {
	return d.insertFrom(table, cols, "SELECT "+d.columnList(cols)+" FROM "+d.Quote(stage), keyCol, upsert, keyUnique)
}

func (d *dialect) columnList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = d.Quote(c)
	}
	return strings.Join(q, ", ")
}

// insertFrom is INSERT INTO table (cols) source, with the conflict clause
// insertSQL describes.
func (d *dialect) insertFrom(table string, cols []string, source, keyCol string, upsert, keyUnique bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (%s) %s", d.Quote(table), d.columnList(cols), source)
	k := d.Quote(keyCol)
	switch {
	case !keyUnique:
		// No clause: a plain INSERT (upsert needs the key: refused at start).
	case d.Name == "mysql" && !upsert:
		// Not INSERT IGNORE: that also turns NOT NULL, type and
		// foreign-key errors into warnings and writes a mangled row.
		fmt.Fprintf(&b, " ON DUPLICATE KEY UPDATE %s = %s", k, k)
	case d.Name == "mysql":
		b.WriteString(" ON DUPLICATE KEY UPDATE ")
		first := true
		for _, c := range cols {
			if c == keyCol {
				continue
			}
			if !first {
				b.WriteString(", ")
			}
			first = false
			fmt.Fprintf(&b, "%s = VALUES(%s)", d.Quote(c), d.Quote(c))
		}
		if first {
			fmt.Fprintf(&b, "%s = %s", k, k)
		}
	case !upsert:
		fmt.Fprintf(&b, " ON CONFLICT (%s) DO NOTHING", k)
	default:
		fmt.Fprintf(&b, " ON CONFLICT (%s) DO ", k)
		first := true
		for _, c := range cols {
			if c == keyCol {
				continue
			}
			if first {
				b.WriteString("UPDATE SET ")
			} else {
				b.WriteString(", ")
			}
			first = false
			fmt.Fprintf(&b, "%s = EXCLUDED.%s", d.Quote(c), d.Quote(c))
		}
		if first {
			b.WriteString("NOTHING")
		}
	}
	return b.String()
}

// offsetsDDL creates the offsets table. kafka_partition, not partition:
// PARTITION is a reserved word in MySQL.
func (d *dialect) offsetsDDL(table string) string {
	text, ts := d.textAndTimestamp()
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	consumer_group %s NOT NULL,
	topic %s NOT NULL,
	kafka_partition INTEGER NOT NULL,
	next_offset BIGINT NOT NULL,
	updated_at %s NOT NULL DEFAULT %s,
	PRIMARY KEY (consumer_group, topic, kafka_partition))`, d.Quote(table), text, text, ts, d.now())
}

// textAndTimestamp are the column types of the sink's own tables: a key
// string (VARCHAR(255) in MySQL, whose keys cannot be TEXT) and a
// timestamp.
func (d *dialect) textAndTimestamp() (text, ts string) {
	text, ts = "TEXT", "TIMESTAMP(6)"
	switch d.Name {
	case "mysql":
		text = "VARCHAR(255)"
	case "postgres":
		ts = "TIMESTAMPTZ"
	case "sqlite":
		ts = "TIMESTAMP"
	}
	return text, ts
}
