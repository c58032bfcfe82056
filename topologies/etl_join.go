package topologies

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/pipeline"
	"github.com/expr-lang/expr/ast"
)

// joinKeys are the keys of an etl join.
var joinKeys = []string{"table", "key", "as", "missing"}

// What a join does with a record whose key has no row.
const (
	missingDeadLetter = iota // dead-letter it as join-missing (the default)
	missingDrop              // drop it, counted
	missingNull              // go on with the row as null
)

// etlJoin is the etl topology's stream-table join: it looks the record's
// key up in a Table and binds the row's JSON object to the variable as,
// for every later step's expressions.
type etlJoin struct {
	table   *Table
	rd      *TableReader // this goroutine's (each fork has its own)
	key     *expression
	as      string
	missing int
	dropped *atomic.Int64 // shared with the forks
	// row is the raw row of the record being processed ("null" when it has
	// none), for a map field that copies it whole.
	row []byte
	// fields are the row's fields the expressions read (as.NAME), when
	// they read nothing else of it; whole: some expression uses the row as
	// a value, so it is decoded whole.
	fields []string
	whole  bool
	// needMap: some expression the machine evaluates reads the row, so
	// its fields are decoded into obj; without, they are only checked
	// (etl_fast.go). hit: the record being processed has a row.
	needMap bool
	hit     bool
	// byKey: the key expression is _key, the record's own Kafka key,
	// which is looked up as it is, without evaluating anything.
	byKey bool
	// obj is the decoded row, refilled on every lookup (expressions never
	// keep it: their results are encoded before the next record), and o
	// the scanner that parses it.
	obj map[string]any
	o   jsonObject
	// prep: the table stores every row prepared (prepareRow), checked
	// once when it is stored and cut down to the fields the expressions
	// read, so that a lookup neither scans nor checks it; vals are the
	// record's row's values of fields (nil: absent). Off when some
	// expression reads the row whole (whole, or copies: a field that is
	// the bare row).
	prep   bool
	copies bool
	vals   [][]byte
	po     jsonObject // prepareRow's scanner
	// canon: the prepared rows hold each field as reshape writes it
	// (appendCanonical), for the spliced join (etl_splice.go), which
	// copies them as they are; canonBuf is prepareRow's.
	canon    bool
	canonBuf []byte
	// looked: the spliced join already looked the record's key up, and
	// found lookedRow (nil: none), which lookup takes rather than look
	// again (the table would count the lookup twice).
	looked    bool
	lookedRow []byte
}

// JoinStats are the etl join's counts since the worker started: records
// processed again after an abort or a restart count again.
type JoinStats struct {
	TableStats
	Dropped int64 // records dropped for want of a row (missing: drop)
}

// parseJoin reads join: {table: TOPIC, key: EXPR, as: NAME, missing: ...}.
func (d *doc) parseJoin(f field) (*etlJoin, error) {
	fs, err := d.fields(f.value, f.key, joinKeys)
	if err != nil {
		return nil, err
	}
	j := &etlJoin{dropped: new(atomic.Int64)}
	var table string
	for _, x := range fs {
		switch x.name {
		case "table":
			if table, err = d.str(x); err == nil {
				if verr := fencing.ValidateName("topic", table); verr != nil {
					err = d.errAt(x.value, x.key, "%v", verr)
				} else if j.table, err = NewTable(table, "topologies.Options.Config"); err == nil {
					j.table.where = fmt.Sprintf("%s in %s:%d", x.key, d.file, x.value.Line)
					j.rd = j.table.own
				}
			}
		case "key":
			j.key, err = d.expression(x, anyValue)
		case "as":
			if j.as, err = d.str(x); err == nil && !validIdent(j.as) {
				err = d.errAt(x.value, x.key, "want a name for the row's variable, letters, digits and _ not starting with a digit (such as product), got %q", j.as)
			}
		case "missing":
			var s string
			if s, err = d.str(x); err == nil {
				switch s {
				case "dead-letter":
					j.missing = missingDeadLetter
				case "drop":
					j.missing = missingDrop
				case "null":
					j.missing = missingNull
				default:
					err = d.errAt(x.value, x.key, "want dead-letter (the default: reason join-missing), drop or null, got %q", s)
				}
			}
		}
		if err != nil {
			return nil, err
		}
	}
	for _, need := range []struct {
		ok   bool
		key  string
		want string
	}{
		{j.table != nil, "table", "the table's topic, a compacted topic keyed by the join key"},
		{j.key != nil, "key", "an expression over the record giving the row's key, such as user"},
		{j.as != "", "as", "the name the row's fields are read under, such as product"},
	} {
		if !need.ok {
			return nil, d.errAt(f.value, f.key+"."+need.key, "missing: want %s", need.want)
		}
	}
	if slices.Contains(metaVars, j.as) {
		return nil, d.errAt(f.value, f.key+".as", "%s is a metadata variable; choose another name", j.as)
	}
	j.byKey = strings.TrimSpace(j.key.src) == "_key"
	if slices.Contains(j.key.fields, j.as) {
		return nil, d.errAt(f.value, f.key+".key", "the key expression uses %s, the row it looks up", j.as)
	}
	return j, nil
}

func validIdent(s string) bool {
	for i, c := range s {
		if c != '_' && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && (i == 0 || !('0' <= c && c <= '9')) {
			return false
		}
	}
	return s != ""
}

// bind makes the row variable a binding of every expression rather than a
// field of the record (no record need have it), and finds what of the row
// the expressions read: only the fields named as as.NAME, or the whole
// row. An expression that is the bare name (a map field copying the row)
// copies the raw row and needs nothing decoded.
func (j *etlJoin) bind(exprs []*expression) {
	j.obj = map[string]any{}
	for _, e := range exprs {
		if e == nil || e == j.key {
			continue
		}
		e.fields = slices.DeleteFunc(e.fields, func(f string) bool { return f == j.as })
		if e.ident == j.as {
			j.copies = true
			continue
		}
		if e.allFields {
			j.whole = true // $env.NAME, $env["NAME"]
			e.readsRow = true
			continue
		}
		root := e.prog.Node()
		if m, ok := root.(*ast.MemberNode); ok && !m.Optional && !m.Method {
			id, isID := m.Node.(*ast.IdentifierNode)
			name, named := m.Property.(*ast.StringNode)
			if isID && named && id.Value == j.as {
				e.rowField = name.Value
			}
		}
		var u rowUses
		u.as = j.as
		ast.Walk(&root, &u)
		e.readsRow = u.bare > 0
		j.whole = j.whole || u.bare > len(u.fields)
		for _, f := range u.fields {
			if !slices.Contains(j.fields, f) {
				j.fields = append(j.fields, f)
			}
		}
	}
}

// rowUses counts an expression's uses of the row variable: bare counts
// every identifier of it, fields the ones read as as.NAME (with a constant
// NAME), each once per use.
type rowUses struct {
	as     string
	bare   int
	fields []string
}

func (u *rowUses) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.IdentifierNode:
		if x.Value == u.as {
			u.bare++
		}
	case *ast.MemberNode:
		id, ok := x.Node.(*ast.IdentifierNode)
		name, named := x.Property.(*ast.StringNode)
		if ok && named && id.Value == u.as {
			u.fields = append(u.fields, name.Value)
		}
	}
}

// lookup joins the record whose environment env holds: it binds the row
// to j.as and reports whether the record goes on.
func (j *etlJoin) lookup(in *pipeline.Record, env *env) (bool, error) {
	if j.byKey {
		// key: _key, the commonest join: the record's own key, as it is.
		if in.Key == nil {
			return j.found(nil, nil, nil, env)
		}
		var r []byte
		if j.looked {
			r, j.looked, j.lookedRow = j.lookedRow, false, nil
		} else {
			var err error
			if r, err = j.rd.row(in.Key); err != nil {
				return false, err
			}
		}
		return j.found(r, nil, in.Key, env)
	}
	v, err := j.key.eval(env.m)
	if err != nil {
		return false, err
	}
	var r []byte
	if v != nil {
		k, err := keyBytes(v)
		if err != nil {
			return false, pipeline.DeadLetter("expression-error", fmt.Errorf("%s: key gave %v (%T), want a string or a number", j.key.where, v, v))
		}
		if r, err = j.rd.row(k); err != nil {
			return false, err
		}
	}
	return j.found(r, v, nil, env)
}

// keyOf is the key v, or the record key key, for an error.
func keyOf(v any, key []byte) any {
	if v == nil && key != nil {
		return bytesKey(key)
	}
	return v
}

// bytesKey prints a record key in errors as text.
type bytesKey []byte

func (k bytesKey) String() string { return string(k) }

// found binds row r of key v (nil: none) to j.as, or applies the missing
// rule, and reports whether the record goes on. A record key looked up as
// it is comes as key rather than v, made a value only for an error.
func (j *etlJoin) found(r []byte, v any, key []byte, env *env) (bool, error) {
	j.hit = r != nil
	if r == nil {
		switch j.missing {
		case missingDrop:
			j.dropped.Add(1)
			return false, nil
		case missingNull:
			env.m[j.as], j.row = nil, nullJSON
			return true, nil
		}
		return false, pipeline.DeadLetter("join-missing", fmt.Errorf("table %s has no row for key %v (%s)", j.table.topic, keyOf(v, key), j.key.where))
	}
	if err := j.decode(r); err != nil {
		return false, pipeline.DeadLetter("malformed-json", fmt.Errorf("table %s, row %v: %w", j.table.topic, keyOf(v, key), err))
	}
	env.m[j.as], j.row = j.obj, r
	return true, nil
}

// decode fills j.obj with what the expressions read of row: the fields
// they name (absent ones left out, so they read as nil), or every field.
func (j *etlJoin) decode(row []byte) error {
	if j.prep {
		return j.unpack(row)
	}
	if err := j.o.parse(row); err != nil {
		return err
	}
	if !j.whole && len(j.fields) == 0 {
		return nil
	}
	if j.needMap {
		clear(j.obj)
	}
	put := func(k string, raw []byte) error {
		if !j.needMap && decodes(raw) {
			return nil // only copied (etl_fast.go), and it cannot fail
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return fmt.Errorf("field %q: %w", k, err)
		}
		if j.needMap {
			j.obj[k] = v
		}
		return nil
	}
	if j.whole {
		for i, k := range j.o.keys {
			if err := put(k, j.o.raws[i]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, f := range j.fields {
		if raw, ok := j.o.get(f); ok {
			if err := put(f, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

var nullJSON = []byte("null")

// field returns the raw value of the row's field name, which is one of
// j.fields, for the record being processed.
func (j *etlJoin) field(name string) ([]byte, bool) {
	if !j.prep {
		return j.o.get(name)
	}
	for i, f := range j.fields {
		if f == name {
			return j.vals[i], j.vals[i] != nil
		}
	}
	return nil, false
}

// A prepared row (with prep) starts with rowGood, then holds, for each
// of j.fields in order, uvarint(0) when the row lacks it, else
// uvarint(len+1) and the field's raw JSON value (with canon, as reshape
// writes it); or it is rowBad and the
// text of the error that dead-letters every record that finds it, the
// same error decode gives for the raw row.
const (
	rowGood = 'P'
	rowBad  = 'E'
)

// prepareRow appends to dst (from its start) the prepared form of row:
// what every lookup of the row would otherwise do (scan and check the
// whole row, check each field it reads) done once, when it is stored,
// and only the fields the expressions read kept: lookups of a large table
// then touch a few bytes a row, not a hundred.
func (j *etlJoin) prepareRow(dst, row []byte) []byte {
	dst = dst[:0]
	fail := func(err error) []byte { return append(append(dst[:0], rowBad), err.Error()...) }
	if err := j.po.parse(row); err != nil {
		return fail(err)
	}
	dst = append(dst, rowGood)
	for _, f := range j.fields {
		raw, ok := j.po.get(f)
		if !ok {
			dst = append(dst, 0)
			continue
		}
		if !decodes(raw) {
			if _, err := decodeJSON(raw); err != nil {
				return fail(fmt.Errorf("field %q: %w", f, err))
			}
		}
		if j.canon {
			// As reshape writes it: the spliced join copies it as it is.
			c, err := appendCanonical(j.canonBuf[:0], raw)
			if err != nil { // not reached: raw decodes
				return fail(fmt.Errorf("field %q: %w", f, err))
			}
			j.canonBuf, raw = c, c
		}
		dst = binary.AppendUvarint(dst, uint64(len(raw))+1)
		dst = append(dst, raw...)
	}
	return dst
}

// unpack binds the prepared row r: its fields' raw values to vals, and
// decoded into obj when the machine reads them (needMap).
func (j *etlJoin) unpack(r []byte) error {
	if len(r) == 0 || r[0] != rowGood {
		if len(r) > 0 {
			r = r[1:]
		}
		return errors.New(string(r))
	}
	if j.needMap {
		clear(j.obj)
	}
	r = r[1:]
	for i, f := range j.fields {
		n, w := binary.Uvarint(r)
		r = r[w:]
		if n == 0 {
			j.vals[i] = nil
			continue
		}
		raw := r[: n-1 : n-1]
		r = r[n-1:]
		j.vals[i] = raw
		if j.needMap {
			v, err := decodeJSON(raw)
			if err != nil {
				return fmt.Errorf("field %q: %w", f, err)
			}
			j.obj[f] = v
		}
	}
	return nil
}

// The etl topology is a pipeline.Starter so that a join's table follows
// the worker's assignment; without a join these do nothing.

// Start implements pipeline.Starter.
func (t *ETL) Start(ctx context.Context, env pipeline.StartEnv) error {
	if t.join == nil {
		return nil
	}
	return t.join.table.Start(ctx, env)
}

// Assigned implements pipeline.Starter.
func (t *ETL) Assigned(parts []int32) {
	if t.join != nil {
		t.join.table.Assigned(parts)
	}
}

// Revoked implements pipeline.Starter.
func (t *ETL) Revoked(parts []int32) {
	if t.join != nil {
		t.join.table.Revoked(parts)
	}
}

// Sync implements pipeline.Starter.
func (t *ETL) Sync(ctx context.Context) error {
	if t.join == nil {
		return nil
	}
	return t.join.table.Sync(ctx)
}

// Stop implements pipeline.Starter.
func (t *ETL) Stop() {
	if t.join != nil {
		t.join.table.Stop()
	}
}

// JoinStats returns the join's counts, and false for an etl without a
// join. It is safe for concurrent use.
func (t *ETL) JoinStats() (JoinStats, bool) {
	if t.join == nil {
		return JoinStats{}, false
	}
	return JoinStats{TableStats: t.join.table.Stats(), Dropped: t.join.dropped.Load()}, true
}
