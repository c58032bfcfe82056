package topologies

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/eosctl/eos/pipeline"
)

// splicedJoinConfigs take the spliced join (etl_splice.go): a join by the
// record's key whose map adds only fields of the row. The last one
// replaces a field the records have, so their outputs are rebuilt, not
// spliced.
var splicedJoinConfigs = []string{
	"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user, list_price: row.amount, n: row.n, o: row.obj, s: row.s, gone: row.absent}\n",
	"join: {table: tbl, key: _key, as: row, missing: \"null\"}\nmap: {owner: row.user, \"a\\u2028b\": row.s}\n",
	"join: {table: tbl, key: _key, as: row, missing: drop}\nmap: {user: row.user}\n",
}

// The spliced join gives what the expression machine gives, output for
// output and dead letter for dead letter, on records that mostly repeat
// one set of field names in one order (as a topic's records do) with
// random values, and now and then do not: a space between tokens, a name
// changed, repeated, written with an escape or one the map adds, a
// broken value, an empty object, a record that is not an object; against
// rows that are random objects, some not JSON, some lacking a field.
func TestSplicedJoinMatchesTheExpressionMachine(t *testing.T) {
	for ci, body := range splicedJoinConfigs {
		rng := rand.New(rand.NewPCG(uint64(ci), 11))
		fast, ref := fastAndReference(t, body, rng)
		if fast.splice == nil {
			t.Fatalf("%s: the spliced join is off", body)
		}
		n := 6000
		if testing.Short() {
			n = 1000
		}
		for i := range n {
			in := &pipeline.Record{Topic: "in", Offset: int64(i), Value: splicedRecord(rng)}
			if rng.IntN(20) > 0 {
				in.Key = []byte(strconv.Itoa(rng.IntN(10)))
			}
			compareETL(t, body, fast, ref, in)
		}
		// Most records repeat the names; most of those have a row.
		replaces := ci == len(splicedJoinConfigs)-1
		if got := fast.splice.spliced; !replaces && got < int64(n)/3 || replaces && got > int64(n)/10 {
			t.Errorf("%s: %d of %d records spliced", body, got, n)
		}
		if f, r := fast.join.table.Stats(), ref.join.table.Stats(); f.Lookups != r.Lookups || f.Misses != r.Misses {
			t.Errorf("%s: the table counted %d lookups and %d misses, the machine's %d and %d", body, f.Lookups, f.Misses, r.Lookups, r.Misses)
		}
		if fast.join.looked {
			t.Errorf("%s: a looked-up row was left for the next record", body)
		}
	}
}

// splicedRecord is a record of the names seq, user, amount, pad in that
// order with random values, compact, or now and then something else.
func splicedRecord(rng *rand.Rand) []byte {
	names := []string{"seq", "user", "amount", "pad"}
	var b strings.Builder
	b.WriteString("{")
	switch rng.IntN(40) {
	case 0:
		return []byte([]string{`{}`, `{ }`, `[1]`, `{"seq":1`, `{"seq":1,}`, `{"seq":01}`, ``, `{"seq":1}x`}[rng.IntN(8)])
	case 1:
		names[rng.IntN(4)] = []string{"owner", "user", "s", "n", "list_price", "\\u0070ad", "pa\\\"d", "a\u2028b"}[rng.IntN(8)]
	case 2:
		names = names[:rng.IntN(4)]
	case 3:
		names = append(names, "extra")
	}
	space := -1
	if rng.IntN(10) == 0 && len(names) > 0 {
		space = rng.IntN(4 * len(names))
	}
	for i, name := range names {
		if i > 0 {
			if space == 4*i {
				b.WriteString(" ")
			}
			b.WriteString(",")
		}
		if space == 4*i+1 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, `"%s":`, name)
		if space == 4*i+2 {
			b.WriteString("\t")
		}
		b.WriteString(randomValue(rng, 2))
		if space == 4*i+3 {
			b.WriteString(" ")
		}
	}
	b.WriteString("}")
	return []byte(b.String())
}

// A configuration the spliced join cannot serve leaves it off: it would
// skip what these ask of every record.
func TestSplicedJoinIsOffWhenTheConfigurationReadsMore(t *testing.T) {
	for _, body := range []string{
		"join: {table: tbl, key: k, as: row}\nmap: {owner: row.user}\n",             // a key expression to evaluate
		"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user, u: user}\n", // a field of the record
		"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user}\nfilter: row.n > 1\n",
		"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user}\ndrop: [pad]\n",
		"join: {table: tbl, key: _key, as: row}\nproject: {owner: row.user}\n",
		"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user, r: row}\n",
		"join: {table: tbl, key: _key, as: row}\nmap: {owner: row.user}\nkey: row.user\n",
		"join: {table: tbl, key: _key, as: row}\nmap: {p: _partition, owner: row.user}\n",
		"map: {owner: user}\n",
	} {
		if e, _ := fastAndReference(t, body, rand.New(rand.NewPCG(1, 1))); e.splice != nil {
			t.Errorf("%q: the spliced join is on", body)
		}
	}
}

// FuzzSplicedJoin compares the spliced join with the expression machine
// on any record value, after a record that teaches it the names seq,
// user, amount and pad.
func FuzzSplicedJoin(f *testing.F) {
	learnt := `{"seq":1,"user":"u","amount":2.5,"pad":"xx"}`
	for _, s := range append(jsonSeeds, learnt, `{"seq":1,"user":"u","amount":2.5,"pad":"xx"} `, `{"seq":1,"user":"u","amount":02.5,"pad":"xx"}`) {
		f.Add([]byte(s))
	}
	fast, ref := fastAndReference(f, splicedJoinConfigs[0], rand.New(rand.NewPCG(3, 4)))
	f.Fuzz(func(t *testing.T, v []byte) {
		compareETL(t, splicedJoinConfigs[0], fast, ref, &pipeline.Record{Topic: "in", Key: []byte("3"), Value: []byte(learnt)})
		compareETL(t, splicedJoinConfigs[0], fast, ref, &pipeline.Record{Topic: "in", Key: []byte("3"), Value: v})
	})
}
