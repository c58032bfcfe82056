// Package sqldialect is what the library's database packages (sink and
// idempotency) share about the SQL databases they write to: which database a
// connection is, how it quotes an identifier, how it numbers placeholders and
// how many one statement takes. The statements themselves stay with the
// package that writes them.
package sqldialect

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Dialect is one database's answers.
type Dialect struct {
	// Name is "postgres", "mysql" (MySQL and MariaDB) or "sqlite".
	Name string
	// MaxParams bounds the placeholders of one statement: a bigger batch
	// must be split into several statements.
	MaxParams int
}

// The databases.
var (
	Postgres = &Dialect{Name: "postgres", MaxParams: 65535}
	MySQL    = &Dialect{Name: "mysql", MaxParams: 65535}
	SQLite   = &Dialect{Name: "sqlite", MaxParams: 32766}
)

// Of tells the database from db's driver: pgx (or lib/pq) is PostgreSQL,
// go-sql-driver/mysql is MySQL or MariaDB, modernc.org/sqlite is SQLite.
func Of(db *sql.DB) (*Dialect, error) {
	t := fmt.Sprintf("%T", db.Driver())
	switch {
	case strings.Contains(t, "stdlib"), strings.Contains(t, "pgx"), strings.Contains(t, "pq."):
		return Postgres, nil
	case strings.Contains(t, "mysql"):
		return MySQL, nil
	case strings.Contains(t, "sqlite"):
		return SQLite, nil
	}
	return nil, fmt.Errorf("driver %s: want PostgreSQL (pgx), MySQL or MariaDB (go-sql-driver/mysql) or SQLite (modernc.org/sqlite)", t)
}

// Quote quotes an identifier, doubling the quote character inside it, so
// that no name can end the quoting early: `...` for MySQL, "..." otherwise.
func (d *Dialect) Quote(id string) string {
	if d.Name == "mysql" {
		return "`" + strings.ReplaceAll(id, "`", "``") + "`"
	}
	return `"` + strings.ReplaceAll(id, `"`, `""`) + `"`
}

// Ph returns the i-th placeholder, counted from 1: $i for PostgreSQL, ?
// otherwise.
func (d *Dialect) Ph(i int) string {
	if d.Name == "postgres" {
		return "$" + strconv.Itoa(i)
	}
	return "?"
}
