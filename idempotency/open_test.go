package idempotency_test

import (
	"database/sql"

	"github.com/eosctl/eos/sink"
)

// dbtestOpen opens dsn as the tests' callers would: a *sql.DB of the pgx or
// MySQL driver.
func dbtestOpen(dsn string) (*sql.DB, error) {
	db, err := sink.Open(dsn)
	if err != nil {
		return nil, err
	}
	return db.DB, nil
}
