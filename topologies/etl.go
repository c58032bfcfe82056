package topologies

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/eosctl/eos/fencing"
	"github.com/eosctl/eos/pipeline"
	"go.yaml.in/yaml/v3"
)

// etlKeys are the keys of an etl configuration, in the order they apply.
var etlKeys = []string{"topology", "join", "filter", "map", "project", "drop", "key", "route", "outputs", "format"}

// ETL is the declarative etl topology: per JSON record, join with a
// table, filter, reshape, re-key and route, as configured by a YAML file.
// It keeps no state of its own (a join's table is a view of its topic).
//
//	join:                           # look up a row of a table (see Table)
//	  table: catalog                #   its topic: compacted, keyed by the join key
//	  key: string(seq)              #   the row's key, an expression over the record
//	  as: product                   #   later expressions read the row as product.price
//	  missing: dead-letter          #   no row: dead-letter (join-missing), drop or null
//	filter: amount >= 10            # keep only records for which this is true
//	map:                            # add or replace fields (the others stay, in order)
//	  cents: int(round(amount * 100))
//	project:                        # or: output exactly these fields, in this order
//	  user: user
//	drop: [pad]                     # remove fields
//	key: user                       # the output record's key
//	route: 'amount > 90 ? "big" : ""'   # a name under outputs, or "" for the main output
//	outputs:
//	  big: orders-big
//
// Every expression sees the input record (see the package's expression
// rules), and the joined row under its name. A record whose value is not a JSON object, that lacks a field an
// expression names, or on which an expression fails, is dead-lettered.
type ETL struct {
	filter  *expression
	fields  []etlField // map or project
	project bool
	drop    []string
	key     *expression
	route   *expression
	outputs map[string]string
	env     *env
	join    *etlJoin // nil without a join
	shaped  shapedFields
	// scratch is where reshape builds an output that slab then copies
	// (etl_fast.go); reference turns the fast paths off, for tests.
	scratch   []byte
	slab      outputSlab
	reference bool
	done      []bool // reshape's, reused
	names     quotedNames
	splice    *spliceJoin // the spliced join, when it applies (etl_splice.go)
	doc       *doc        // the configuration, which Fork compiles again
}

type etlField struct {
	name string
	e    *expression
}

// NewETL reads the etl configuration at path.
func NewETL(path string) (*ETL, error) {
	return newETL(Options{Config: path})
}

func newETL(o Options) (*ETL, error) {
	d, err := readDoc(o.Config)
	if err != nil {
		return nil, err
	}
	d.warn = o.Warn
	return parseETL(d)
}

func parseETL(d *doc) (*ETL, error) {
	if err := d.topologyKey("etl"); err != nil {
		return nil, err
	}
	fs, err := d.fields(d.root, "", etlKeys)
	if err != nil {
		return nil, err
	}
	t := &ETL{outputs: map[string]string{}, doc: d}
	var routeField *field
	for _, f := range fs {
		switch f.name {
		case "join":
			t.join, err = d.parseJoin(f)
		case "filter":
			t.filter, err = d.expression(f, boolValue)
		case "map", "project":
			if len(t.fields) > 0 {
				return nil, d.errAt(f.line, f.key, "use either map (add or replace fields) or project (exactly these fields), not both")
			}
			t.project = f.name == "project"
			t.fields, err = d.etlFields(f)
		case "drop":
			t.drop, err = d.names(f)
		case "key":
			t.key, err = d.expression(f, anyValue)
		case "route":
			t.route, err = d.expression(f, anyValue)
			routeField = &f
		case "outputs":
			t.outputs, err = d.outputs(f)
		}
		if err != nil {
			return nil, err
		}
	}
	if routeField != nil && len(t.outputs) == 0 {
		return nil, d.errAt(routeField.line, "route", "route chooses among the outputs, but no outputs are declared (add outputs: {name: topic})")
	}
	exprs := []*expression{t.filter, t.key, t.route}
	for _, f := range t.fields {
		exprs = append(exprs, f.e)
	}
	if t.join != nil {
		t.join.bind(exprs)
		if !t.join.byKey { // _key is read from the record as it is
			exprs = append(exprs, t.join.key)
		}
	}
	t.env = newEnv(exprs...)
	t.plan()
	return t, nil
}

// etlFields reads a map or project mapping of field name -> expression.
func (d *doc) etlFields(f field) ([]etlField, error) {
	fs, err := d.fields(f.value, f.key, nil)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, d.errAt(f.value, f.key, "want at least one field: expression")
	}
	var out []etlField
	for _, x := range fs {
		e, err := d.expression(x, anyValue)
		if err != nil {
			return nil, err
		}
		out = append(out, etlField{x.name, e})
	}
	return out, nil
}

// names reads a list of field names.
func (d *doc) names(f field) ([]string, error) {
	if f.value.Kind != yaml.SequenceNode {
		return nil, d.errAt(f.value, f.key, "want a list of field names, such as [pad, debug]")
	}
	var out []string
	for _, n := range f.value.Content {
		s, err := d.str(field{key: f.key, value: n})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// outputs reads a mapping of output name -> topic.
func (d *doc) outputs(f field) (map[string]string, error) {
	fs, err := d.fields(f.value, f.key, nil)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, x := range fs {
		topic, err := d.str(x)
		if err != nil {
			return nil, err
		}
		if err := fencing.ValidateName("topic", topic); err != nil {
			return nil, d.errAt(x.value, x.key, "%v", err)
		}
		out[x.name] = topic
	}
	return out, nil
}

// Fork implements pipeline.Forker: an etl of the same configuration,
// compiled again so that its expressions and scratch buffers are its own,
// that looks rows up in the same join table through a TableReader of its
// own. The worker's Sync of the table (on t) serves the forks too.
func (t *ETL) Fork() pipeline.Transform {
	d := *t.doc
	d.warn = nil // said once, by the first parse
	f, err := parseETL(&d)
	if err != nil {
		panic(fmt.Sprintf("topologies: the etl configuration %s parsed once but not again: %v", d.file, err))
	}
	f.reference, f.shaped.on = t.reference, t.shaped.on
	if t.join != nil {
		j := f.join
		j.table, j.rd, j.dropped = t.join.table, t.join.table.Reader(), t.join.dropped
	}
	return f
}

// Released implements pipeline.Releaser: the outputs' chunks are reused.
func (t *ETL) Released() { t.slab.release() }

// Declare implements pipeline.Declarer.
func (t *ETL) Declare() pipeline.Declaration {
	return pipeline.Declaration{Outputs: maps.Clone(t.outputs), DeadLetters: true}
}

// Process implements pipeline.Transform.
func (t *ETL) Process(_ context.Context, in *pipeline.Record, out pipeline.Emitter) error {
	if t.splice != nil && !t.reference && !t.shaped.on {
		if done, err := t.processSpliced(in, out); done {
			return err
		}
	}
	if err := t.env.load(in); err != nil {
		if t.join != nil {
			t.join.looked = false // not reached: a value the spliced join scanned parses
		}
		return err
	}
	if t.join != nil {
		if ok, err := t.join.lookup(in, t.env); !ok || err != nil {
			return err
		}
	}
	if t.filter != nil {
		keep, err := t.filter.eval(t.env.m)
		if err != nil {
			return err
		}
		if keep != true {
			return nil
		}
	}
	value := in.Value
	reshaped := len(t.fields) > 0 || len(t.drop) > 0
	if reshaped {
		var err error
		if value, err = t.reshape(in.Value); err != nil {
			return err
		}
	}
	key, to, err := t.keyRoute(in)
	if err != nil {
		return err
	}
	o := pipeline.Output{To: to, Key: key, Value: value, Headers: in.Headers, Timestamp: in.Timestamp}
	if fe, ok := out.(fieldsEmitter); ok && t.shaped.on { // an encoder: spare it parsing the value again
		keys, raws := t.outputFields(value, reshaped)
		fe.emitFields(o, keys, raws)
		return nil
	}
	out.Emit(o)
	return nil
}

// keyRoute evaluates the key and route expressions: the output's key and
// the output it goes to ("" the main one).
func (t *ETL) keyRoute(in *pipeline.Record) ([]byte, string, error) {
	key := in.Key
	if t.key != nil {
		v, err := t.key.eval(t.env.m)
		if err != nil {
			return nil, "", err
		}
		if key, err = keyBytes(v); err != nil {
			return nil, "", pipeline.DeadLetter("expression-error", fmt.Errorf("%s: %w", t.key.where, err))
		}
	}
	to := ""
	if t.route != nil {
		v, err := t.route.eval(t.env.m)
		if err != nil {
			return nil, "", err
		}
		s, ok := v.(string)
		if !ok {
			return nil, "", pipeline.DeadLetter("expression-error", fmt.Errorf("%s: route gave %v (%T), want the name of an output or \"\"", t.route.where, v, v))
		}
		if _, known := t.outputs[s]; s != "" && !known {
			return nil, "", pipeline.DeadLetter("unknown-route", fmt.Errorf("%s: route gave %q, which is not one of the outputs (%v)", t.route.where, s, slices.Sorted(maps.Keys(t.outputs))))
		}
		to = s
	}
	return key, to, nil
}

// reshape builds the output value from the parsed input (t.env.obj).
func (t *ETL) reshape(orig []byte) ([]byte, error) {
	obj := &t.env.obj
	var b []byte
	if t.shaped.on {
		b = t.shaped.output(len(orig) + 32*len(t.fields))
	} else {
		b = t.scratch[:0]
	}
	b = append(b, '{')
	n := 0
	t.shaped.reset()
	put := func(name string, raw []byte, v any, how int) error {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = t.names.appendName(b, n-1, name)
		start := len(b)
		var err error
		switch how {
		case computed:
			b, err = encodeJSON(b, v)
		case rowCopy:
			b, err = appendCanonical(b, raw)
		default:
			b = append(b, raw...)
		}
		t.shaped.add(name, start, len(b))
		return err
	}
	value := func(f etlField) ([]byte, any, int, error) {
		if t.join != nil && f.e.ident == t.join.as {
			return t.join.row, nil, rawCopy, nil
		}
		if f.e.ident != "" {
			raw, _ := obj.get(f.e.ident) // present: env.load checked
			return raw, nil, rawCopy, nil
		}
		if f.e.rowField != "" && t.join.hit && !t.reference {
			raw, ok := t.join.field(f.e.rowField)
			if !ok {
				raw = nullJSON // as the machine reads an absent field
			}
			if t.join.canon {
				return raw, nil, rawCopy, nil // stored as rowCopy writes it
			}
			return raw, nil, rowCopy, nil
		}
		v, err := f.e.eval(t.env.m)
		return nil, v, computed, err
	}
	emitField := func(f etlField) error {
		raw, v, how, err := value(f)
		if err != nil {
			return err
		}
		if err := put(f.name, raw, v, how); err != nil {
			return notJSON(f, v, err)
		}
		return nil
	}
	if t.project {
		for _, f := range t.fields {
			if slices.Contains(t.drop, f.name) {
				continue
			}
			if err := emitField(f); err != nil {
				return nil, err
			}
		}
		return t.finish(append(b, '}')), nil
	}
	if t.spliceable(orig) {
		if t.splice != nil {
			t.splice.learn(obj)
		}
		// The input as it is, then the new fields (etl_fast.go).
		b, n = append(b[:0], orig[:len(orig)-1]...), len(obj.keys)
		for _, f := range t.fields {
			if err := emitField(f); err != nil {
				return nil, err
			}
		}
		return t.finish(append(b, '}')), nil
	}
	done := t.done[:0]
	for range t.fields {
		done = append(done, false)
	}
	t.done = done
	for i, k := range obj.keys {
		if slices.Contains(t.drop, k) || slices.Index(obj.keys[i+1:], k) >= 0 {
			continue // dropped, or repeated later (the last one wins)
		}
		j := slices.IndexFunc(t.fields, func(f etlField) bool { return f.name == k })
		if j < 0 {
			_ = put(k, obj.raws[i], nil, rawCopy)
			continue
		}
		done[j] = true
		if err := emitField(t.fields[j]); err != nil {
			return nil, err
		}
	}
	for j, f := range t.fields {
		if !done[j] && !slices.Contains(t.drop, f.name) {
			if err := emitField(f); err != nil {
				return nil, err
			}
		}
	}
	return t.finish(append(b, '}')), nil
}

// How reshape writes a field's value.
const (
	rawCopy  = iota // the raw JSON as it is
	rowCopy         // a row field's raw JSON, as the machine would write it
	computed        // an expression's result
)

// finish returns reshape's output b: the shaped buffer itself for an
// encoder, which is done with it before the next record, else a copy in
// the slab, b's buffer kept for the next record.
func (t *ETL) finish(b []byte) []byte {
	if t.shaped.on {
		return b
	}
	t.scratch = b
	return t.slab.clone(b)
}

// notJSON is the dead letter of a record for which f computed v, which
// has no JSON text.
func notJSON(f etlField, v any, err error) error {
	return pipeline.DeadLetter("expression-error", fmt.Errorf("%s: cannot encode %v as JSON: %w", f.e.where, v, err))
}

// keyBytes turns a key expression's result into a record key: strings as
// they are, numbers and booleans in decimal, nil as no key, anything else as
// JSON.
func keyBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(x), nil
	case int:
		return strconv.AppendInt(nil, int64(x), 10), nil
	case float64:
		return strconv.AppendFloat(nil, x, 'f', -1, 64), nil
	case bool:
		return strconv.AppendBool(nil, x), nil
	}
	return encodeJSON(nil, v)
}
