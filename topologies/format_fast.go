package topologies

import (
	"math"
	"slices"

	"github.com/eosctl/eos/internal/wireformat"
	"github.com/eosctl/eos/pipeline"
)

// avroETL is the fast path of an etl topology that reads and writes Avro:
// it evaluates the expressions over the fields decoded from the Avro
// binary and writes the output record from them, without the JSON text
// the generic path decodes to, splits, reshapes and parses again. It gives
// the same outputs and dead letters as that path, and leaves it every
// record it cannot do the same way (see wireformat.Record): those records
// take the generic path, which also fetches schemas ids not seen yet.
// It is off for an etl with a join or one whose expressions read $env.
type avroETL struct {
	t      *ETL
	dec    *wireformat.AvroDecoder
	enc    *wireformat.AvroEncoder
	topics map[string]string
	rec    wireformat.Record
	plans  map[uint32]*avroPlan
	vals   []any  // the computed fields' values, in evaluation order
	buf    []byte // where an output is encoded before the slab copies it
}

// avroPlan is how the records of one schema id go through the etl.
type avroPlan struct {
	ok    bool  // false: every record takes the generic path
	env   []int // per env field, its input field
	eval  []int // the fields computed, as indexes of ETL.fields, in the order reshape evaluates them
	shape *wireformat.Shape
}

// newAvroETL returns the fast path of w, or nil if w is not an etl that
// reads and writes Avro, or has a join or $env.
func newAvroETL(w *formatted) *avroETL {
	t, ok := w.inner.(*ETL)
	dec, okd := w.dec.(*wireformat.AvroDecoder)
	enc, oke := w.enc.(*wireformat.AvroEncoder)
	if !ok || !okd || !oke || t.join != nil || t.env.allFields {
		return nil
	}
	return &avroETL{t: t, dec: dec, enc: enc, topics: w.topics, plans: map[uint32]*avroPlan{}}
}

// process runs the etl on in; false leaves in to the generic path.
func (a *avroETL) process(in *pipeline.Record, out pipeline.Emitter) (bool, error) {
	if !a.dec.Decode(in.Value, &a.rec) {
		return false, nil
	}
	p := a.plans[a.rec.ID()]
	if p == nil {
		p = a.plan()
		a.plans[a.rec.ID()] = p
	}
	if !p.ok {
		return false, nil
	}
	t, env := a.t, a.t.env
	if len(env.meta) > 0 {
		env.loadMeta(in)
	}
	for i, f := range env.fields {
		if env.lazy == nil || !env.lazy[i] { // a lazy field is only copied
			env.m[f] = a.rec.Value(p.env[i])
		}
	}
	if t.filter != nil {
		keep, err := t.filter.eval(env.m)
		if err != nil || keep != true {
			return true, err
		}
	}
	a.vals = a.vals[:0]
	for _, j := range p.eval {
		f := t.fields[j]
		v, err := f.e.eval(env.m)
		if err != nil {
			return true, err
		}
		if err := hasJSON(v); err != nil {
			return true, notJSON(f, v, err)
		}
		a.vals = append(a.vals, v)
	}
	key, to, err := t.keyRoute(in)
	if err != nil {
		return true, err
	}
	v, err := a.enc.AppendShaped(a.buf[:0], a.topics[to], &a.rec, p.shape, a.vals)
	if err != nil {
		return true, deadLetterBad(err)
	}
	a.buf = v
	out.Emit(pipeline.Output{To: to, Key: key, Value: t.slab.clone(v), Headers: in.Headers, Timestamp: in.Timestamp})
	return true, nil
}

// hasJSON says why the JSON path could not write v, or nil if it can.
func hasJSON(v any) error {
	switch x := v.(type) {
	case nil, int, string, bool:
		return nil
	case float64:
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return nil
		}
	}
	_, err := encodeJSON(nil, v)
	return err
}

// plan builds the plan of a.rec's schema id: which input field each
// expression variable reads, which fields are computed in which order,
// and where each output field comes from, as reshape would build the
// output JSON object.
func (a *avroETL) plan() *avroPlan {
	t, names := a.t, a.rec.Names()
	p := &avroPlan{}
	for _, f := range t.env.fields {
		i := slices.Index(names, f)
		if i < 0 {
			return p // a missing field: the generic path dead-letters every record
		}
		p.env = append(p.env, i)
	}
	src := map[string]wireformat.Source{}
	emit := func(j int) { // field j of the map or project
		f := t.fields[j]
		if f.e.ident != "" {
			src[f.name] = wireformat.Source{Input: slices.Index(names, f.e.ident), Computed: -1}
			return
		}
		src[f.name] = wireformat.Source{Input: -1, Computed: len(p.eval)}
		p.eval = append(p.eval, j)
	}
	byName := func(name string) int {
		return slices.IndexFunc(t.fields, func(f etlField) bool { return f.name == name })
	}
	switch {
	case len(t.fields) == 0 && len(t.drop) == 0: // the output is the input
		for i, k := range names {
			src[k] = wireformat.Source{Input: i, Computed: -1}
		}
	case t.project:
		for j, f := range t.fields {
			if !slices.Contains(t.drop, f.name) {
				emit(j)
			}
		}
	default:
		done := make([]bool, len(t.fields))
		for i, k := range names {
			if slices.Contains(t.drop, k) {
				continue
			}
			if j := byName(k); j >= 0 {
				done[j] = true
				emit(j)
			} else {
				src[k] = wireformat.Source{Input: i, Computed: -1}
			}
		}
		for j, f := range t.fields {
			if !done[j] && !slices.Contains(t.drop, f.name) {
				emit(j)
			}
		}
	}
	p.shape = a.enc.Shape(&a.rec, func(name string) wireformat.Source {
		if s, ok := src[name]; ok {
			return s
		}
		return wireformat.Source{Input: -1, Computed: -1}
	}, encodeJSON)
	p.ok = true
	return p
}
