package interp

import (
	"fmt"
	"path"
	"reflect"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ShellOptions are a shell step's opt-ins.
type ShellOptions struct {
	// AllowNestedShell lets placeholders appear in the script of a second
	// shell (`bash -c`, `eval`, `ssh` …; the step key allow_nested_shell).
	// That shell parses the value as code: only for trusted values.
	AllowNestedShell bool
	// MaxEnvValue is PrepareShell's limit for values passed in the
	// environment (0 = DefaultMaxEnvValue, negative = no limit).
	MaxEnvValue int
}

// useKind classifies where bash uses a placeholder's value.
type useKind int

const (
	// useArith: bash evaluates the value as an arithmetic expression
	// (which runs $(…) inside array subscripts): integers only.
	useArith useKind = iota + 1
	// useName: bash takes the value as a variable name, evaluating a
	// subscript in it: refused.
	useName
	// useNested: a second shell parses the value as code: refused unless
	// the step opts in.
	useNested
)

// shellUse is a reference found in an evaluating context.
type shellUse struct {
	ref  shellRef
	kind useKind
	what string // the context, for messages: "[[ … -gt … ]]", "bash -c" …
}

// check applies the rule of the use's context to the value at run time.
func (u shellUse) check(val string, opts ShellOptions) error {
	switch u.kind {
	case useArith:
		if integerRE.MatchString(strings.TrimSpace(val)) {
			return nil
		}
		return u.errorf("%s is used in %s, where bash evaluates its value as arithmetic (running any $(…) in it), "+
			"but the value %q is not an integer; compare as strings ([[ \"$x\" == … ]]) or check the value first",
			u.ref.text, u.what, clipForError(val, 60))
	case useName:
		return u.errorf("%s is used as a variable name in %s, where bash evaluates a subscript in it as code; "+
			"use the value as data (\"$PRODIGY_ITEM…\" or a quoted placeholder as an argument)", u.ref.text, u.what)
	case useNested:
		if opts.AllowNestedShell {
			return nil
		}
		return u.errorf("%s is inside the script of a second shell (%s), which would parse the value as code; "+
			"pass it as data instead (bash -c '… \"$1\" …' _ \"%s\", or read $PRODIGY_ITEM… in the inner script), "+
			"or set allow_nested_shell: true on the step if the value is trusted", u.ref.text, u.what, u.ref.text)
	}
	return nil
}

// staticError is the validation-time verdict: names and nested shells are
// refused; arithmetic is checked at run time, where the value is known.
func (u shellUse) staticError(src string, opts ShellOptions) *ScriptError {
	if u.kind == useArith {
		return nil
	}
	err := u.check("", opts)
	if err == nil {
		return nil
	}
	line, col := lineColAt(src, u.ref.src)
	return &ScriptError{Line: line, Col: col, Err: err.(*ScriptError).Err}
}

func (u shellUse) errorf(format string, args ...any) error {
	return &ScriptError{Line: -1, Err: fmt.Errorf(format, args...)}
}

// shellNames are the programs that run their -c argument (or stdin, or a
// script file) as shell code.
var shellNames = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true,
	"ash": true, "yash": true, "posh": true, "fish": true, "csh": true, "tcsh": true, "pwsh": true,
}

// evalBuiltins run their arguments as code when at the command position.
var evalBuiltins = map[string]bool{"eval": true, "source": true, ".": true, "trap": true}

// nameBuiltins take variable names as arguments.
var nameBuiltins = map[string]bool{"read": true, "unset": true, "mapfile": true, "readarray": true, "getopts": true}

// analyseShell parses script (shellRewrite's output) and returns the
// references that appear in contexts where bash evaluates a value.
func analyseShell(script string, refs []shellRef) ([]shellUse, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(script), "")
	if err != nil {
		return nil, fmt.Errorf("cannot be parsed as bash, so its placeholders cannot be checked: %w", err)
	}
	a := &analysis{byOut: map[int]shellRef{}, seen: map[int]bool{}, intVars: map[string]bool{}}
	for _, r := range refs {
		a.byOut[r.out] = r
	}
	// First pass: variables declared integer (declare -i n): assigning to
	// them evaluates the value.
	syntax.Walk(f, func(n syntax.Node) bool {
		if d, ok := n.(*syntax.DeclClause); ok {
			if flags := declFlags(d); strings.Contains(flags, "i") {
				for _, as := range d.Args {
					if as.Name != nil {
						a.intVars[as.Name.Value] = true
					}
				}
			}
		}
		return true
	})
	syntax.Walk(f, a.visit)
	return a.uses, nil
}

type analysis struct {
	byOut   map[int]shellRef
	seen    map[int]bool
	intVars map[string]bool
	uses    []shellUse
}

// mark records every reference inside n as used in the given context.
func (a *analysis) mark(n syntax.Node, kind useKind, what string) {
	if n == nil || reflect.ValueOf(n).IsNil() { // also a typed nil (*syntax.Word)(nil)
		return
	}
	syntax.Walk(n, func(m syntax.Node) bool {
		pe, ok := m.(*syntax.ParamExp)
		if !ok || pe.Param == nil {
			return true
		}
		r, ok := a.byOut[int(pe.Dollar.Offset())]
		if !ok || r.name != pe.Param.Value {
			return true
		}
		key := r.out*4 + int(kind)
		if !a.seen[key] {
			a.seen[key] = true
			a.uses = append(a.uses, shellUse{ref: r, kind: kind, what: what})
		}
		return true
	})
}

func (a *analysis) visit(n syntax.Node) bool {
	switch x := n.(type) {
	case *syntax.ArithmExp:
		what := "$(( ))"
		if x.Bracket {
			what = "$[ ]"
		}
		a.mark(x, useArith, what)
	case *syntax.ArithmCmd:
		a.mark(x, useArith, "(( ))")
	case *syntax.LetClause:
		a.mark(x, useArith, "let")
	case *syntax.CStyleLoop:
		a.mark(x, useArith, "for (( ))")
	case *syntax.ParamExp:
		if x.Index != nil {
			a.mark(x.Index, useArith, "an array subscript ${a[…]}")
		}
		if x.Slice != nil {
			a.mark(x.Slice.Offset, useArith, "a substring offset ${v:…}")
			a.mark(x.Slice.Length, useArith, "a substring length ${v:o:…}")
		}
	case *syntax.Assign:
		if x.Index != nil {
			a.mark(x.Index, useArith, "an array subscript a[…]=")
		}
		if x.Name != nil && a.intVars[x.Name.Value] {
			a.mark(x.Value, useArith, "an assignment to the integer variable "+x.Name.Value)
		}
	case *syntax.ArrayElem:
		if x.Index != nil {
			a.mark(x.Index, useArith, "an array subscript ([…]=)")
		}
	case *syntax.BinaryTest:
		switch x.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLss, syntax.TsLeq, syntax.TsGtr, syntax.TsGeq:
			what := fmt.Sprintf("[[ … %s … ]]", x.Op)
			a.mark(x.X, useArith, what)
			a.mark(x.Y, useArith, what)
		}
	case *syntax.UnaryTest:
		if x.Op == syntax.TsVarSet || x.Op == syntax.TsRefVar {
			a.mark(x.X, useName, fmt.Sprintf("[[ %s … ]]", x.Op))
		}
	case *syntax.DeclClause:
		a.decl(x)
	case *syntax.CallExpr:
		a.call(x)
	case *syntax.Stmt:
		if call, ok := x.Cmd.(*syntax.CallExpr); ok && readsStdinAsCode(call) {
			for _, r := range x.Redirs {
				a.mark(r.Word, useNested, "input of "+lit(call.Args[0]))
				a.mark(r.Hdoc, useNested, "input of "+lit(call.Args[0]))
			}
		}
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			a.pipe(x)
		}
	}
	return true
}

// decl handles declare/typeset/local/export/readonly/nameref.
func (a *analysis) decl(d *syntax.DeclClause) {
	flags := declFlags(d)
	for _, as := range d.Args {
		if as.Naked && as.Value != nil {
			if l := lit(as.Value); strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+") {
				continue
			}
			if !literalAssignPrefix(as.Value) {
				a.mark(as.Value, useName, d.Variant.Value)
			}
			continue
		}
		switch {
		case strings.Contains(flags, "i"):
			a.mark(as.Value, useArith, d.Variant.Value+" -i")
			a.mark(as.Array, useArith, d.Variant.Value+" -i")
		case strings.Contains(flags, "n") || d.Variant.Value == "nameref":
			a.mark(as.Value, useName, d.Variant.Value+" -n")
		}
	}
}

// literalAssignPrefix reports whether a naked declare word starts with a
// literal NAME= (so the placeholder is in the value part).
func literalAssignPrefix(w *syntax.Word) bool {
	if len(w.Parts) == 0 {
		return false
	}
	var first string
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		first = p.Value
	case *syntax.DblQuoted:
		if len(p.Parts) > 0 {
			if l, ok := p.Parts[0].(*syntax.Lit); ok {
				first = l.Value
			}
		}
	case *syntax.SglQuoted:
		first = p.Value
	}
	name, _, ok := strings.Cut(first, "=")
	return ok && validName(name)
}

func validName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// declFlags returns the letters of a declaration's -x options.
func declFlags(d *syntax.DeclClause) string {
	var b strings.Builder
	for _, as := range d.Args {
		if !as.Naked || as.Value == nil {
			continue
		}
		if l := lit(as.Value); len(l) > 1 && (l[0] == '-' || l[0] == '+') {
			b.WriteString(l[1:])
		}
	}
	return b.String()
}

// call handles simple commands: builtins that take names, eval-like
// builtins, and second shells anywhere in the argument list (so wrappers
// such as sudo, env, nohup, timeout, xargs or find -exec are covered).
func (a *analysis) call(c *syntax.CallExpr) {
	args := c.Args
	start := 0
	for start < len(args) && (lit(args[start]) == "command" || lit(args[start]) == "builtin" || lit(args[start]) == "exec") {
		start++
	}
	if start < len(args) {
		switch cmd := lit(args[start]); {
		case evalBuiltins[cmd]:
			for _, w := range args[start+1:] {
				a.mark(w, useNested, cmd)
			}
		case nameBuiltins[cmd]:
			for _, w := range args[start+1:] {
				a.mark(w, useName, cmd)
			}
		case cmd == "printf" || cmd == "wait" || cmd == "test" || cmd == "[":
			a.nameAfterOption(args[start+1:], cmd)
		}
	}
	if start < len(args) && dynamic(args[start]) && hasCOption(args[start+1:]) {
		// "$SHELL" -c …, $(command -v bash) -c …: the program is only known
		// at run time; treat it as a shell.
		if script := shellScriptArg(args[start+1:]); script != nil {
			a.mark(script, useNested, "a program chosen at run time with -c")
		}
	}
	for i, w := range args {
		switch name := path.Base(lit(w)); {
		case shellNames[name]:
			if script := shellScriptArg(args[i+1:]); script != nil {
				a.mark(script, useNested, name+" -c")
			}
		case name == "ssh" || name == "watch":
			for _, w := range args[i+1:] {
				a.mark(w, useNested, name)
			}
		case name == "su":
			for k := i + 1; k+1 < len(args); k++ {
				if l := lit(args[k]); l == "-c" || l == "--command" {
					a.mark(args[k+1], useNested, "su -c")
				}
			}
		}
	}
}

// hasCOption reports whether args start with options including -c.
func hasCOption(args []*syntax.Word) bool {
	for _, w := range args {
		l := lit(w)
		if len(l) < 2 || l[0] != '-' || strings.HasPrefix(l, "--") {
			return false
		}
		if strings.Contains(l, "c") {
			return true
		}
	}
	return false
}

// nameAfterOption marks the word after printf -v, wait -p, test -v/-R.
func (a *analysis) nameAfterOption(args []*syntax.Word, cmd string) {
	opts := map[string]string{"printf": "-v", "wait": "-p", "test": "-v", "[": "-v"}
	for k := 0; k+1 < len(args); k++ {
		l := lit(args[k])
		if l == opts[cmd] || (cmd == "test" || cmd == "[") && l == "-R" {
			a.mark(args[k+1], useName, cmd+" "+l)
		}
	}
}

// shellScriptArg returns the word a shell invoked with args runs as code:
// the first operand after -c, or the script file operand; nil when the
// shell reads its script from stdin.
func shellScriptArg(args []*syntax.Word) *syntax.Word {
	for k := 0; k < len(args); k++ {
		l := lit(args[k])
		switch {
		case l == "--" || l == "-":
			if k+1 < len(args) {
				return args[k+1]
			}
			return nil
		case l == "-o" || l == "+o" || l == "-O" || l == "+O" || l == "--rcfile" || l == "--init-file":
			k++
		case strings.HasPrefix(l, "--"):
		case len(l) > 1 && (l[0] == '-' || l[0] == '+'):
			// an option such as -c, -e, -lc: the operand follows
		default:
			return args[k]
		}
	}
	return nil
}

// readsStdinAsCode reports whether the command runs its stdin as shell
// code: a shell with neither -c nor a script file, or xargs feeding a
// shell.
func readsStdinAsCode(c *syntax.CallExpr) bool {
	hasXargs := false
	for i, w := range c.Args {
		name := path.Base(lit(w))
		if name == "xargs" {
			hasXargs = true
		}
		if shellNames[name] && (hasXargs || shellScriptArg(c.Args[i+1:]) == nil) {
			return true
		}
	}
	return false
}

// pipe marks the stages before a stage that runs its stdin as code.
func (a *analysis) pipe(b *syntax.BinaryCmd) {
	var stages []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if bc, ok := s.Cmd.(*syntax.BinaryCmd); ok && (bc.Op == syntax.Pipe || bc.Op == syntax.PipeAll) {
			flatten(bc.X)
			flatten(bc.Y)
			return
		}
		stages = append(stages, s)
	}
	flatten(b.X)
	flatten(b.Y)
	for k, s := range stages {
		if call, ok := s.Cmd.(*syntax.CallExpr); ok && k > 0 && readsStdinAsCode(call) {
			for _, prev := range stages[:k] {
				a.mark(prev, useNested, "input piped to "+lit(call.Args[0]))
			}
		}
	}
}

// lit is the text a word without expansions has after quote removal
// ("bash", 'bash', b\ash and bash all give bash); "" when the word holds
// an expansion.
func lit(w *syntax.Word) string {
	if w == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(x.Value))
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return ""
				}
				b.WriteString(l.Value)
			}
		default:
			return ""
		}
	}
	return b.String()
}

// unescape removes the backslashes of an unquoted literal.
func unescape(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dynamic reports whether a word holds an expansion (its text is only
// known when the script runs).
func dynamic(w *syntax.Word) bool { return w != nil && lit(w) == "" && len(w.Parts) > 0 }
