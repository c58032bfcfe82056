package topologies

import (
	"bytes"

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
// most of the work of both halves is done ahead rather than for every
// record:
//
//   - the row's half: its prepared form (prepareRow) holds each field
//     already as reshape writes it (appendCanonical), so it is copied as
//     it is, after its name quoted once at the start;
//   - the record's half: records of a topic nearly always have the same
//     field names in the same order. Once a record has been found
//     spliceable the slow way (parsed, its names checked: printable
//     ASCII, none repeated, none a field the map adds), its names are
//     kept, quoted, and a later record whose top-level names are those
//     bytes, with nothing between the tokens, is spliceable as it is:
//     scan checks its values as the parser would and compares its names,
//     without splitting it into fields.
//
// Anything else (a record of other names, spaces, no key, no row, a row
// that failed its checks, a value that is not a JSON object) takes the
// general path, which gives the outputs and dead letters this path would
// have given had it been able to: TestSplicedJoinMatchesTheExpressionMachine
// compares the two on random records, spliced or not.
type spliceJoin struct {
	// adds are the fields the map adds, in its order.
	adds []rowAdd
	// names are the quoted top-level field names of the last record
	// found spliceable the slow way, each with its ':' ("seq":); ok: they
	// are set.
	names [][]byte
	ok    bool
	// spliced counts the records this path processed, for tests.
	spliced int64
}

// rowAdd is a field the spliced join adds: its name quoted, with the
// comma before it and the colon after, and the index in the join's
// fields of the row field it copies.
type rowAdd struct {
	quoted []byte
	field  int
}

// planSplice turns the spliced join on when the configuration allows it
// (see spliceJoin); plan calls it once the join's row fields are known.
func (t *ETL) planSplice() {
	j := t.join
	if j == nil || !j.byKey || !j.prep || j.needMap || t.project || len(t.drop) > 0 ||
		t.filter != nil || t.key != nil || t.route != nil || len(t.fields) == 0 ||
		len(t.env.fields) > 0 || t.env.allFields || len(t.env.meta) > 0 {
		return
	}
	s := &spliceJoin{}
	for _, f := range t.fields {
		i := -1
		for k, name := range j.fields {
			if name == f.e.rowField {
				i = k
			}
		}
		if f.e.rowField == "" || f.e.ident != "" || i < 0 {
			return
		}
		s.adds = append(s.adds, rowAdd{quoted: append(appendJSONString([]byte{','}, f.name), ':'), field: i})
	}
	t.splice, j.canon = s, true
}

// processSpliced is Process by the spliced join, reporting false when
// the record must take the general path instead.
func (t *ETL) processSpliced(in *pipeline.Record, out pipeline.Emitter) (bool, error) {
	s, j := t.splice, t.join
	if !s.ok || in.Key == nil || !s.scan(in.Value) {
		return false, nil
	}
	r, err := j.rd.row(in.Key)
	if err != nil {
		return true, err // the general path's error too: the value parses
	}
	if r == nil || j.unpack(r) != nil { // no row, or a bad one: the general path, with r
		j.looked, j.lookedRow = true, r
		return false, nil
	}
	v := in.Value
	n := len(v)
	for _, a := range s.adds {
		n += len(a.quoted) + len(orNull(j.vals[a.field]))
	}
	empty := len(s.names) == 0 // {}: no comma before the first field
	if empty {
		n--
	}
	b := t.slab.make(n)[:0]
	b = append(b, v[:len(v)-1]...)
	for i, a := range s.adds {
		q := a.quoted
		if i == 0 && empty {
			q = q[1:]
		}
		b = append(append(b, q...), orNull(j.vals[a.field])...)
	}
	b = append(b, '}')
	s.spliced++
	out.Emit(pipeline.Output{Key: in.Key, Value: b, Headers: in.Headers, Timestamp: in.Timestamp})
	return true, nil
}

// learn keeps the names of the record the general path just found
// spliceable (obj), for scan.
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
		if err != nil || end >= len(b) {
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

// orNull is raw, or null for a field the row lacks, as the machine reads
// an absent field.
func orNull(raw []byte) []byte {
	if raw == nil {
		return nullJSON
	}
	return raw
}
