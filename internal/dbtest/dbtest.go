// Package dbtest gives tests real PostgreSQL and MariaDB servers over TCP,
// started by the project's own scripts/db (which installs them with apt-get
// when they are missing): never a mock, and never a skip.
//
// The shared servers are found through EOS_TEST_POSTGRES and EOS_TEST_MYSQL
// (DSNs, as `scripts/db start` prints them), or started with scripts/db
// when those are unset. Each test gets a database of its own on them
// (Fresh), dropped when it ends. A test that restarts or kills the server
// starts a private one (StartPrivate) in a directory and on a port of its
// own, so other tests running at the same time are not disturbed.
package dbtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosctl/eos/sink"
)

// Kinds of server.
const (
	Postgres = "pg"
	MySQL    = "mysql"
)

// Kinds lists both, for table-driven tests.
var Kinds = []string{Postgres, MySQL}

// Name is the kind's name for subtests: "postgres" or "mariadb".
func Name(kind string) string {
	if kind == Postgres {
		return "postgres"
	}
	return "mariadb"
}

// Script is the path of scripts/db.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "db")
}

var (
	sharedOnce sync.Once
	sharedDSN  map[string]string
	sharedErr  error
)

// shared returns the DSN of the shared server of kind.
func shared(kind string) (string, error) {
	sharedOnce.Do(func() {
		sharedDSN = map[string]string{Postgres: os.Getenv("EOS_TEST_POSTGRES"), MySQL: os.Getenv("EOS_TEST_MYSQL")}
		if sharedDSN[Postgres] != "" && sharedDSN[MySQL] != "" {
			return
		}
		var env map[string]string
		env, sharedErr = runScript(nil, "start", "all")
		for k, name := range map[string]string{Postgres: "EOS_TEST_POSTGRES", MySQL: "EOS_TEST_MYSQL"} {
			if sharedDSN[k] == "" {
				sharedDSN[k] = env[name]
			}
		}
	})
	if sharedErr != nil {
		return "", sharedErr
	}
	return sharedDSN[kind], nil
}

// runScript runs scripts/db with args and extra environment, and returns
// the DSNs it printed.
func runScript(env []string, args ...string) (map[string]string, error) {
	cmd := exec.Command(Script(), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/db %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	dsns := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "export ")
		if k, v, ok := strings.Cut(line, "="); ok {
			dsns[k] = strings.Trim(v, "'")
		}
	}
	return dsns, nil
}

// Fresh creates an empty database on the shared server of kind for t, and
// returns its DSN. It is dropped when t ends.
func Fresh(t testing.TB, kind string) string {
	t.Helper()
	dsn, err := shared(kind)
	if err != nil {
		t.Fatal(err)
	}
	return freshOn(t, dsn)
}

func freshOn(t testing.TB, dsn string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	admin := Open(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if admin.Dialect() == "postgres" {
			_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		} else {
			_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
		}
	})
	return WithDatabase(dsn, name)
}

// WithDatabase returns dsn naming database db instead.
func WithDatabase(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + db
	return u.String()
}

// WithPassword returns dsn with password pass instead.
func WithPassword(dsn, pass string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword(u.User.Username(), pass)
	return u.String()
}

// Open connects to dsn and closes the pool when t ends.
func Open(t testing.TB, dsn string) *sink.DB {
	t.Helper()
	db, err := sink.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.Ping(ctx, sink.Retry{Attempts: 20, Base: 100 * time.Millisecond, Max: time.Second}); err != nil {
		t.Fatal(err)
	}
	return db
}

// Server is a private database server of one test.
type Server struct {
	Kind string
	// DSN reaches the server's test database.
	DSN string
	env []string
}

// StartPrivate starts a server of kind of t's own (its own data directory
// and port), stopped and removed when t ends.
func StartPrivate(t testing.TB, kind string) *Server {
	t.Helper()
	if _, err := shared(kind); err != nil { // installs the packages if needed
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "eos-db-")
	if err != nil {
		t.Fatal(err)
	}
	// The servers run as their own users: they need to reach the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s := &Server{Kind: kind, env: []string{"EOS_DB_DIR=" + dir, "EOS_PG_PORT=" + strconv.Itoa(port), "EOS_MYSQL_PORT=" + strconv.Itoa(port)}}
	dsns, err := runScript(s.env, "start", kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = runScript(s.env, "kill", kind)
		_ = os.RemoveAll(dir)
	})
	if kind == Postgres {
		s.DSN = dsns["EOS_TEST_POSTGRES"]
	} else {
		s.DSN = dsns["EOS_TEST_MYSQL"]
	}
	return s
}

// Restart stops the server (a fast shutdown: open connections are cut,
// open transactions roll back) and starts it again.
func (s *Server) Restart() error {
	_, err := runScript(s.env, "restart", s.Kind)
	return err
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
