package interp

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ShellNames parses a shell step's script (placeholders of scope rewritten
// as for CheckShell) as bash and returns the variable names bash expands
// in it and the names the script sets itself: assignments (also in
// declare/local/export/readonly), for-loop variables and the name
// arguments of read, mapfile/readarray, getopts and unset. Text bash does
// not expand — single quotes, quoted here-documents, comments — gives no
// name. ok is false when the script cannot be read that way (CheckShell
// reports why when it matters).
func ShellNames(script string, scope Scope) (expanded, assigned map[string]bool, ok bool) {
	sc := newShellRewrite(script, scope.vars(), true)
	if err := sc.run(); err != nil {
		return nil, nil, false
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(sc.out.String()), "")
	if err != nil {
		return nil, nil, false
	}
	expanded, assigned = map[string]bool{}, map[string]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.ParamExp:
			if x.Param != nil && !strings.HasPrefix(x.Param.Value, "__PRODIGY_V_") {
				expanded[x.Param.Value] = true
			}
		case *syntax.Assign:
			if x.Name != nil {
				assigned[x.Name.Value] = true
			}
		case *syntax.WordIter:
			if x.Name != nil {
				assigned[x.Name.Value] = true
			}
		case *syntax.CallExpr:
			if len(x.Args) > 1 && nameBuiltins[x.Args[0].Lit()] {
				for _, w := range x.Args[1:] {
					if lit := w.Lit(); validName(lit) {
						assigned[lit] = true
					}
				}
			}
		}
		return true
	})
	return expanded, assigned, true
}
