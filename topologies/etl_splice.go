package topologies

import (
	"bytes"
	"encoding/binary"

	"github.com/eosctl/eos/pipeline"
)

// The spliced join: the etl's fastest path, for the commonest enrichment,
// a join by the record's own key whose map only adds fields of the row:
//
//	join: {table: customers, key: _key, as: c}
//	map: {name: c.name, tier: c.tier}
//
// with no filter, key, route, drop or project, and no expression reading
// the record. The output is then the record's value with the row's fields
// added before its closing brace (reshape's splice, etl_fast.go), and
// both halves of that are prepared ahead rather than for every record:
//
//   - the row's half: its prepared form (prepareRow) starts with the
//     added fields as reshape writes them (`,"name":"Ada","tier":2`),
//     rendered once when the row is stored;
//   - the record's half: records of a topic nearly always have the same
//     field names in the same order. Once a record has been found
//     spliceable the slow way (parsed, its names checked: printable
//     ASCII, none repeated, none a field the map adds), its names are
//     kept, quoted, and a later record whose top-level names are those
//     bytes, with no space between the tokens, is spliceable as it is:
//     spliceScan checks its values as the parser would and compares its
//     names, without splitting it into fields.
//
// Anything else (a record of other names, spaces, no row, a row that
// failed its checks, a value that is not a JSON object) takes the general
// path, which gives the outputs and dead letters this path would have
// given had it been able to: TestETLFastPathMatchesTheExpressionMachine
// compares the two on random records, spliced or not.
type spliceJoin struct {
	// names are the quoted top-level field names of the last record
	// found spliceable the slow way, each with its ':' ("seq":); ok: they
	// are set.
	names [][]byte
	ok    bool
	// spliced counts the records this path processed, for tests.
	spliced int64
}

// planSplice turns the spliced join on when the configuration allows it
// (see spliceJoin); plan calls it.
func (t *ETL) planSplice() {
	j := t.join
	if j == nil || !j.byKey || !j.prep || j.needMap || t.project || len(t.drop) > 0 ||
		t.filter != nil || t.key != nil || t.route != nil || len(t.fields) == 0 ||
		len(t.env.fields) > 0 || t.env.allFields || len(t.env.meta) > 0 {
		return
	}
	for _, f := range t.fields {
		if f.e.rowField == "" || f.e.ident != "" {
			return
		}
	}
	t.splice = &spliceJoin{}
	for _, f := range t.fields {
		j.adds = append(j.adds, rowAdd{quoted: append(appendJSONString([]byte{','}, f.name), ':'), field: f.e.rowField})
	}
}

// rowAdd is a field the spliced join adds: its quoted name, with the
// comma before it and the colon after, and the row field it copies.
type rowAdd struct {
	quoted []byte
	field  string
}

// appendAdds appends the spliced join's added fields for the row whose
// fields the prepared row's scanner j.po holds, as reshape writes them: a
// field the row lacks as null, as the expression machine reads it. It
// reports false for a value appendCanonical cannot write.
func (j *etlJoin) appendAdds(dst []byte) ([]byte, bool) {
	for _, a := range j.adds {
		dst = append(dst, a.quoted...)
		raw, ok := j.po.get(a.field)
		if !ok {
			raw = nullJSON
		}
		var err error
		if dst, err = appendCanonical(dst, raw); err != nil {
			return dst, false
		}
	}
	return dst, true
}

// spliced returns the added fields of the prepared row r, nil if it has
// none (a bad row, or one whose fields appendCanonical could not write).
func spliced(r []byte) []byte {
	if len(r) == 0 || r[0] != rowGood {
		return nil
	}
	n, w := binary.Uvarint(r[1:])
	if n == 0 || w <= 0 {
		return nil
	}
	return r[1+w : 1+w+int(n)]
}

// processSpliced is Process by the spliced join, reporting false when
// the record must take the general path instead.
func (t *ETL) processSpliced(in *pipeline.Record, out pipeline.Emitter) (bool, error) {
	s := t.splice
	if !s.ok || in.Key == nil || !s.scan(in.Value) {
		return false, nil
	}
	r, err := t.join.rd.row(in.Key)
	if err != nil {
		return true, err // the general path's error too: the value parses
	}
	adds := spliced(r)
	if adds == nil { // no row, or a bad one: the general path, with r
		t.join.looked, t.join.lookedRow = true, r
		return false, nil
	}
	s.spliced++
	v := in.Value
	if len(s.names) == 0 {
		adds = adds[1:] // {}: no comma before the first field
	}
	b := t.slab.make(len(v) - 1 + len(adds) + 1)
	n := copy(b, v[:len(v)-1])
	n += copy(b[n:], adds)
	b[n] = '}'
	out.Emit(pipeline.Output{Key: in.Key, Value: b, Headers: in.Headers, Timestamp: in.Timestamp})
	return true, nil
}

// learn keeps the names of the record the general path just found
// spliceable (obj), for spliceScan.
func (s *spliceJoin) learn(obj *jsonObject) {
	if s.ok && len(s.names) == len(obj.keys) {
		same := true
		for i, k := range obj.keys {
			q := s.names[i]
			if len(q) != len(k)+3 || string(q[1:len(q)-2]) != k {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	s.names = s.names[:0]
	for _, k := range obj.keys {
		s.names = append(s.names, append(appendJSONString(nil, k), ':'))
	}
	s.ok = true
}

// scan reports whether b is a JSON object whose top-level names are
// s.names, in order, with nothing between its tokens, and every value
// valid as the parser checks it. Such a value is spliceable: its names
// were checked when they were learnt, and it is exactly as long as
// reshape would write it.
func (s *spliceJoin) scan(b []byte) bool {
	if len(b) < 2 || b[0] != '{' {
		return false
	}
	if len(s.names) == 0 {
		return len(b) == 2 && b[1] == '}'
	}
	i := 1
	for n, q := range s.names {
		if !bytes.HasPrefix(b[i:], q) {
			return false
		}
		i += len(q)
		end, err := skipValue(b, i, 1)
		if err != nil || end == i || end >= len(b) {
			return false
		}
		if n == len(s.names)-1 {
			return b[end] == '}' && end == len(b)-1
		}
		if b[end] != ',' {
			return false
		}
		i = end + 1
	}
	return false // not reached
}
