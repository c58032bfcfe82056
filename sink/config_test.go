package sink_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/dbtest"
	"github.com/eosctl/eos/sink"
)

// TestBadInputStopsBeforeWritingAnything: a malformed DSN, a wrong
// password, a missing table and a missing column each stop New with a
// one-line error of the right class (eos.ErrConfig or ErrAuth), and leave the
// database as it was: not even the offsets table is created.
func TestBadInputStopsBeforeWritingAnything(t *testing.T) {
	for _, kind := range dbtest.Kinds {
		t.Run(dbtest.Name(kind), func(t *testing.T) {
			k, dsn, db := setup(t, kind, "events")
			good := mapping(t, eventsMapping, "events")
			cases := []struct {
				name    string
				dsn     string
				mapping *sink.Mapping
				want    error
				says    string
			}{
				{"bad DSN scheme", "oracle://x", good, eos.ErrConfig, "DSN scheme"},
				{"bad DSN", strings.Replace(dsn, "127.0.0.1:", "127.0.0.1:port", 1), good, eos.ErrConfig, "DSN"},
				{"wrong password", dbtest.WithPassword(dsn, "wrong"), good, sink.ErrAuth, ""},
				{"missing table", dsn, mapping(t, eventsMapping, "no_such_table"), eos.ErrConfig, "no_such_table"},
				{"missing column", dsn, mapping(t, eventsMapping+"  nope: amount\n", "events"), eos.ErrConfig, "nope"},
			}
			for _, c := range cases {
				_, err := sink.New(t.Context(), sink.Config{DSN: c.dsn, Group: "g", Topics: []string{"in"}, Mapping: c.mapping, ClientOpts: k.opts(), Retry: sink.Retry{Attempts: 2}})
				if !errors.Is(err, c.want) {
					t.Errorf("%s: error %v, want %v", c.name, err, c.want)
					continue
				}
				if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, c.says) {
					t.Errorf("%s: error %q: want one line naming %q", c.name, msg, c.says)
				}
				if strings.Contains(err.Error(), "wrong") {
					t.Errorf("%s: error %q shows the password", c.name, err)
				}
			}
			var tables int64
			q := "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'eos_sink_offsets'"
			if db.Dialect() == "mysql" {
				q += " AND table_schema = DATABASE()"
			}
			if tables = count(t, db, q); tables != 0 {
				t.Fatalf("the offsets table was created by a sink that did not start")
			}
			if n := count(t, db, "SELECT COUNT(*) FROM events"); n != 0 {
				t.Fatalf("%d rows written by sinks that did not start", n)
			}
		})
	}
}

// TestMappingErrorsNameTheField: mapping mistakes are eos.ErrConfig errors
// naming the field of the mapping file.
func TestMappingErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ yaml, says string }{
		{"table: t\nkey_column: k\ncolumns:\n  a: b +\n", "columns.a"},
		{"table: t\nkey_column: k\ncolumns:\n  a: nosuchfn(b)\n", "unknown function nosuchfn"},
		{"table: 't; drop'\nkey_column: k\n", "table"},
		{"table: t\nkey_column: k\nmode: merge\n", "mode"},
		{"table: t\nkey_column: k\nmode: transition\n", "transition.status_column"},
		{"table: t\nkey_column: k\ncolumns:\n  k: x\n", "key_column"},
		{"table: t\nkey_column: k\ncolums:\n  a: b\n", "colums"},
	} {
		_, err := sink.ParseMapping("m.yaml", []byte(c.yaml))
		if !errors.Is(err, eos.ErrConfig) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "m.yaml") {
			t.Errorf("%q: error %v, want eos.ErrConfig naming m.yaml and %q", c.yaml, err, c.says)
		}
	}
}
