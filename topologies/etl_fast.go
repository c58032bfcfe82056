package topologies

import (
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The etl topology's fast paths. Most map and project fields are a field
// of the record (user) or of the joined row (product.price): their
// values are copied from the raw JSON rather than decoded for the
// expression machine and encoded again, and fields only such copies read
// are checked, not decoded. The output is what the machine would have
// written, byte for byte (etl_fast_test.go compares the two on random
// records): a record field is copied as it is, as it always was; a row
// field is written as encodeJSON(decodeJSON(raw)) would write it, which
// is its raw JSON for plain ASCII strings, booleans, null and integers,
// and the full decode and encode for anything else.

// plan sets the fast paths up once the expressions are compiled and the
// join has bound its row: which fields the expression machine needs
// decoded, and whether the row must be decoded into a map.
func (t *ETL) plan() {
	var vm []*expression // the expressions the machine evaluates
	vm = append(vm, t.filter, t.key, t.route)
	for _, f := range t.fields {
		if !t.copied(f.e) {
			vm = append(vm, f.e)
		}
	}
	if t.join != nil {
		if !t.join.byKey {
			vm = append(vm, t.join.key)
		}
		j := t.join
		j.needMap = j.whole || slices.ContainsFunc(vm, func(e *expression) bool { return e != nil && e.readsRow })
		if j.prep = !j.whole && !j.copies; j.prep {
			j.vals = make([][]byte, len(j.fields))
			j.table.prepare = j.prepareRow
		}
	}
	t.env.decodeOnly(vm...)
	t.planSplice()
}

// copied reports whether reshape copies e's value from raw JSON (when
// the record has a row, for a row field) rather than evaluating it.
func (t *ETL) copied(e *expression) bool {
	return e.ident != "" || e.rowField != ""
}

// Prefetch implements pipeline.Prefetcher for a join by the record's own
// key: it reads the table memory the lookups of records will touch, a
// cache miss or two a record with a large table (table_index.go).
func (t *ETL) Prefetch(records []*kgo.Record) {
	if t.join != nil && t.join.byKey {
		t.join.rd.prefetch(records)
	}
}

// decodes reports whether decodeJSON cannot fail on the validated raw
// value: strings, literals and integers of up to 18 digits. Numbers out
// of float64's range (1e999) fail, and so may objects and arrays holding
// one.
func decodes(raw []byte) bool {
	switch c := raw[0]; {
	case c == '"' || c == 't' || c == 'f' || c == 'n':
		return true
	case c == '-' || '0' <= c && c <= '9':
		_, _, _, err := parseNumber(raw)
		return err == nil
	}
	return false
}

// parseNumber parses the validated JSON number raw as decodeJSON does (an
// int when it has no fraction or exponent and fits, else a float64),
// without boxing it.
func parseNumber(raw []byte) (n int64, f float64, isInt bool, err error) {
	if n, ok := smallInt(raw); ok {
		return int64(n), 0, true, nil
	}
	if !slices.ContainsFunc(raw, func(c byte) bool { return c == '.' || c == 'e' || c == 'E' }) {
		if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return n, 0, true, nil
		}
	}
	f, err = strconv.ParseFloat(string(raw), 64)
	return 0, f, false, err
}

// appendCanonical appends what encodeJSON(decodeJSON(raw)) would append
// for the validated raw value: raw itself when that is the same, else
// the decode and encode.
func appendCanonical(b, raw []byte) ([]byte, error) {
	switch c := raw[0]; {
	case c == '"':
		if plainASCII(raw[1 : len(raw)-1]) {
			return append(b, raw...), nil
		}
	case c == 't' || c == 'f' || c == 'n':
		return append(b, raw...), nil
	case c == '-' || '0' <= c && c <= '9':
		if shortestDecimal(raw) {
			return append(b, raw...), nil
		}
		n, f, isInt, err := parseNumber(raw)
		switch {
		case err != nil:
			return b, err
		case isInt:
			return strconv.AppendInt(b, n, 10), nil // -0 is 0
		}
		return appendFloat(b, f), nil // finite: ParseFloat succeeded
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return b, err
	}
	return encodeJSON(b, v)
}

// shortestDecimal reports whether the validated JSON number raw is a
// decimal fraction that appendFloat writes back as it is: no exponent, a
// last digit that is not 0, at most 15 significant digits (so no shorter
// decimal is the same float64: distinct decimals of 15 digits are
// distinct float64s) and at least 1e-6 (below, appendFloat writes an
// exponent; 15 digits stay under 1e21, where it also would).
func shortestDecimal(raw []byte) bool {
	i := 0
	if raw[0] == '-' {
		i++
	}
	intStart := i
	for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
		i++
	}
	if i == len(raw) || raw[i] != '.' || raw[len(raw)-1] == '0' {
		return false
	}
	intDigits := i - intStart
	i++
	frac := raw[i:]
	for _, c := range frac {
		if c < '0' || c > '9' {
			return false // an exponent
		}
	}
	if intDigits == 1 && raw[intStart] == '0' { // 0.000ddd
		zeros := 0
		for zeros < len(frac) && frac[zeros] == '0' {
			zeros++
		}
		return zeros < 6 && len(frac)-zeros <= 15
	}
	return intDigits+len(frac) <= 15
}

// spliceable reports whether reshape's output for a map is the input
// value orig without its closing brace, then the map's fields: no field
// dropped, none of the map's fields already in the record, no repeated
// name, and orig is the object reshape would write, byte for byte. That
// is the case when orig is exactly as long as that object (field names
// printable ASCII, so written as they are): any space or escape would
// make it longer. Not for an encoder, which wants every field's place.
func (t *ETL) spliceable(orig []byte) bool {
	obj := &t.env.obj
	if t.reference || t.shaped.on || len(t.drop) > 0 || len(orig) < 2 {
		return false
	}
	size := 2 + max(len(obj.keys)-1, 0) // braces, commas
	for i, k := range obj.keys {
		if !plainASCII(k) || slices.Contains(obj.keys[i+1:], k) || slices.ContainsFunc(t.fields, func(f etlField) bool { return f.name == k }) {
			return false
		}
		size += len(k) + 3 + len(obj.raws[i]) // "k":raw
	}
	if size != len(orig) {
		return false
	}
	// The fields are orig's own: its last value ends at its last brace.
	if n := len(obj.keys); n > 0 {
		last := obj.raws[n-1]
		return len(last) > 0 && &orig[len(orig)-1-len(last)] == &last[0]
	}
	return true
}

// plainASCII reports whether s is printable ASCII without a backslash:
// a JSON string body that decodes to itself and that appendJSONString
// writes back as it is.
func plainASCII[T string | []byte](s T) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

// quotedNames remembers the output's field names as reshape writes them
// ("name":), by position: outputs nearly always have the same fields in
// the same order, so each is quoted once rather than for every record.
type quotedNames struct {
	names  []string
	quoted [][]byte
}

// appendName appends name, the n-th field of the output, quoted, and ':'.
func (q *quotedNames) appendName(b []byte, n int, name string) []byte {
	if n < len(q.names) && q.names[n] == name {
		return append(b, q.quoted[n]...)
	}
	quoted := append(appendJSONString(nil, name), ':')
	if n < maxRememberedKeys {
		for n >= len(q.names) { // a spliced output starts past the input's fields
			q.names, q.quoted = append(q.names, ""), append(q.quoted, nil)
		}
		q.names[n], q.quoted[n] = name, quoted
	}
	return append(b, quoted...)
}

// outputSlab hands out the etl topology's output values as pieces of
// 32 KiB chunks (the largest the allocator serves from its size classes)
// rather than one allocation each. A piece is written once; its chunk is
// handed out again once the worker says the client is done with every
// output (release, at the end of each transaction), so a steady worker
// writes its outputs into the same memory, which is neither zeroed by the
// allocator again nor collected.
type outputSlab struct {
	buf  []byte   // the chunk handed out from
	used [][]byte // chunks filled since the last release
	free [][]byte // released chunks, handed out again before new ones
}

const outputSlabBytes = 32 << 10

// make returns n bytes of the slab, to be written once, whose capacity
// ends with them. They are not zeroed: a released chunk holds what its
// last outputs were.
func (s *outputSlab) make(n int) []byte {
	if n > cap(s.buf)-len(s.buf) {
		if n > outputSlabBytes/8 {
			return make([]byte, n)
		}
		s.next()
	}
	m := len(s.buf)
	s.buf = s.buf[:m+n]
	return s.buf[m : m+n : m+n]
}

// next makes a fresh chunk the current one: a released one if any. The
// filled chunk is kept for the next release unless outputSlabKeep are
// already: an ETL driven by something other than the worker, which never
// releases, keeps no more than that.
func (s *outputSlab) next() {
	if s.buf != nil && len(s.used) < outputSlabKeep {
		s.used = append(s.used, s.buf)
	}
	if k := len(s.free); k > 0 {
		s.buf, s.free[k-1] = s.free[k-1][:0], nil
		s.free = s.free[:k-1]
		return
	}
	s.buf = make([]byte, 0, outputSlabBytes)
}

// outputSlabKeep bounds the chunks a slab keeps for reuse (16 MiB): a
// transaction of 100 ms at a million records a second, in each of two
// lanes. A longer transaction's outputs beyond it are allocated and
// collected as before, so a worker with long intervals holds at most this
// much more memory than it did without reuse.
const outputSlabKeep = 512

// release makes every chunk handed out so far reusable: the client holds
// none of the outputs in them (pipeline.Releaser). It keeps the chunks
// the outputs since the last release filled (at most outputSlabKeep, see
// next) and drops any released before and not used since, so a burst's
// memory goes back to the collector after the next, smaller transaction.
func (s *outputSlab) release() {
	clear(s.free)
	s.free = append(s.free[:0], s.used...)
	clear(s.used)
	s.used = s.used[:0]
	s.buf = s.buf[:0]
}

// clone returns a copy of b in the slab, whose capacity ends with it.
func (s *outputSlab) clone(b []byte) []byte {
	c := s.make(len(b))
	copy(c, b)
	return c
}
