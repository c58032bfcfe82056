package idempotency

import (
	"database/sql"
	"fmt"

	"github.com/eosctl/eos/internal/sqldialect"
)

// dialect is what differs between PostgreSQL and MySQL here: the shared
// answers of sqldialect, and this package's own statements below.
type dialect struct{ *sqldialect.Dialect }

var (
	postgres = &dialect{sqldialect.Postgres}
	mysql    = &dialect{sqldialect.MySQL}
)

// dialectOf tells the database from db's driver.
func dialectOf(db *sql.DB) (*dialect, error) {
	d, err := sqldialect.Of(db)
	switch {
	case err != nil:
		return nil, fmt.Errorf("idempotency: %w", err)
	case d == sqldialect.Postgres:
		return postgres, nil
	case d == sqldialect.MySQL:
		return mysql, nil
	}
	return nil, fmt.Errorf("idempotency: %s: want PostgreSQL (pgx) or MySQL (go-sql-driver/mysql)", d.Name)
}

// now is the database's clock, in UTC for MySQL's DATETIME columns: a
// claim's age is judged by it, never by the application host's clock,
// which may be skewed (one host's clock ahead would take over claims
// that are still running, one behind would write claims that others
// take over at once).
func (d *dialect) now() string {
	if d == mysql {
		return "UTC_TIMESTAMP(6)"
	}
	return "now()"
}

// ago is the database's clock minus the placeholder ph, in microseconds.
func (d *dialect) ago(ph string) string {
	if d == mysql {
		return "UTC_TIMESTAMP(6) - INTERVAL " + ph + " MICROSECOND"
	}
	return "now() - " + ph + "::bigint * interval '1 microsecond'"
}

// createSQL creates the records table, partitioned by day. MySQL needs
// one partition at creation: the first day's.
func (d *dialect) createSQL(table, firstDay, nextDay string) string {
	if d == postgres {
		return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	idem_key TEXT NOT NULL,
	day DATE NOT NULL,
	biz_type TEXT NOT NULL,
	state TEXT NOT NULL,
	owner TEXT NOT NULL,
	claimed_at TIMESTAMPTZ NOT NULL,
	finished_at TIMESTAMPTZ,
	result BYTEA,
	error TEXT,
	PRIMARY KEY (idem_key, day)
) PARTITION BY RANGE (day)`, d.Quote(table))
	}
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (
	idem_key VARCHAR(255) NOT NULL,
	day DATE NOT NULL,
	biz_type VARCHAR(255) NOT NULL,
	state VARCHAR(16) NOT NULL,
	owner CHAR(32) NOT NULL,
	claimed_at DATETIME(6) NOT NULL,
	finished_at DATETIME(6),
	result LONGBLOB,
	error TEXT,
	PRIMARY KEY (idem_key, day)
) PARTITION BY RANGE COLUMNS (day) (PARTITION %s VALUES LESS THAN ('%s'))`, d.Quote(table), partitionName(table, firstDay), nextDay)
}
