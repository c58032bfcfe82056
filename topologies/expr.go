package topologies

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eosctl/eos/internal/exprnames"
	"github.com/eosctl/eos/pipeline"
	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// Expressions
//
// Topology configurations compute values with github.com/expr-lang/expr,
// compiled once at start. An expression sees the top-level fields of the
// record's JSON value as variables (numbers without a fraction or exponent
// are integers, others floats), and the record's metadata as _key (string),
// _topic, _partition, _offset and _timestamp (Unix milliseconds).
//
// A field an expression names must be in the record: if it is not, the
// record is dead-lettered as "missing-field" rather than evaluated with a
// silent nil. For an optional field write $env.name with a default, for
// example `$env.discount ?? 0`: $env.name alone is nil when absent, and an
// ordering comparison with nil fails (a dead letter for every such record),
// which is why compiling warns about one. Calling a function expr does not
// know is a configuration error.

// Metadata variables, always defined.
var metaVars = []string{"_key", "_topic", "_partition", "_offset", "_timestamp"}

type exprKind int

const (
	anyValue  exprKind = iota
	boolValue          // must be boolean (filter)
)

// expression is one compiled expression of a configuration.
type expression struct {
	src   string
	where string // "FILE:LINE: KEY", for runtime errors
	prog  *vm.Program
	// fields are the record fields it names; a missing one dead-letters.
	fields []string
	// allFields: it uses $env, so every field must be in its environment.
	allFields bool
	meta      []string // the metadata variables it uses
	// ident is set when the expression is just a field name: its raw JSON
	// can be copied as it is.
	ident string
	// rowField is set, by a join's bind, when the expression is just
	// as.NAME, a field of the joined row: etlFast copies its JSON
	// without the expression machine.
	rowField string
	// readsRow: a join's bind found the expression reading fields of the
	// row through the expression machine (as.NAME inside more).
	readsRow bool
	vm       vm.VM
}

// expression compiles the scalar at f.
func (d *doc) expression(f field, kind exprKind) (*expression, error) {
	src, err := d.str(f)
	if err != nil {
		return nil, err
	}
	return d.compile(f.value.Line, f.key, src, kind)
}

func (d *doc) compile(line int, key, src string, kind exprKind) (*expression, error) {
	opts := []expr.Option{expr.Env(map[string]any{}), expr.AllowUndefinedVariables()}
	if kind == boolValue {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(src, opts...)
	fail := func(format string, args ...any) error {
		return &ConfigError{File: d.file, Line: line, Key: key, Reason: fmt.Sprintf(format, args...)}
	}
	if err != nil {
		msg := firstLine(err.Error())
		if kind == boolValue && strings.HasPrefix(msg, "expected bool") {
			return nil, fail("expression %q must be boolean: %s", src, msg)
		}
		return nil, fail("expression %q does not compile: %s", src, msg)
	}
	e := &expression{src: src, where: fmt.Sprintf("%s:%d: %s", d.file, line, key), prog: prog}
	root := prog.Node()
	c := exprnames.Of(root)
	if len(c.Callees) > 0 {
		return nil, fail("expression %q calls unknown function %s()", src, c.Callees[0])
	}
	for _, id := range c.Idents {
		switch {
		case id == "$env":
			e.allFields = true
			e.meta = metaVars
		case slices.Contains(metaVars, id):
			if !slices.Contains(e.meta, id) {
				e.meta = append(e.meta, id)
			}
		case slices.Contains(c.Lets, id), slices.Contains(e.fields, id):
		default:
			e.fields = append(e.fields, id)
		}
	}
	if id, ok := root.(*ast.IdentifierNode); ok && !slices.Contains(metaVars, id.Value) && id.Value != "$env" {
		e.ident = id.Value
	}
	if d.warn != nil {
		for _, f := range c.NilCompared {
			d.warn(fmt.Sprintf("%s:%d: %s: expression %q compares $env.%s, which is nil when the field is absent, and nil compares with nothing: every record without it is dead-lettered; give it a default, e.g. ($env.%s ?? 0)", d.file, line, key, src, f, f))
		}
	}
	return e, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// eval runs e over env. A runtime error is a dead letter naming the
// expression.
func (e *expression) eval(env map[string]any) (any, error) {
	out, err := e.vm.Run(e.prog, env)
	if err != nil {
		return nil, pipeline.DeadLetter("expression-error", fmt.Errorf("%s: %q: %s", e.where, e.src, firstLine(err.Error())))
	}
	return out, nil
}

// env builds the environments expressions run in: the record's metadata and
// the fields the expressions need, decoded once per record.
type env struct {
	fields []string // union of the fields the expressions name
	// lazy[i]: fields[i] is named only by expressions that copy its raw
	// JSON, so load checks it is there (and decodable) but does not
	// decode it; nil: every field is decoded.
	lazy      []bool
	allFields bool
	meta      map[string]bool // metadata variables the expressions use
	m         map[string]any
	obj       jsonObject
}

func newEnv(exprs ...*expression) *env {
	e := &env{m: map[string]any{}, meta: map[string]bool{}}
	for _, x := range exprs {
		if x == nil {
			continue
		}
		e.allFields = e.allFields || x.allFields
		for _, m := range x.meta {
			e.meta[m] = true
		}
		for _, f := range x.fields {
			if !slices.Contains(e.fields, f) {
				e.fields = append(e.fields, f)
			}
		}
	}
	return e
}

// decodeOnly marks the fields that none of exprs names as lazy: load
// checks them but leaves them out of the environment (exprs are the
// expressions that run on it; the others copy raw JSON).
func (e *env) decodeOnly(exprs ...*expression) {
	e.lazy = make([]bool, len(e.fields))
	for i, f := range e.fields {
		e.lazy[i] = !slices.ContainsFunc(exprs, func(x *expression) bool { return x != nil && slices.Contains(x.fields, f) })
	}
}

func (e *env) loadMeta(in *pipeline.Record) {
	for m := range e.meta {
		switch m {
		case "_key":
			e.m[m] = string(in.Key)
		case "_topic":
			e.m[m] = in.Topic
		case "_partition":
			e.m[m] = int(in.Partition)
		case "_offset":
			e.m[m] = int(in.Offset)
		case "_timestamp":
			e.m[m] = int(in.Timestamp.UnixMilli())
		}
	}
}

// load parses in's value and fills the environment. A value that is not a
// JSON object, or lacks a field an expression names, is a dead letter.
func (e *env) load(in *pipeline.Record) error {
	if err := e.obj.parse(in.Value); err != nil {
		return pipeline.DeadLetter("malformed-json", err)
	}
	if len(e.meta) > 0 {
		e.loadMeta(in)
	}
	if e.allFields {
		clear(e.m) // the fields differ from record to record
		e.loadMeta(in)
		for i, k := range e.obj.keys {
			v, err := decodeJSON(e.obj.raws[i])
			if err != nil {
				return pipeline.DeadLetter("malformed-json", fmt.Errorf("field %q: %w", k, err))
			}
			e.m[k] = v
		}
	}
	for i, f := range e.fields {
		raw, ok := e.obj.get(f)
		if !ok {
			return pipeline.DeadLetter("missing-field", fmt.Errorf("field %q is missing (for a field that may be absent write $env.%s ?? DEFAULT, e.g. $env.%s ?? 0)", f, f, f))
		}
		if e.allFields || e.lazy != nil && e.lazy[i] && decodes(raw) {
			continue
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return pipeline.DeadLetter("malformed-json", fmt.Errorf("field %q: %w", f, err))
		}
		e.m[f] = v
	}
	return nil
}
