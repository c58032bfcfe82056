package topologies

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eosctl/eos/pipeline"
)

// fastPathConfigs are etl configurations whose fields take the fast paths
// (etl_fast.go) beside the expression machine: row fields copied, record
// fields checked but not decoded, rows decoded into a map or not.
var fastPathConfigs = []string{
	"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user, list_price: row.amount, n: row.n, o: row.obj, s: row.s, gone: row.absent}\n",
	"join: {table: tbl, key: _key, as: row, missing: \"null\"}\nmap: {owner: row.user, s: row.s, whole: row}\n",
	"join: {table: tbl, key: k, as: row, missing: drop}\nfilter: row.n != nil\nmap: {v: row.s, w: user, x: row.n, y: row.o}\nkey: user\n",
	"join: {table: tbl, key: string(k), as: row}\nproject: {a: row.s, b: s, r: row, u: user}\ndrop: [b]\n",
	"join: {table: tbl, key: _key, as: row}\nmap:\n  r: row.s\n  e: $env.user\n  n: \"row?.n\"\n",
	"map: {owner: user, cents: amount, s: s}\nkey: s\n",
}

// referenceETL is the etl of config with every fast path off: each field
// decoded for the expression machine, each value it computes encoded.
func referenceETL(t testing.TB, path string) *ETL {
	e, err := NewETL(path)
	if err != nil {
		t.Fatal(err)
	}
	e.reference, e.env.lazy = true, nil
	if e.join != nil {
		e.join.needMap = true
		e.join.prep, e.join.table.prepare = false, nil // the raw row parsed on every lookup
	}
	return e
}

// The fast paths give what the expression machine gives, output for
// output and dead letter for dead letter, on random records and rows:
// strings with escapes, unicode and invalid UTF-8, numbers at the edges
// of int64 and float64 (1e999 fails to decode), nested objects, repeated
// and missing fields, nulls, rows that are not JSON objects.
func TestETLFastPathMatchesTheExpressionMachine(t *testing.T) {
	for ci, body := range fastPathConfigs {
		rng := rand.New(rand.NewPCG(uint64(ci), 7))
		fast, ref := fastAndReference(t, body, rng)
		n := 3000
		if testing.Short() {
			n = 500
		}
		for i := range n {
			in := &pipeline.Record{Topic: "in", Offset: int64(i), Value: randomRecord(rng)}
			if rng.IntN(10) > 0 {
				in.Key = []byte(strconv.Itoa(rng.IntN(10)))
			}
			compareETL(t, body, fast, ref, in)
		}
	}
}

// FuzzETLFastPath compares the fast paths with the expression machine on
// any record value, for the first configuration (row fields copied from
// a table of random rows).
func FuzzETLFastPath(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"k":"3","user":"a\u00e9","s":-0,"amount":1e999}`))
	fast, ref := fastAndReference(f, fastPathConfigs[2], rand.New(rand.NewPCG(1, 2)))
	f.Fuzz(func(t *testing.T, v []byte) {
		compareETL(t, fastPathConfigs[2], fast, ref, &pipeline.Record{Topic: "in", Key: []byte("3"), Value: v})
	})
}

// fastAndReference returns the etl of the configuration body, and its
// reference (referenceETL); with a join, both tables hold the same random
// rows of keys 0 to 7 (8 and 9 have none).
func fastAndReference(tb testing.TB, body string, rng *rand.Rand) (fast, ref *ETL) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "etl.yaml")
	if err := os.WriteFile(path, []byte("topology: etl\n"+body), 0o644); err != nil {
		tb.Fatal(err)
	}
	fast, err := NewETL(path)
	if err != nil {
		tb.Fatal(err)
	}
	ref = referenceETL(tb, path)
	if fast.join != nil {
		for k := range 8 {
			row := randomRow(rng)
			fillTable(fast.join.table, strconv.Itoa(k), row)
			fillTable(ref.join.table, strconv.Itoa(k), row)
		}
	}
	return fast, ref
}

func fillTable(tb *Table, key string, row []byte) {
	if tb.owned[0] == nil {
		tb.owned[0] = &tablePart{}
	}
	tb.owned[0].rows.put([]byte(key), tb.stored(row))
}

// compareETL processes in with both and fails unless they agree.
func compareETL(t testing.TB, cfg string, fast, ref *ETL, in *pipeline.Record) {
	t.Helper()
	var got, want []pipeline.Output
	gerr := fast.Process(context.Background(), in, emitFunc(func(o pipeline.Output) { got = append(got, o) }))
	werr := ref.Process(context.Background(), in, emitFunc(func(o pipeline.Output) { want = append(want, o) }))
	if fmt.Sprint(gerr) != fmt.Sprint(werr) || len(got) != len(want) {
		t.Fatalf("%s\nrecord %q key %q:\nfast gave %d outputs, %v\nthe machine %d, %v", cfg, in.Value, in.Key, len(got), gerr, len(want), werr)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.To != w.To || string(g.Key) != string(w.Key) || string(g.Value) != string(w.Value) {
			t.Fatalf("%s\nrecord %q key %q:\nfast gave    %s %q %s\nthe machine  %s %q %s", cfg, in.Value, in.Key, g.To, g.Key, g.Value, w.To, w.Key, w.Value)
		}
	}
}

// randomValue is a random JSON value, at most depth deep.
func randomValue(rng *rand.Rand, depth int) string {
	atoms := []string{
		`""`, `"plain ascii"`, `"<&>"`, `"tab\there"`, `"q\"uote\\"`, `"\u00e9t\u00e9"`, `"été"`, `"😀"`, `"\ud83d\ude00"`,
		"\"bad \xff utf8\"", `"\u2028"`, `"\/"`, "\"\x7f\"",
		`0`, `-0`, `7`, `-12`, `999999999999999999`, `1000000000000000000`, `9223372036854775807`, `-9223372036854775808`,
		`9223372036854775808`, `123456789012345678901234567890`, `1.5`, `-0.0`, `0.1`, `1e2`, `1E-7`, `1e21`, `1e20`,
		`2.5e-324`, `1.7976931348623157e308`, `1e999`, `-1e999`, `1.0`, `100.00`,
		`true`, `false`, `null`,
	}
	if depth > 0 && rng.IntN(6) == 0 {
		if rng.IntN(2) == 0 {
			return `[` + randomValue(rng, depth-1) + ` , ` + randomValue(rng, depth-1) + `]`
		}
		return `{"z":` + randomValue(rng, depth-1) + `, "a" : ` + randomValue(rng, depth-1) + `,"z":1}`
	}
	return atoms[rng.IntN(len(atoms))]
}

// randomObject is a JSON object of some of names, in a random order, some
// repeated, half the objects compact and half with random spacing.
func randomObject(rng *rand.Rand, names []string) string {
	var b strings.Builder
	b.WriteString("{")
	n := 0
	spaced := rng.IntN(2) == 0
	for _, i := range rng.Perm(len(names)) {
		if rng.IntN(8) == 0 {
			continue // missing
		}
		for range 1 + rng.IntN(2)*rng.IntN(3)/2 { // sometimes repeated
			if n > 0 && spaced {
				b.WriteString([]string{",", " , ", ",\n"}[rng.IntN(3)])
			} else if n > 0 {
				b.WriteString(",")
			}
			n++
			fmt.Fprintf(&b, `"%s":%s`, names[i], randomValue(rng, 2))
		}
	}
	b.WriteString("}")
	return b.String()
}

func randomRecord(rng *rand.Rand) []byte {
	if rng.IntN(50) == 0 {
		return []byte([]string{`[1]`, `{"user":`, `"s"`, ``}[rng.IntN(4)])
	}
	// "a\u2028b" raw: valid JSON, but written back escaped.
	o := randomObject(rng, []string{"user", "amount", "k", "s", "n", "pad", "row", "a\u2028b", "<&>"})
	if rng.IntN(3) > 0 { // k mostly a key with a row
		o = strings.Replace(o, "{", fmt.Sprintf(`{"k":%d,`, rng.IntN(10)), 1)
		o = strings.Replace(o, ",}", "}", 1)
		if rng.IntN(4) == 0 { // a name written with an escape: not spliced as it is
			o = strings.Replace(o, `"pad"`, `"\u0070ad"`, 1)
		}
	}
	return []byte(o)
}

func randomRow(rng *rand.Rand) []byte {
	if rng.IntN(8) == 0 {
		return []byte([]string{`[1,2]`, `"row"`, `not json`, `{"s":1,}`, ``}[rng.IntN(5)])
	}
	return []byte(randomObject(rng, []string{"user", "amount", "s", "n", "obj", "o"}))
}

// appendCanonical writes what decoding and encoding write, on numbers of
// every shape: its shortcuts (integers, short decimals written as they
// are) are exact.
func TestAppendCanonicalIsDecodeThenEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	digits := func(n int, lead bool) string {
		var b strings.Builder
		for i := range n {
			c := byte('0' + rng.IntN(10))
			if i == 0 && lead && c == '0' {
				c = '1'
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	var raws []string
	for range 20000 {
		s := "0"
		if rng.IntN(3) > 0 {
			s = digits(1+rng.IntN(20), true)
		}
		if rng.IntN(4) > 0 {
			s += "." + strings.Repeat("0", rng.IntN(8)) + digits(1+rng.IntN(16), false)
		}
		if rng.IntN(6) == 0 {
			s += []string{"e", "E", "e-", "e+"}[rng.IntN(4)] + digits(1+rng.IntN(3), false)
		}
		if rng.IntN(2) == 0 {
			s = "-" + s
		}
		raws = append(raws, s)
	}
	raws = append(raws, "0.000001", "0.0000001", "999999999999999.9", "99999999999999.9", "123456789012345.6", "1e999", "-0.0", "0.10", "5.0")
	for _, raw := range raws {
		want, werr := decodeJSON([]byte(raw))
		var wb []byte
		if werr == nil {
			wb, werr = encodeJSON(nil, want)
		}
		got, gerr := appendCanonical(nil, []byte(raw))
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || string(got) != string(wb) {
			t.Fatalf("%s: appendCanonical gave %s (%v), decode and encode %s (%v)", raw, got, gerr, wb, werr)
		}
	}
}
