package sink

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/eosctl/eos"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// DB is an open database and its dialect.
type DB struct {
	*sql.DB
	d *dialect
}

// Dialect names the database: "postgres", "mysql" or "sqlite".
func (db *DB) Dialect() string { return db.d.Name }

// Open parses dsn and opens a connection pool; it does not connect (see
// Ping). Accepted forms:
//
//	postgres://user:pass@host:port/db?sslmode=disable  (also postgresql://)
//	mysql://user:pass@host:port/db?param=value         (MySQL, MariaDB)
//	sqlite:PATH                                        (demos and quick tries)
//
// A malformed DSN is an *eos.ConfigError. The password is never part of an error.
func Open(dsn string) (*DB, error) { return open(dsn, nil) }

// open is Open with the session timeouts of to on every connection (nil:
// the server's defaults).
func open(dsn string, to *timeouts) (*DB, error) {
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		return openSQLite(strings.TrimPrefix(path, "//"))
	}
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return nil, eos.BadConfig("sink.Config", "DSN must start with postgres://, mysql:// or sqlite:")
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, eos.BadConfig("sink.Config", "DSN: %s", redact(err.Error(), dsn))
		}
		to.postgres(cfg.RuntimeParams)
		return &DB{DB: stdlib.OpenDB(*cfg), d: postgres}, nil
	case "mysql":
		cfg, err := mysqlConfig(dsn)
		if err != nil {
			return nil, err
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, eos.BadConfig("sink.Config", "DSN: %w", err)
		}
		db := sql.OpenDB(to.mysql(c, cfg.Params))
		if to != nil {
			// Idle pooled connections are closed before MySQL's
			// wait_timeout (the fallback of idle_transaction_timeout)
			// would close them under the pool.
			db.SetConnMaxIdleTime(to.idle / 2)
		}
		return &DB{DB: db, d: mysqlDB}, nil
	}
	return nil, eos.BadConfig("sink.Config", "DSN scheme %q: want postgres, mysql or sqlite", scheme)
}

// mysqlConfig turns a mysql:// URL into the driver's configuration.
func mysqlConfig(dsn string) (*mysql.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, eos.BadConfig("sink.Config", "DSN: %s", redact(err.Error(), dsn))
	}
	if u.Host == "" {
		return nil, eos.BadConfig("sink.Config", "DSN: mysql:// needs a host, e.g. mysql://user:pass@127.0.0.1:3306/db")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		return nil, eos.BadConfig("sink.Config", "DSN: mysql:// needs a database name after the host")
	}
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, db
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	// One round trip per statement instead of prepare, execute, close:
	// safe with the utf8mb4 connection charset the driver sets.
	cfg.InterpolateParams = true
	cfg.Timeout = 10 * time.Second
	params := map[string]string{}
	for k, v := range u.Query() {
		params[k] = v[len(v)-1]
	}
	if len(params) > 0 {
		// The driver parses its own parameters (tls, timeouts, ...).
		q := url.Values{}
		for k, v := range params {
			q.Set(k, v)
		}
		parsed, err := mysql.ParseDSN(fmt.Sprintf("%s@tcp(%s)/%s?%s", "u", cfg.Addr, db, q.Encode()))
		if err != nil {
			return nil, eos.BadConfig("sink.Config", "DSN: %w", err)
		}
		parsed.User, parsed.Passwd = cfg.User, cfg.Passwd
		if _, set := params["interpolateParams"]; !set {
			parsed.InterpolateParams = true
		}
		cfg = parsed
	}
	return cfg, nil
}

// redact removes the DSN's password from a message that may quote it.
func redact(msg, dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// Ping connects, retrying retriable failures with the policy r. A refused
// password wraps ErrAuth, an unknown database an *eos.ConfigError.
func (db *DB) Ping(ctx context.Context, r Retry) error {
	return retry(ctx, r, nil, func(ctx context.Context) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return db.PingContext(pctx)
	})
}
