package interp

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// quoteUnprotected closes what the scanner's reading of bash's quoting
// can get wrong (a `case` pattern's ")" inside $( ) taken for its end, a
// $( ) inside an unquoted here-document): it parses the output script with
// bash's grammar (mvdan.cc/sh) and puts double quotes around every
// reference the scanner emitted bare (for a double-quoted or here-document
// context) that bash would in fact expand unquoted, where the value would
// be split into words and globbed. A quoted reference means the same as a
// bare one in every context bash does not split, so the rewrite only ever
// removes splitting. It returns the script and the references with their
// offsets updated; a script that does not parse is returned as it is (the
// caller's analysis reports it).
func quoteUnprotected(script string, refs []shellRef) (string, []shellRef) {
	if len(refs) == 0 {
		return script, refs
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		return script, refs
	}
	byOut := map[int]int{} // output offset of the '$' → index in refs
	for i, r := range refs {
		if !emittedQuoted(script, r) {
			byOut[r.out] = i
		}
	}
	if len(byOut) == 0 {
		return script, refs
	}
	var stack []syntax.Node
	var fix []int // indexes into refs
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if pe, ok := n.(*syntax.ParamExp); ok && pe.Param != nil {
			if i, ok := byOut[int(pe.Dollar.Offset())]; ok && refs[i].name == pe.Param.Value && !protected(stack) {
				fix = append(fix, i)
			}
		}
		stack = append(stack, n)
		return true
	})
	if len(fix) == 0 {
		return script, refs
	}
	slices.Sort(fix)
	fixed := map[int]bool{}
	for _, i := range fix {
		fixed[i] = true
	}
	out := slices.Clone(refs)
	var b strings.Builder
	prev := 0
	for _, i := range fix {
		r := refs[i]
		end := r.out + len("${"+r.name+"}")
		b.WriteString(script[prev:r.out])
		b.WriteString(`"` + script[r.out:end] + `"`)
		prev = end
	}
	b.WriteString(script[prev:])
	// Each reference moves by the two quotes of every fixed reference
	// before it, plus the opening quote of its own.
	for j := range out {
		for _, i := range fix {
			if refs[i].out < refs[j].out {
				out[j].out += 2
			}
		}
		if fixed[j] {
			out[j].out++
		}
	}
	return b.String(), out
}

// emittedQuoted reports whether the scanner wrote r as "${…}".
func emittedQuoted(script string, r shellRef) bool {
	end := r.out + len("${"+r.name+"}")
	return r.out > 0 && script[r.out-1] == '"' && end < len(script) && script[end] == '"'
}

// protected reports whether a parameter expansion under the given
// ancestors (outermost first) is expanded without word splitting: its
// nearest quoting context is "…" or a here-document's body, not a command
// substitution's script. Arithmetic contexts count as protected: the
// scanner puts values there itself (integers only), never references.
func protected(ancestors []syntax.Node) bool {
	for i := len(ancestors) - 1; i >= 0; i-- {
		switch x := ancestors[i].(type) {
		case *syntax.DblQuoted:
			return true
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false
		case *syntax.ArithmExp, *syntax.ArithmCmd:
			return true
		case *syntax.Redirect:
			// Inside a here-document body (Hdoc), not its operator word.
			return x.Hdoc != nil && i+1 < len(ancestors) && ancestors[i+1] == syntax.Node(x.Hdoc)
		}
	}
	return false
}
