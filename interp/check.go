package interp

import (
	"errors"
	"strings"
)

// Scope lists the variable names visible to a step at validation time,
// when values are not known: "item", "item_id", "map.total", workflow env
// names, capture variables … (see Vars for the naming).
type Scope []string

func (sc Scope) vars() Vars {
	v := make(Vars, len(sc))
	for _, n := range sc {
		v[n] = nil
	}
	return v
}

// CheckShell validates the script of a shell step before anything runs:
// every placeholder names a variable of scope (or has a :-default), none is
// inside a quoted here-document, the script parses as bash, and no
// placeholder is used as a variable name (read, printf -v, unset,
// declare -n, [[ -v ]] …) or inside the script of a second shell (bash -c,
// eval, ssh …; allowed with opts.AllowNestedShell). Placeholders in
// arithmetic contexts pass here: InterpolateShell requires their values to
// be integers at run time. Problems carry their line and column in script.
func CheckShell(script string, scope Scope, opts ShellOptions) []*ScriptError {
	sc := newShellRewrite(script, scope.vars(), true)
	if err := sc.run(); err != nil {
		return []*ScriptError{asScriptError(err)}
	}
	if len(sc.refs) == 0 {
		return nil
	}
	script = sc.out.String()
	uses, err := analyseShell(script, sc.refs)
	if err != nil {
		return []*ScriptError{{Line: 1, Col: 1, Err: err}}
	}
	var out []*ScriptError
	for _, u := range uses {
		if e := u.staticError(script, opts); e != nil {
			out = append(out, e)
		}
	}
	return out
}

// CheckText validates text interpolated with Interpolate (claude prompts,
// write_file path and content, step env values): every placeholder is
// well formed and names a variable of scope (or has a :-default).
func CheckText(text string, scope Scope) []*ScriptError {
	vars := scope.vars()
	var out []*ScriptError
	for i := 0; i < len(text); {
		switch {
		case strings.HasPrefix(text[i:], "$${"):
			i += 3
		case strings.HasPrefix(text[i:], "${"):
			line, col := lineColAt(text, i)
			ph, end, err := parseVarPlaceholder(text, i)
			if err != nil {
				return append(out, &ScriptError{Line: line, Col: col, Err: err})
			}
			if err := ph.known(vars); err != nil {
				out = append(out, &ScriptError{Line: line, Col: col, Err: err})
			}
			i = end
		default:
			i++
		}
	}
	return out
}

// StaticText returns text with its $${ escapes undone when it holds no
// placeholder, and ok false when it does (its value is only known at run
// time).
func StaticText(text string) (string, bool) {
	out, err := Interpolate(text, nil)
	if err != nil {
		return "", false
	}
	return out, true
}

func asScriptError(err error) *ScriptError {
	var se *ScriptError
	if errors.As(err, &se) {
		return se
	}
	return &ScriptError{Line: 1, Col: 1, Err: err}
}

// Closest returns the candidate nearest to name within edit distance 2
// (ties: the smaller name), or "" when none is that close: the "did you
// mean" of typo checks.
func Closest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := editDistance(name, c); d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}
