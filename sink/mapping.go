package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/eosctl/eos"
	"github.com/eosctl/eos/internal/exprnames"
	"github.com/eosctl/eos/pipeline"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// Mode is how a row is written.
type Mode string

const (
	// ModeInsert inserts new keys and leaves existing ones as they are:
	// the first write of a key wins, a repeat is absorbed. The default.
	ModeInsert Mode = "insert"
	// ModeUpsert inserts new keys and overwrites the mapped columns of
	// existing ones: the last write wins. A replay from an old offset
	// rewrites rows to old values until it catches up, so use it only
	// for state that the latest record fully describes.
	ModeUpsert Mode = "upsert"
	// ModeTransition moves an existing row from one status to another:
	// UPDATE table SET status = TO, columns... WHERE key = ? AND status
	// = FROM. When no row matches, the row's current status tells why:
	// already TO means the transition was applied before (a repeat,
	// absorbed); anything else (or no row) is an illegal transition,
	// and the record goes to the dead-letter topic.
	ModeTransition Mode = "transition"
)

// Mapping says how a JSON record becomes a row. Load it from YAML with
// LoadMapping or ParseMapping:
//
//	table: payments
//	key_column: out_trade_no      # the idempotency key: a PRIMARY or UNIQUE key
//	key: out_trade_no             # an expression; default: the eos-idempotency-key header
//	columns:                      # column: expression, over the record's JSON fields
//	  user_id: user
//	  amount_cents: int(amount * 100)
//	mode: insert                  # insert (default), upsert or transition
//	transition:                   # mode transition only
//	  status_column: status
//	  from: "'pending'"
//	  to: "'paid'"
//
// Expressions are github.com/expr-lang/expr, as in eos's topologies: the
// record's top-level JSON fields are variables (integers without a fraction,
// floats otherwise), with the metadata _key, _topic, _partition, _offset and
// _timestamp (Unix ms). A record without a field an expression names is
// dead-lettered as "missing-field"; write $env.name ?? default for an
// optional field.
type Mapping struct {
	Table     string
	KeyColumn string
	// Key computes the idempotency key; nil reads the
	// eos-idempotency-key header (which eos's workers set on every
	// record they produce).
	Key     *Expr
	Columns []Column
	Mode    Mode
	// StatusColumn, From and To are the transition (ModeTransition).
	StatusColumn string
	From, To     *Expr

	once   sync.Once // computes fields and all, from the expressions
	fields []string
	all    bool
}

// Column is one mapped column.
type Column struct {
	Name string
	Expr *Expr
}

// Expr is one compiled expression.
type Expr struct {
	Src    string
	prog   *vm.Program
	fields []string // record fields it names
	// allFields: it uses $env, so it may read any field.
	allFields bool
	vm        vm.VM
}

var metaVars = []string{"_key", "_topic", "_partition", "_offset", "_timestamp"}

// CompileExpr compiles src; what names the expression in errors.
func CompileExpr(what, src string) (*Expr, error) {
	prog, err := expr.Compile(src, expr.Env(map[string]any{}), expr.AllowUndefinedVariables())
	if err != nil {
		return nil, eos.BadConfig("sink.Config", "%s: expression %q does not compile: %s", what, src, firstLine(err.Error()))
	}
	e := &Expr{Src: src, prog: prog}
	c := exprnames.Of(prog.Node())
	if len(c.Callees) > 0 {
		return nil, eos.BadConfig("sink.Config", "%s: expression %q calls unknown function %s()", what, src, c.Callees[0])
	}
	for _, id := range c.Idents {
		if id == "$env" {
			e.allFields = true
		}
		if id != "$env" && !slices.Contains(metaVars, id) && !slices.Contains(c.Lets, id) && !slices.Contains(e.fields, id) {
			e.fields = append(e.fields, id)
		}
	}
	return e, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

// mappingFile is the YAML form of a Mapping.
type mappingFile struct {
	Table      string    `yaml:"table"`
	KeyColumn  string    `yaml:"key_column"`
	Key        string    `yaml:"key"`
	Columns    yaml.Node `yaml:"columns"`
	Mode       string    `yaml:"mode"`
	Transition *struct {
		StatusColumn string `yaml:"status_column"`
		From         string `yaml:"from"`
		To           string `yaml:"to"`
	} `yaml:"transition"`
}

// LoadMapping reads and compiles the mapping file at path.
func LoadMapping(path string) (*Mapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, eos.BadConfig("sink.Config", "mapping: %w", err)
	}
	return ParseMapping(path, data)
}

// ParseMapping compiles a mapping from YAML; file names it in errors.
func ParseMapping(file string, data []byte) (*Mapping, error) {
	var f mappingFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, eos.BadConfig("sink.Config", "%s: the mapping is empty (it needs table, key_column and columns)", file)
		}
		return nil, eos.BadConfig("sink.Config", "%s: %s", file, strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "unmarshal errors:\n", "")), " "))
	}
	bad := func(format string, args ...any) error {
		return eos.BadConfig("sink.Config", "%s: %s", file, fmt.Sprintf(format, args...))
	}
	m := &Mapping{Table: f.Table, KeyColumn: f.KeyColumn, Mode: Mode(f.Mode)}
	if m.Mode == "" {
		m.Mode = ModeInsert
	}
	if f.Key != "" && f.Key != "header" {
		var err error
		if m.Key, err = CompileExpr(file+": key", f.Key); err != nil {
			return nil, err
		}
	}
	if f.Columns.Kind != 0 && f.Columns.Kind != yaml.MappingNode {
		return nil, bad("line %d: columns must map column names to expressions", f.Columns.Line)
	}
	for i := 0; i+1 < len(f.Columns.Content); i += 2 {
		k, v := f.Columns.Content[i], f.Columns.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, bad("line %d: columns.%s must be an expression", v.Line, k.Value)
		}
		e, err := CompileExpr(fmt.Sprintf("%s:%d: columns.%s", file, v.Line, k.Value), v.Value)
		if err != nil {
			return nil, err
		}
		m.Columns = append(m.Columns, Column{Name: k.Value, Expr: e})
	}
	if t := f.Transition; t != nil {
		m.StatusColumn = t.StatusColumn
		var err error
		if t.From != "" {
			if m.From, err = CompileExpr(file+": transition.from", t.From); err != nil {
				return nil, err
			}
		}
		if t.To != "" {
			if m.To, err = CompileExpr(file+": transition.to", t.To); err != nil {
				return nil, err
			}
		}
	}
	if err := m.Validate(); err != nil {
		return nil, eos.BadConfig("sink.Config", "%s: %w", file, err)
	}
	return m, nil
}

// Validate checks the mapping's shape; the database checks the table and
// columns exist when the sink starts.
func (m *Mapping) Validate() error {
	if !identRE.MatchString(m.Table) {
		return fmt.Errorf("table %q is not a plain SQL identifier", m.Table)
	}
	if !identRE.MatchString(m.KeyColumn) {
		return fmt.Errorf("key_column %q is not a plain SQL identifier", m.KeyColumn)
	}
	for _, c := range m.Columns {
		if !identRE.MatchString(c.Name) {
			return fmt.Errorf("column %q is not a plain SQL identifier", c.Name)
		}
		if c.Name == m.KeyColumn {
			return fmt.Errorf("column %q is the key_column: the key comes from key", c.Name)
		}
	}
	switch m.Mode {
	case ModeInsert, ModeUpsert:
		if m.StatusColumn != "" || m.From != nil || m.To != nil {
			return fmt.Errorf("transition is only for mode transition, not %s", m.Mode)
		}
	case ModeTransition:
		if !identRE.MatchString(m.StatusColumn) || m.From == nil || m.To == nil {
			return fmt.Errorf("mode transition needs transition.status_column, transition.from and transition.to")
		}
	default:
		return fmt.Errorf("mode %q: want insert, upsert or transition", m.Mode)
	}
	return nil
}

// row is one record mapped: the key and the column values in the order of
// Mapping.Columns, and for a transition the expected and the new status.
type row struct {
	key      any
	vals     []any
	from, to any
}

// mapRecord evaluates the mapping over r. A record it cannot map is a
// *pipeline.DeadLetterError.
func (m *Mapping) mapRecord(r *kgo.Record) (row, error) {
	env, err := m.recordEnv(r)
	if err != nil {
		return row{}, err
	}
	var out row
	if m.Key == nil {
		for _, h := range r.Headers {
			if h.Key == pipeline.IdempotencyKeyHeader {
				out.key = string(h.Value)
			}
		}
		if out.key == nil {
			return row{}, pipeline.DeadLetter("missing-key", fmt.Errorf("no %s header (set key: in the mapping to compute the key from the record)", pipeline.IdempotencyKeyHeader))
		}
	} else if out.key, err = m.Key.eval(env); err != nil {
		return row{}, err
	}
	if out.key == nil {
		return row{}, pipeline.DeadLetter("missing-key", fmt.Errorf("key %q is null", m.Key.Src))
	}
	out.vals = make([]any, len(m.Columns))
	for i, c := range m.Columns {
		if out.vals[i], err = c.Expr.eval(env); err != nil {
			return row{}, err
		}
	}
	if m.Mode == ModeTransition {
		if out.from, err = m.From.eval(env); err != nil {
			return row{}, err
		}
		if out.to, err = m.To.eval(env); err != nil {
			return row{}, err
		}
	}
	return out, nil
}

func (e *Expr) eval(env map[string]any) (any, error) {
	for _, f := range e.fields {
		if _, ok := env[f]; !ok {
			return nil, pipeline.DeadLetter("missing-field", fmt.Errorf("field %q is missing (write $env.%s ?? default for a field that may be absent)", f, f))
		}
	}
	v, err := e.vm.Run(e.prog, env)
	if err != nil {
		return nil, pipeline.DeadLetter("expression-error", fmt.Errorf("%q: %s", e.Src, firstLine(err.Error())))
	}
	return sqlValue(v)
}

// sqlValue turns an expression's result into a database argument: numbers,
// strings, booleans and nil as they are, objects and arrays as JSON text.
func sqlValue(v any) (any, error) {
	switch v.(type) {
	case map[string]any, []any:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, pipeline.DeadLetter("expression-error", err)
		}
		return string(b), nil
	}
	return v, nil
}

// recordEnv decodes r's JSON object value into an expression environment.
// Only the fields the expressions name are decoded (all of them if one
// uses $env): a record's other fields, a long payload say, are only
// scanned.
func (m *Mapping) recordEnv(r *kgo.Record) (map[string]any, error) {
	fields, all := m.needs()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.Value, &raw); err != nil || raw == nil {
		if err == nil {
			err = fmt.Errorf("value is not a JSON object")
		}
		return nil, pipeline.DeadLetter("malformed-json", err)
	}
	obj := make(map[string]any, len(fields)+len(metaVars))
	decode := func(k string, v json.RawMessage) error {
		if x, ok := scalar(v); ok {
			obj[k] = x
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			return pipeline.DeadLetter("malformed-json", fmt.Errorf("field %q: %w", k, err))
		}
		obj[k] = numbers(x)
		return nil
	}
	if all {
		for k, v := range raw {
			if err := decode(k, v); err != nil {
				return nil, err
			}
		}
	} else {
		for _, k := range fields {
			if v, ok := raw[k]; ok {
				if err := decode(k, v); err != nil {
					return nil, err
				}
			}
		}
	}
	obj["_key"] = string(r.Key)
	obj["_topic"] = r.Topic
	obj["_partition"] = int(r.Partition)
	obj["_offset"] = int(r.Offset)
	obj["_timestamp"] = int(r.Timestamp.UnixMilli())
	return obj, nil
}

// scalar decodes a JSON number (int without a fraction or exponent,
// float64 otherwise), string, boolean or null without a json.Decoder,
// the costliest part of mapping a record; ok is false for anything else
// (objects, arrays, what needs the decoder's errors).
func scalar(v json.RawMessage) (any, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return nil, false
	}
	switch c := v[0]; {
	case c == '"':
		if len(v) >= 2 && v[len(v)-1] == '"' && plain(v[1:len(v)-1]) {
			return string(v[1 : len(v)-1]), true
		}
		var str string
		if json.Unmarshal(v, &str) == nil {
			return str, true
		}
	case c == '-' || (c >= '0' && c <= '9'):
		if !bytes.ContainsAny(v, ".eE") {
			if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				return int(i), true
			}
		}
		var n json.Number
		if json.Unmarshal(v, &n) == nil {
			return numbers(n), true
		}
	case string(v) == "true":
		return true, true
	case string(v) == "false":
		return false, true
	case string(v) == "null":
		return nil, true
	}
	return nil, false
}

// plain: s has no escape, quote or control character, so it is its own
// JSON string's value.
func plain(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c == '"' || c < 0x20 {
			return false
		}
	}
	return true
}

// needs returns the fields the mapping's expressions name, or all=true if
// one of them uses $env.
func (m *Mapping) needs() (fields []string, all bool) {
	m.once.Do(func() {
		exprs := []*Expr{m.Key, m.From, m.To}
		for _, c := range m.Columns {
			exprs = append(exprs, c.Expr)
		}
		for _, e := range exprs {
			if e == nil {
				continue
			}
			m.all = m.all || e.allFields
			for _, f := range e.fields {
				if !slices.Contains(m.fields, f) {
					m.fields = append(m.fields, f)
				}
			}
		}
	})
	return m.fields, m.all
}

// numbers turns json.Numbers into int (no fraction or exponent) or float64.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil && !strings.ContainsAny(string(x), ".eE") {
			return int(i)
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// Row maps r as the sink would: the idempotency key and the values of
// Columns, in order. A record that cannot be mapped is a
// *pipeline.DeadLetterError.
func (m *Mapping) Row(r *kgo.Record) (key any, values []any, err error) {
	row, err := m.mapRecord(r)
	return row.key, row.vals, err
}
