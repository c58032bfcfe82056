// Package exprnames lists the names an expr-lang expression uses, so that
// the YAML configurations built on it (the etl and aggregate topologies, the
// database sink's mapping) can check them at load time: which fields a
// record must have, which functions it calls (none are allowed), and which
// fields it compares while they may be absent.
package exprnames

import (
	"slices"

	"github.com/expr-lang/expr/ast"
)

// Names are the names an expression uses.
type Names struct {
	// Idents are the identifiers read, in order, with repeats.
	Idents []string
	// Callees are the functions called by name.
	Callees []string
	// Lets are the variables the expression declares itself (let x = ...).
	Lets []string
	// NilCompared are the fields read as $env.NAME (nil when the record
	// lacks them) that an ordering comparison (<, >, <=, >=) takes as they
	// are, without a default: nil compares with nothing, so such an
	// expression fails on every record without the field.
	NilCompared []string
}

// Of walks the expression tree rooted at root.
func Of(root ast.Node) Names {
	var c collector
	ast.Walk(&root, &c)
	return c.Names
}

type collector struct{ Names }

func (c *collector) Visit(n *ast.Node) {
	switch x := (*n).(type) {
	case *ast.BinaryNode:
		if slices.Contains([]string{"<", ">", "<=", ">="}, x.Operator) {
			for _, side := range []ast.Node{x.Left, x.Right} {
				if f, ok := envField(side); ok && !slices.Contains(c.NilCompared, f) {
					c.NilCompared = append(c.NilCompared, f)
				}
			}
		}
	case *ast.IdentifierNode:
		c.Idents = append(c.Idents, x.Value)
	case *ast.CallNode:
		if id, ok := x.Callee.(*ast.IdentifierNode); ok {
			c.Callees = append(c.Callees, id.Value)
		}
	case *ast.VariableDeclaratorNode:
		c.Lets = append(c.Lets, x.Name)
	}
}

// envField reports whether n reads a field through $env ($env.NAME or
// $env["NAME"]), and which.
func envField(n ast.Node) (string, bool) {
	m, ok := n.(*ast.MemberNode)
	if !ok {
		return "", false
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok || id.Value != "$env" {
		return "", false
	}
	name, ok := m.Property.(*ast.StringNode)
	if !ok {
		return "", false
	}
	return name.Value, true
}
