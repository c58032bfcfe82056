package wireformat

import (
	"bytes"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/valyala/fastjson"
)

// The generic validator costs about 6 µs and 70 allocations for a
// 100-byte order (it builds a map of the document, and its integer checks
// go through big.Rat). Most topic schemas are one shape: an object of
// scalar properties with types, string enums, numeric bounds, string
// lengths, required and additionalProperties. For those, fastPlan checks a
// parsed document directly. It only ever answers "certainly valid": when
// it cannot say (a document it does not follow, a bound it cannot compare
// exactly, a field it finds wrong), the generic validator judges, so the
// verdict and the error are always the validator's.

// fastPlan is a schema of that shape.
type fastPlan struct {
	props    map[string]*fastProp
	required []string
	closed   bool // additionalProperties: false
}

// fastProp is one property's schema.
type fastProp struct {
	types                  []string // nil: any type
	enum                   []string // nil: any value
	min, max, xmin, xmax   *float64
	minLength, maxLength   int // -1: none
	integerOnly, numberAny bool
}

// annotations are the fields of a compiled schema that never change a
// verdict (identity, bookkeeping and annotations).
var annotations = map[string]bool{
	"up": true, "resource": true, "dynamicAnchors": true, "allPropsEvaluated": true, "allItemsEvaluated": true,
	"numItemsEvaluated": true, "DraftVersion": true, "Location": true, "ID": true, "Anchor": true,
	"RecursiveAnchor": true, "DynamicAnchor": true, "Title": true, "Description": true, "Default": true,
	"Comment": true, "ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// only reports whether every field of s that is neither an annotation nor
// in allowed is unset: a keyword this file does not know (including any a
// later version of the validator adds) means no fast plan.
func only(s *jsonschema.Schema, allowed ...string) bool {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !annotations[name] && !slices.Contains(allowed, name) && !v.Field(i).IsZero() {
			return false
		}
	}
	return true
}

// newFastPlan returns the fast plan of s, or nil if s is not of the shape.
func newFastPlan(s *jsonschema.Schema) *fastPlan {
	if !only(s, "Types", "Properties", "Required", "AdditionalProperties") || s.Types == nil {
		return nil
	}
	if ts := s.Types.ToStrings(); len(ts) != 1 || ts[0] != "object" {
		return nil
	}
	p := &fastPlan{props: map[string]*fastProp{}, required: s.Required}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		p.closed = !a
	default:
		return nil
	}
	for name, ps := range s.Properties {
		fp := newFastProp(ps)
		if fp == nil {
			return nil
		}
		p.props[name] = fp
	}
	return p
}

func newFastProp(s *jsonschema.Schema) *fastProp {
	if s.Bool != nil && *s.Bool {
		return &fastProp{minLength: -1, maxLength: -1} // {} or true: any value
	}
	if !only(s, "Types", "Enum", "Minimum", "Maximum", "ExclusiveMinimum", "ExclusiveMaximum", "MinLength", "MaxLength") {
		return nil
	}
	fp := &fastProp{minLength: -1, maxLength: -1}
	if s.Types != nil {
		fp.types = s.Types.ToStrings()
		for _, t := range fp.types {
			switch t {
			case "number":
				fp.numberAny = true
			case "integer":
				fp.integerOnly = true
			case "null", "boolean", "string":
			default:
				return nil // arrays and objects: the validator's
			}
		}
	}
	if s.Enum != nil {
		for _, v := range s.Enum.Values {
			str, ok := v.(string)
			if !ok {
				return nil
			}
			fp.enum = append(fp.enum, str)
		}
	}
	for _, b := range []struct {
		r   *big.Rat
		dst **float64
	}{{s.Minimum, &fp.min}, {s.Maximum, &fp.max}, {s.ExclusiveMinimum, &fp.xmin}, {s.ExclusiveMaximum, &fp.xmax}} {
		if b.r != nil {
			f, _ := b.r.Float64()
			*b.dst = &f
		}
	}
	if s.MinLength != nil {
		fp.minLength = *s.MinLength
	}
	if s.MaxLength != nil {
		fp.maxLength = *s.MaxLength
	}
	return fp
}

// valid reports whether the document v is certainly valid; false means
// the validator must judge it.
func (p *fastPlan) valid(v *fastjson.Value) bool {
	o, err := v.Object()
	if err != nil {
		return false
	}
	ok := true
	o.Visit(func(k []byte, x *fastjson.Value) {
		if !ok {
			return
		}
		fp, known := p.props[string(k)]
		switch {
		case known:
			ok = fp.valid(x)
		case p.closed:
			ok = false
		}
	})
	if !ok {
		return false
	}
	for _, name := range p.required {
		if o.Get(name) == nil {
			return false
		}
	}
	return true
}

// valid is fastPlan.valid for one property's value (every occurrence of a
// repeated name is checked, so the last, which the validator sees, is).
func (fp *fastProp) valid(x *fastjson.Value) bool {
	kind := ""
	switch x.Type() {
	case fastjson.TypeNull:
		kind = "null"
	case fastjson.TypeTrue, fastjson.TypeFalse:
		kind = "boolean"
	case fastjson.TypeString:
		kind = "string"
	case fastjson.TypeNumber:
		kind = "number"
	default: // an array or an object: valid where no type or enum is asked
		return fp.types == nil && fp.enum == nil
	}
	if fp.types != nil && !fp.hasType(kind, x) {
		return false
	}
	if fp.enum != nil {
		b, err := x.StringBytes()
		if err != nil || !contains(fp.enum, b) {
			return false
		}
	}
	switch kind {
	case "number":
		var buf [32]byte
		f, err := strconv.ParseFloat(string(x.MarshalTo(buf[:0])), 64)
		return err == nil && fp.inBounds(f)
	case "string":
		if fp.minLength >= 0 || fp.maxLength >= 0 {
			b, _ := x.StringBytes()
			n := utf8.RuneCount(b)
			return (fp.minLength < 0 || n >= fp.minLength) && (fp.maxLength < 0 || n <= fp.maxLength)
		}
	}
	return true
}

func (fp *fastProp) hasType(kind string, x *fastjson.Value) bool {
	if slices.Contains(fp.types, kind) {
		return true
	}
	if kind == "number" && fp.integerOnly {
		// An integer literal only: 1.0 and 1e2 are integers too, but
		// the validator decides those.
		var buf [32]byte
		raw := x.MarshalTo(buf[:0])
		return bytes.IndexAny(raw, ".eE") < 0
	}
	return false
}

// inBounds compares f with the bounds; equal to a bound, or not finite, is
// left to the validator (two numbers that round to the same float64 may
// differ).
func (fp *fastProp) inBounds(f float64) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	return (fp.min == nil || f > *fp.min) && (fp.max == nil || f < *fp.max) &&
		(fp.xmin == nil || f > *fp.xmin) && (fp.xmax == nil || f < *fp.xmax)
}

func contains(set []string, b []byte) bool {
	return slices.ContainsFunc(set, func(s string) bool { return s == string(b) })
}
