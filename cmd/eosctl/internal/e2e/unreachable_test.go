package e2e

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosctl/eos/broker"
	"github.com/eosctl/eos/internal/testenv"
	"github.com/eosctl/eos/sink"
)

// silentListener returns the address of a "broker" that accepts
// connections and never answers.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return ln.Addr().String()
}

// sqliteSink returns an SQLite DSN with a table and the mapping file of a
// sink into it, for the commands that reach the database before Kafka.
func sqliteSink(t *testing.T) (dsn, mapping string) {
	t.Helper()
	dir := t.TempDir()
	dsn = "sqlite:" + filepath.Join(dir, "sink.db")
	db, err := sink.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "CREATE TABLE payments (k TEXT PRIMARY KEY, user_id TEXT)"); err != nil {
		t.Fatal(err)
	}
	mapping = filepath.Join(dir, "payments.yaml")
	if err := os.WriteFile(mapping, []byte("table: payments\nkey_column: k\ncolumns:\n  user_id: user\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dsn, mapping
}

// Every command fails within the default --timeout (10s), or the one given,
// when the brokers do not answer, with one line that names the likely
// cause: a port that is not Kafka's, nothing listening, TLS on one side
// only, SASL on one side only.
func TestUnreachableBrokersFailWithinTheDefaultTimeoutNamingTheCause(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, broker.Config{})
	silent, kafka, refused := silentListener(t), e.b.Addrs()[0], freeAddr(t)
	dsn, mapping := sqliteSink(t)
	for _, tc := range []struct {
		name string
		args []string
		env  string
		has  string
	}{
		// sink and reconcile reach the database first, then Kafka.
		{"sink silent", []string{"--brokers", silent, "sink", "--to", dsn, "--mapping", mapping, "--group", "g", "--input", "x"}, "", "no answer within 10s: " + silent + " accepts connections but does not answer a Kafka request"},
		{"reconcile silent", []string{"--brokers", silent, "reconcile", "--to", dsn, "--mapping", mapping, "--input", "x", "--group", "g"}, "", "no answer within 10s: " + silent + " accepts connections but does not answer a Kafka request"},
		{"sink tls against plaintext", []string{"--brokers", kafka, "--tls", "--timeout", "3s", "sink", "--to", dsn, "--mapping", mapping, "--group", "g", "--input", "x"}, "", "most likely a plaintext listener, while this client uses TLS"}, // kfake never answers the handshake, Kafka closes the connection
		{"bench silent, --timeout 3s", []string{"--brokers", silent, "--timeout", "3s", "bench", "--modes", "eos", "--intervals", "1s", "--sizes", "100", "--repeat", "1"}, "", "no answer within 3s: " + silent + " accepts connections"},
		{"produce silent", []string{"--brokers", silent, "produce", "--topic", "x", "--count", "1"}, "", "no answer within 10s: " + silent + " accepts connections but does not answer a Kafka request"},
		{"txn list silent", []string{"--brokers", silent, "txn", "list"}, "", "not a Kafka listener"},
		{"verify silent", []string{"--brokers", silent, "verify", "--input", "a", "--output", "b"}, "", "not a Kafka listener"},
		{"lag silent", []string{"--brokers", silent, "lag", "--group", "g"}, "", "not a Kafka listener"},
		{"run silent", []string{"--brokers", silent, "run", "passthrough", "--app", "a", "--instance", "0", "--input", "a", "--output", "b", "--metrics-addr", ""}, "", "not a Kafka listener"},
		{"tls against plaintext", []string{"--brokers", kafka, "--tls", "produce", "--topic", "x", "--count", "1"}, "", "most likely a plaintext listener, while this client uses TLS"},
		{"nothing listening", []string{"--brokers", refused, "produce", "--topic", "x", "--count", "1"}, "", "nothing listens there"},
		{"sasl against no sasl", []string{"--brokers", kafka, "--sasl-mechanism", "PLAIN", "--sasl-user", "u", "produce", "--topic", "x", "--count", "1"}, "EOSCTL_SASL_PASSWORD=p", "the listener does not use SASL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			code, out, errs := runEosctlEnv(t, []string{tc.env}, tc.args...)
			took := time.Since(start)
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], tc.has) || !strings.HasPrefix(lines[0], "eosctl: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and one line containing %q", code, out, errs, tc.has)
			}
			if took > 14*time.Second {
				t.Fatalf("took %s; the default --timeout is 10s", took)
			}
		})
	}
}
