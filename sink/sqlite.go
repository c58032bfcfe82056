package sink

import (
	"database/sql"
	"errors"
	"strings"

	"github.com/eosctl/eos"
	"modernc.org/sqlite"
)

// openSQLite opens the SQLite file at path through the pure-Go driver, for
// demos and quick tries (`eosctl demo sink`), not for production: WAL
// journal with synchronous=NORMAL (a power cut may lose the last commits,
// a process crash may not), immediate transactions so that two sink
// processes queue on the write lock instead of failing to upgrade, and a
// 10 s busy timeout.
func openSQLite(path string) (*DB, error) {
	if path == "" {
		return nil, eos.BadConfig("sink.Config", "DSN: sqlite: needs a file path, e.g. sqlite:/tmp/demo.db")
	}
	dsn := "file:" + path + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, eos.BadConfig("sink.Config", "DSN: %w", err)
	}
	return &DB{DB: db, d: sqliteDB}, nil
}

// classifySQLite sorts SQLite's result codes.
func classifySQLite(err error) (errClass, string, bool) {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return 0, "", false
	}
	switch code := se.Code(); code & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return retriable, "conflict", true
	case 19, 20: // SQLITE_CONSTRAINT, SQLITE_MISMATCH
		return permanent, "data", true
	case 23: // SQLITE_AUTH
		return auth, "auth", true
	case 1: // SQLITE_ERROR: a missing table or column, a syntax error
		if m := se.Error(); strings.Contains(m, "no such table") || strings.Contains(m, "no such column") || strings.Contains(m, "syntax error") {
			return schema, "schema", true
		}
	}
	return retriable, "other", true
}

// sqliteUnique reports SQLITE_CONSTRAINT_UNIQUE or _PRIMARYKEY.
func sqliteUnique(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code() == 2067 || se.Code() == 1555)
}
