package topologies

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// jsonObject is a JSON object split into its top-level fields, in order,
// each kept as the raw JSON of its value. Splitting validates the whole
// input, nested values included, in one pass without decoding: topologies
// decode only the fields their expressions use, and copy the others to their
// output byte for byte. It is reused from record to record.
//
// It is hand-written rather than github.com/valyala/fastjson or
// github.com/buger/jsonparser because it accepts exactly what encoding/json
// accepts and takes the last of duplicate keys, so a record those would
// count (a broken value after the fields used, 1e999 as +Inf, a leading
// zero) is dead-lettered; the libraries are a little faster only by not
// checking (BENCHMARKS.md, jsonlib_bench_test.go).
type jsonObject struct {
	keys []string
	raws [][]byte
	// prev holds the keys of earlier records, by position: records of one
	// topic nearly always repeat their field names in the same order, so
	// the names are compared with these instead of allocated again.
	prev []string
	// pre is a value already split by preparsed: parsing it is skipped.
	pre []byte
}

const maxJSONDepth = 1000

// parse splits b, which must be exactly one JSON object.
func (o *jsonObject) parse(b []byte) error {
	if pre := o.pre; pre != nil {
		o.pre = nil
		if len(b) == len(pre) && len(b) > 0 && &b[0] == &pre[0] {
			return nil
		}
	}
	o.keys, o.raws = o.keys[:0], o.raws[:0]
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		if i >= len(b) {
			return errors.New("the value is empty, want a JSON object")
		}
		return fmt.Errorf("the value is not a JSON object (starts with %q)", b[i])
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return syntaxErr(b, i, "a field name")
			}
			end, esc, err := scanString(b, i)
			if err != nil {
				return err
			}
			name, err := o.name(len(o.keys), b[i:end], esc)
			if err != nil {
				return fmt.Errorf("bad field name at byte %d: %w", i, err)
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return syntaxErr(b, i, "':'")
			}
			i = skipSpace(b, i+1)
			vEnd, err := skipValue(b, i, 1)
			if err != nil {
				return err
			}
			o.keys = append(o.keys, name)
			o.raws = append(o.raws, b[i:vEnd])
			i = skipSpace(b, vEnd)
			if i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return syntaxErr(b, i, "',' or '}'")
		}
	}
	if i = skipSpace(b, i); i != len(b) {
		return fmt.Errorf("invalid JSON: data after the object at byte %d", i)
	}
	return nil
}

// name returns the field name of the quoted JSON string q, the n-th field
// of the object, reusing the string the n-th field of an earlier record had
// if it is the same.
func (o *jsonObject) name(n int, q []byte, esc bool) (string, error) {
	key := q[1 : len(q)-1]
	if !esc && n < len(o.prev) && o.prev[n] == string(key) { // compared without allocating
		return o.prev[n], nil // valid UTF-8, as prev holds only such names
	}
	if esc || !utf8.Valid(key) {
		return unquote(q)
	}
	name := string(key)
	if n < len(o.prev) {
		o.prev[n] = name
	} else if n == len(o.prev) && n < maxRememberedKeys {
		o.prev = append(o.prev, name)
	}
	return name, nil
}

// maxRememberedKeys bounds jsonObject.prev: objects with more fields than
// this allocate the names of the rest.
const maxRememberedKeys = 64

// unquote decodes a JSON string with escapes, or with bytes encoding/json
// replaces with U+FFFD.
func unquote(q []byte) (string, error) {
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

// get returns the raw value of field name; the last one if it repeats, as
// encoding/json would decode it.
func (o *jsonObject) get(name string) ([]byte, bool) {
	for i := len(o.keys) - 1; i >= 0; i-- {
		if o.keys[i] == name {
			return o.raws[i], true
		}
	}
	return nil, false
}

func syntaxErr(b []byte, i int, want string) error {
	if i >= len(b) {
		return fmt.Errorf("invalid JSON: the value ends early, want %s", want)
	}
	return fmt.Errorf("invalid JSON at byte %d: want %s, got %q", i, want, b[i])
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the index after the string starting at b[i] == '"',
// and whether it has escapes.
func scanString(b []byte, i int) (int, bool, error) {
	esc := false
	for j := i + 1; j < len(b); j++ {
		j = skipPlain(b, j)
		if j >= len(b) {
			break
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, esc, nil
		case c == '\\':
			esc = true
			j++
			if j >= len(b) {
				break
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return 0, false, fmt.Errorf("invalid JSON: bad \\u escape at byte %d", j)
				}
				j += 4
			default:
				return 0, false, fmt.Errorf("invalid JSON: bad escape \\%c at byte %d", b[j], j)
			}
		case c < 0x20:
			return 0, false, fmt.Errorf("invalid JSON: control character in a string at byte %d", j)
		}
	}
	return 0, false, errors.New("invalid JSON: unterminated string")
}

// skipPlain returns the index of the first byte at or after j inside a
// string that is a quote, a backslash or a control character, or len(b).
// It tests eight bytes at a time: long values (a record's padding, a text
// field) are most of the bytes a record has, and a byte-by-byte loop made
// the scanner three times slower than github.com/valyala/fastjson on 1 KiB
// records (BENCHMARKS.md). A word with a hit, or a false hit, which the
// test can give only above a real one, ends at its lowest hit; the last
// few bytes are tested one by one.
func skipPlain(b []byte, j int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; j+8 <= len(b); j += 8 {
		w := binary.LittleEndian.Uint64(b[j:])
		q, bs := w^('"'*ones), w^('\\'*ones) // zero bytes where the quotes, backslashes are
		hits := (w-0x20*ones)&^w | (q-ones)&^q | (bs-ones)&^bs
		if hits&highs != 0 {
			// The lowest flagged byte is a real hit: a borrow, which
			// makes the false ones, only runs upwards from one.
			return j + bits.TrailingZeros64(hits&highs)/8
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c < 0x20 || c == '"' || c == '\\' {
			return j
		}
	}
	return j
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i, depth int) (int, error) {
	if depth > maxJSONDepth {
		return 0, errors.New("invalid JSON: nested too deeply")
	}
	if i >= len(b) {
		return 0, syntaxErr(b, i, "a value")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '{' || c == '[':
		return skipContainer(b, i, depth)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(b, i)
	}
	return 0, syntaxErr(b, i, "a value")
}

func skipContainer(b []byte, i, depth int) (int, error) {
	obj := b[i] == '{'
	close := byte(']')
	if obj {
		close = '}'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == close {
		return i + 1, nil
	}
	for {
		if obj {
			if i >= len(b) || b[i] != '"' {
				return 0, syntaxErr(b, i, "a field name")
			}
			end, _, err := scanString(b, i)
			if err != nil {
				return 0, err
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, syntaxErr(b, i, "':'")
			}
			i = skipSpace(b, i+1)
		}
		end, err := skipValue(b, i, depth+1)
		if err != nil {
			return 0, err
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == close {
			return i + 1, nil
		}
		return 0, syntaxErr(b, i, fmt.Sprintf("',' or '%c'", close))
	}
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, syntaxErr(b, i, "a value")
	}
	return i + len(lit), nil
}

// scanNumber follows JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return 0, badNumber(start)
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return 0, badNumber(start)
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return 0, badNumber(start)
		}
		i = j
	}
	return i, nil
}

// skipDigits returns the index of the first byte at or after i that is
// not a decimal digit, or len(b).
func skipDigits(b []byte, i int) int {
	for i < len(b) && b[i]-'0' <= 9 {
		i++
	}
	return i
}

func badNumber(start int) error {
	return fmt.Errorf("invalid JSON: bad number at byte %d", start)
}

// decodeJSON decodes one raw JSON value (already validated) for an
// expression: strings, bools and nil as themselves, integers as int, other
// numbers as float64, objects and arrays as encoding/json decodes them.
func decodeJSON(raw []byte) (any, error) {
	switch c := raw[0]; {
	case c == '"':
		body := raw[1 : len(raw)-1]
		if bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
			return unquote(raw)
		}
		return string(body), nil
	case c == 't':
		return true, nil
	case c == 'f':
		return false, nil
	case c == 'n':
		return nil, nil
	case c == '-' || '0' <= c && c <= '9':
		if n, ok := smallInt(raw); ok {
			return n, nil
		}
		s := string(raw)
		if bytes.IndexAny(raw, ".eE") < 0 {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return int(n), nil
			}
		}
		return strconv.ParseFloat(s, 64)
	}
	var v any
	err := json.Unmarshal(raw, &v)
	return v, err
}

// encodeJSON appends the JSON of an expression's result to b.
func encodeJSON(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, fmt.Errorf("%v is not a JSON number", x)
		}
		return appendFloat(b, x), nil
	}
	out, err := json.Marshal(v)
	return append(b, out...), err
}

// appendJSONString appends s as a JSON string: plain ASCII directly, the
// rest through encoding/json's escaping.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			out, _ := json.Marshal(s) // a string always marshals
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendFloat appends a finite float as encoding/json would write it.
func appendFloat(b []byte, f float64) []byte {
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(b, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// smallInt parses a validated JSON integer of at most 18 digits without
// allocating; anything else (a fraction, an exponent, more digits) is left
// to strconv.
func smallInt(raw []byte) (int, bool) {
	neg := raw[0] == '-'
	digits := raw
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return 0, false
	}
	n := 0
	for _, d := range digits {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int(d-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
