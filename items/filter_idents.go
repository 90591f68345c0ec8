package items

import (
	"sort"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// Names lists the variables the filter reads: every top-level identifier
// (function names excluded) and, for `a.b` / `a["b"]` on a top-level
// identifier a, "a.b". The list is sorted and without duplicates, so a
// caller can reject names its environment does not have (a misspelt field
// otherwise silently selects nothing).
func (f *Filter) Names() []string {
	rewritten, _ := rewriteFilter(f.src)
	tree, err := parser.Parse(rewritten)
	if err != nil {
		return nil
	}
	// ast.Walk visits children first: find the callees in a first pass.
	c := calleeVisitor{}
	ast.Walk(&tree.Node, c)
	v := &nameVisitor{seen: map[string]bool{}, callees: c}
	ast.Walk(&tree.Node, v)
	out := make([]string, 0, len(v.seen))
	for n := range v.seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type calleeVisitor map[ast.Node]bool

func (c calleeVisitor) Visit(node *ast.Node) {
	if n, ok := (*node).(*ast.CallNode); ok {
		c[n.Callee] = true
	}
}

type nameVisitor struct {
	seen    map[string]bool
	callees calleeVisitor
}

func (v *nameVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		id, ok := n.Node.(*ast.IdentifierNode)
		prop, isStr := n.Property.(*ast.StringNode)
		if ok && isStr {
			v.seen[id.Value+"."+prop.Value] = true
		}
	case *ast.IdentifierNode:
		if !v.callees[n] && n.Value != "" && n.Value[0] != '$' && n.Value[0] != '#' {
			v.seen[n.Value] = true
		}
	}
}
