package sink

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// timeouts are the session settings that keep one stuck transaction (a
// paused zombie's) from stalling the live writer: see
// Config.LockTimeout and Config.IdleInTransactionTimeout.
type timeouts struct {
	lock, idle time.Duration
}

// postgres sets the timeouts as run-time parameters of every connection,
// unless the DSN sets them.
func (to *timeouts) postgres(params map[string]string) {
	if to == nil {
		return
	}
	set := func(k string, d time.Duration) {
		if _, ok := params[k]; !ok {
			params[k] = strconv.FormatInt(max(d.Milliseconds(), 1), 10)
		}
	}
	set("lock_timeout", to.lock)
	set("idle_in_transaction_session_timeout", to.idle)
}

// seconds rounds d up to whole seconds, at least 1: MySQL's unit.
func seconds(d time.Duration) int64 { return max(1, int64((d+time.Second-1)/time.Second)) }

// mysql wraps c so that every new connection sets the timeouts, unless the
// DSN sets them: innodb_lock_wait_timeout, and MariaDB's
// idle_transaction_timeout, or wait_timeout where the server does not
// have it (MySQL).
func (to *timeouts) mysql(c driver.Connector, dsnParams map[string]string) driver.Connector {
	if to == nil {
		return c
	}
	return &sessionConnector{Connector: c, to: *to, dsn: dsnParams}
}

type sessionConnector struct {
	driver.Connector
	to  timeouts
	dsn map[string]string // the DSN's parameters, which win
}

// errUnknownVariable is MySQL's ER_UNKNOWN_SYSTEM_VARIABLE.
const errUnknownVariable = 1193

func (s *sessionConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := s.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	ex, ok := conn.(driver.ExecerContext)
	if !ok {
		return conn, nil
	}
	setOne := func(k string, d time.Duration) error {
		if _, ok := s.dsn[k]; ok {
			return nil
		}
		_, err := ex.ExecContext(ctx, fmt.Sprintf("SET SESSION %s = %d", k, seconds(d)), nil)
		return err
	}
	err = setOne("innodb_lock_wait_timeout", s.to.lock)
	if err == nil {
		err = setOne("idle_transaction_timeout", s.to.idle)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == errUnknownVariable {
			err = setOne("wait_timeout", s.to.idle)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}
