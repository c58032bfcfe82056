package sink

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/eosctl/eos"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// errClass says what to do about a database error.
type errClass int

const (
	// retriable: the database or the network had a problem that may pass
	// (connection lost, server restarting, deadlock, lock timeout). Retry
	// the whole batch. Unknown errors are retriable too: failing closed
	// and retrying is always safe, dead-lettering a record is not.
	retriable errClass = iota
	// permanent: this row can never be written (bad data, a constraint
	// other than the idempotency key). Dead-letter the record.
	permanent
	// schema: the table or a column is missing, or the SQL does not fit
	// the table. A configuration error: stop.
	schema
	// auth: bad credentials or missing privileges. Stop.
	auth
)

// classify sorts err and gives the label of its class for
// eos_sink_db_errors_total{class}.
func classify(err error) (errClass, string) {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		return classifyPg(pe.Code)
	case errors.As(err, &me):
		return classifyMySQL(me.Number)
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return retriable, "connection"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return retriable, "connection"
	}
	if c, label, ok := classifySQLite(err); ok {
		return c, label
	}
	if strings.Contains(err.Error(), "connection") {
		return retriable, "connection"
	}
	return retriable, "other"
}

// classifyPg sorts PostgreSQL SQLSTATE codes (appendix A of its manual).
func classifyPg(code string) (errClass, string) {
	switch {
	case strings.HasPrefix(code, "28"), code == "42501": // invalid authorization, insufficient privilege
		return auth, "auth"
	case code == "3D000", code == "42P01", code == "42703", code == "42804", strings.HasPrefix(code, "42"):
		// unknown database, undefined table or column, datatype mismatch, syntax
		return schema, "schema"
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"):
		// data exception; integrity constraint violation
		return permanent, "data"
	case code == "40001", code == "40P01":
		return retriable, "conflict"
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57"), strings.HasPrefix(code, "53"):
		// connection exception; operator intervention (shutdown);
		// insufficient resources
		return retriable, "connection"
	}
	return retriable, "other"
}

// classifyMySQL sorts MySQL/MariaDB server error numbers.
func classifyMySQL(n uint16) (errClass, string) {
	switch n {
	case 1044, 1045, 1142, 1143, 1227, 1698: // access denied, command or column denied
		return auth, "auth"
	case 1049, 1146, 1054, 1064, 1110, 1136: // unknown database, table, column; syntax; column count
		return schema, "schema"
	case 1048, 1062, 1263, 1264, 1292, 1364, 1365, 1366, 1406, 1451, 1452, 1690, 3819, 4025:
		// NULL into NOT NULL, duplicate on another unique key, out of
		// range, bad value, no default, division by zero, too long,
		// foreign key, CHECK constraint
		return permanent, "data"
	case 1205, 1213, 1614: // lock wait timeout, deadlock, rolled back
		return retriable, "conflict"
	case 1040, 1053, 1927, 2002, 2003, 2006, 2013: // too many connections, shutdown, killed, gone away
		return retriable, "connection"
	}
	return retriable, "other"
}

// retry runs fn until it succeeds, fails with an error that is not
// retriable, the context ends, or r.Attempts tries failed; it waits
// between tries with exponential backoff and full jitter in [d/2, d].
// onErr, if set, sees every failure with its class label.
func retry(ctx context.Context, r Retry, onErr func(error, string), fn func(context.Context) error) error {
	if r.Attempts <= 0 {
		r.Attempts = 1
	}
	var err error
	for attempt := range r.Attempts {
		if err = fn(ctx); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if errors.Is(err, errConflict) {
			return err
		}
		class, label := classify(err)
		if onErr != nil {
			onErr(err, label)
		}
		if class != retriable {
			return classified(class, err)
		}
		if attempt == r.Attempts-1 {
			break
		}
		d := min(r.Max, r.Base<<min(attempt, 30))
		d = d/2 + rand.N(d/2+1)
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(d):
		}
	}
	return fmt.Errorf("database: gave up after %d attempts: %w", r.Attempts, err)
}

// classified wraps err with the sentinel of its class, so that callers can
// tell the class with errors.Is.
func classified(c errClass, err error) error {
	switch c {
	case auth:
		return fmt.Errorf("%w: %w", ErrAuth, err)
	case schema:
		return eos.BadConfig("sink.Config", "%w", err)
	}
	return err
}

// isUniqueViolation reports a duplicate key.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &pe):
		return pe.Code == "23505"
	case errors.As(err, &me):
		return me.Number == 1062
	}
	return sqliteUnique(err)
}

// pgDetail is a PostgreSQL error's DETAIL ("Key (usr)=(user-03) already
// exists."), or "".
func pgDetail(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Detail
	}
	return ""
}
