package interp

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// shellRoots are the variable roots that always denote placeholders in
// shell steps, even when the scope lacks them (so a typo is an error rather
// than an empty bash expansion).
var shellRoots = map[string]bool{
	"item": true, "item_id": true, "item_index": true, "item_total": true,
	"attempt": true, "map": true, "shell": true,
}

// shellRewrite rewrites a shell step's text for InterpolateShell,
// CheckShell and ShellNames: each placeholder becomes a reference to the
// variable that carries its value, written for the context bash reads it
// in. The contexts come from bash's grammar (mvdan.cc/sh), not from a scan
// of its quoting rules: the text, each placeholder replaced by a parameter
// expansion of a marker variable of its own, is parsed, and every marker
// is found in the syntax tree (inside "…", a command substitution, '…',
// $'…', arithmetic, a here-document body, a comment, after a backslash …).
type shellRewrite struct {
	src  string
	vars Vars
	// static rewrites without values (validation): placeholders must only
	// name known variables; every one becomes a reference.
	static bool
	names  map[string]string // placeholder text → env var name
	values map[string]string // env var name → value (not static)
	env    []string
	refs   []shellRef // every reference emitted, in output order
	out    strings.Builder
}

// shellRef is one reference to a placeholder's variable in the output.
type shellRef struct {
	name string // __PRODIGY_V_n
	text string // the placeholder as written
	out  int    // offset of its '$' in the output script
	src  int    // offset of the placeholder in the source
}

var integerRE = regexp.MustCompile(`^[+-]?[0-9]+$`)

// markContext is how bash reads a placeholder's place in the text.
type markContext int

const (
	ctxLiteral       markContext = iota // not expanded (a comment, after a backslash): left as written
	ctxUnquoted                         // expanded and split: "${V}"
	ctxDouble                           // expanded, not split ("…", a here-document body): ${V}
	ctxArith                            // evaluated as arithmetic: the value itself, an integer
	ctxSingle                           // inside '…': '"${V}"' (close, insert, reopen)
	ctxANSIC                            // inside $'…': '"${V}"$'
	ctxQuotedHeredoc                    // a quoted here-document's body: bash expands nothing there
)

// shellMark is one placeholder of the step's text.
type shellMark struct {
	src, end int // the placeholder's bytes in the text
	at       int // offset of its marker's '$' in the parsed text
	ph       varPlaceholder
	ctx      markContext
	delim    string // ctxQuotedHeredoc: the here-document's delimiter
}

// shellEscape is a $${ of the text: ${ for bash, unless in a comment.
type shellEscape struct{ src, at int }

// markPrefix names the marker variables of the parsed text.
const markPrefix = "__PRODIGY_M_"

func newShellRewrite(s string, vars Vars, static bool) *shellRewrite {
	return &shellRewrite{src: s, vars: vars, static: static, names: map[string]string{}, values: map[string]string{}}
}

// run rewrites the text into r.out.
func (r *shellRewrite) run() error {
	parsed, marks, escapes := r.markText()
	if len(marks) == 0 && len(escapes) == 0 {
		r.out.WriteString(r.src)
		return nil
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true)).Parse(strings.NewReader(parsed), "")
	var comments [][2]int
	switch {
	case err == nil:
		comments = classify(f, parsed, marks)
	case len(marks) > 0:
		return fmt.Errorf("cannot be parsed as bash, so its placeholders cannot be checked: %w", err)
	}
	return r.write(marks, escapes, comments)
}

// markText returns the text with each placeholder replaced by its marker
// (${__PRODIGY_M_n}), the placeholders and the $${ escapes. A $ escaped by
// a backslash does not start a $${ escape (bash reads "\$" and then ${).
func (r *shellRewrite) markText() (string, []shellMark, []shellEscape) {
	var b strings.Builder
	var marks []shellMark
	var escapes []shellEscape
	for i := 0; i < len(r.src); {
		switch {
		case strings.HasPrefix(r.src[i:], "$${") && !oddBackslashes(r.src, i):
			escapes = append(escapes, shellEscape{src: i, at: b.Len()})
			b.WriteString("$${")
			i += 3
		case strings.HasPrefix(r.src[i:], "${"):
			ph, end, ok := r.ours(i)
			if !ok {
				b.WriteString("${")
				i += 2
				continue
			}
			marks = append(marks, shellMark{src: i, end: end, at: b.Len(), ph: ph})
			b.WriteString("${" + markPrefix + strconv.Itoa(len(marks)-1) + "}")
			i = end
		default:
			b.WriteByte(r.src[i])
			i++
		}
	}
	return b.String(), marks, escapes
}

// oddBackslashes reports whether s[i] is preceded by an odd run of
// backslashes (it is escaped where a backslash escapes).
func oddBackslashes(s string, i int) bool {
	n := 0
	for i-n > 0 && s[i-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

// ours parses the ${…} at src[i] and decides whether it is a placeholder
// (a dotted path, one of shellRoots, or a name of vars) rather than a
// bash expansion.
func (r *shellRewrite) ours(i int) (varPlaceholder, int, bool) {
	ph, end, ok := scanVarPlaceholder(r.src, i)
	if end < 0 || !ok {
		return ph, end, false
	}
	if ph.dotted() || shellRoots[ph.root] {
		return ph, end, true
	}
	for k := range r.vars {
		if k == ph.root || strings.HasPrefix(k, ph.root+".") {
			return ph, end, true
		}
	}
	return ph, end, false
}

// classify sets each mark's context from the syntax tree of the parsed
// text, and returns the comments' byte ranges there.
func classify(f *syntax.File, parsed string, marks []shellMark) (comments [][2]int) {
	byAt := make(map[int]int, len(marks))
	for k, m := range marks {
		byAt[m.at] = k
	}
	within := func(from, to int, set func(k int)) {
		for k, m := range marks {
			if m.at >= from && m.at < to {
				set(k)
			}
		}
	}
	var stack []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		switch x := n.(type) {
		case *syntax.ParamExp:
			if k, ok := byAt[int(x.Dollar.Offset())]; ok && x.Param != nil && x.Param.Value == markPrefix+strconv.Itoa(k) {
				marks[k].ctx = expansionContext(stack)
			}
		case *syntax.SglQuoted:
			from, to := int(x.Left.Offset())+1, int(x.Right.Offset())
			if x.Dollar {
				from++
			}
			// In a ${x:-…} inside "…", bash takes quotes as text and
			// expands what is between them: as in "…".
			inDouble := expansionContext(stack) == ctxDouble
			within(from, to, func(k int) {
				switch {
				case inDouble:
					marks[k].ctx = ctxDouble
				case !x.Dollar:
					marks[k].ctx = ctxSingle
				case !oddBackslashes(parsed, marks[k].at):
					marks[k].ctx = ctxANSIC
				}
			})
		case *syntax.ExtGlob:
			// An extended glob's pattern is raw text in the tree; bash
			// (with extglob) expands it like an unquoted word.
			if x.Pattern != nil {
				ctx := expansionContext(stack)
				within(int(x.Pattern.Pos().Offset()), int(x.Pattern.End().Offset()), func(k int) {
					if !oddBackslashes(parsed, marks[k].at) {
						marks[k].ctx = ctx
					}
				})
			}
		case *syntax.Redirect:
			if delim, quoted := heredocDelim(x); quoted && x.Hdoc != nil {
				within(int(x.Hdoc.Pos().Offset()), int(x.Hdoc.End().Offset()), func(k int) {
					marks[k].ctx, marks[k].delim = ctxQuotedHeredoc, delim
				})
			}
		case *syntax.Comment:
			from := int(x.Hash.Offset())
			comments = append(comments, [2]int{from, from + 1 + len(x.Text)})
		}
		stack = append(stack, n)
		return true
	})
	return comments
}

// expansionContext is how bash expands a parameter expansion under the
// given ancestors (outermost first): its nearest quoting context.
func expansionContext(ancestors []syntax.Node) markContext {
	for i := len(ancestors) - 1; i >= 0; i-- {
		switch x := ancestors[i].(type) {
		case *syntax.DblQuoted:
			return ctxDouble
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return ctxUnquoted
		case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.CStyleLoop:
			return ctxArith
		case *syntax.Redirect:
			// Inside a here-document body (Hdoc), not its operator word.
			if x.Hdoc != nil && i+1 < len(ancestors) && ancestors[i+1] == syntax.Node(x.Hdoc) {
				return ctxDouble
			}
			return ctxUnquoted
		}
	}
	return ctxUnquoted
}

// heredocDelim returns a here-document's delimiter as bash compares it and
// whether it is quoted (then bash expands nothing in the body); "" and
// false for other redirections.
func heredocDelim(x *syntax.Redirect) (string, bool) {
	if (x.Op != syntax.Hdoc && x.Op != syntax.DashHdoc) || x.Word == nil {
		return "", false
	}
	var b strings.Builder
	quoted := false
	for _, p := range x.Word.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.Contains(p.Value, `\`) {
				quoted = true
			}
			b.WriteString(unescape(p.Value))
		case *syntax.SglQuoted:
			quoted = true
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			quoted = true
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(l.Value)
				}
			}
		}
	}
	return b.String(), quoted
}

// write writes the output: the text with each placeholder replaced for its
// context and each $${ outside a comment made ${.
func (r *shellRewrite) write(marks []shellMark, escapes []shellEscape, comments [][2]int) error {
	inComment := func(at int) bool {
		return slices.ContainsFunc(comments, func(c [2]int) bool { return at >= c[0] && at < c[1] })
	}
	prev := 0
	mi, ei := 0, 0
	for mi < len(marks) || ei < len(escapes) {
		if ei < len(escapes) && (mi == len(marks) || escapes[ei].src < marks[mi].src) {
			e := escapes[ei]
			ei++
			r.out.WriteString(r.src[prev:e.src])
			prev = e.src
			if !inComment(e.at) {
				r.out.WriteString("${")
				prev += 3
			}
			continue
		}
		m := marks[mi]
		mi++
		r.out.WriteString(r.src[prev:m.src])
		prev = m.src
		if err := r.place(m); err != nil {
			return err
		}
		if m.ctx != ctxLiteral {
			prev = m.end
		}
	}
	r.out.WriteString(r.src[prev:])
	return nil
}

// place writes the reference of mark m for its context (nothing for a
// literal one: its text is copied as written).
func (r *shellRewrite) place(m shellMark) error {
	switch m.ctx {
	case ctxLiteral:
		return nil
	case ctxQuotedHeredoc:
		return r.errorf(m, "%s is inside a quoted here-document (<<'%s'), where bash expands nothing; "+
			"use an unquoted delimiter (<<%s) and the value is inserted literally", m.ph.text, m.delim, m.delim)
	case ctxArith:
		if r.static {
			return r.reference(m, "${%s}")
		}
		val, err := r.valueOf(m)
		if err != nil {
			return err
		}
		v := strings.TrimSpace(val)
		if !integerRE.MatchString(v) {
			return r.errorf(m, "%s is used in shell arithmetic, where bash would evaluate its value as code, but the value %q is not an integer "+
				"(use \"$PRODIGY_ITEM_…\"-style variables outside arithmetic, or compare as strings)", m.ph.text, clipForError(val, 60))
		}
		r.out.WriteString(v)
		return nil
	case ctxSingle:
		return r.reference(m, `'"${%s}"'`)
	case ctxANSIC:
		return r.reference(m, `'"${%s}"$'`)
	case ctxDouble:
		return r.reference(m, "${%s}")
	default:
		return r.reference(m, `"${%s}"`)
	}
}

// reference writes fmt.Sprintf(format, envName) for mark m.
func (r *shellRewrite) reference(m shellMark, format string) error {
	val, err := r.valueOf(m)
	if err != nil {
		return err
	}
	name, err := r.envName(m, val)
	if err != nil {
		return err
	}
	before, _, _ := strings.Cut(format, "%s")
	r.refs = append(r.refs, shellRef{name: name, text: m.ph.text, out: r.out.Len() + strings.Index(before, "$"), src: m.src})
	fmt.Fprintf(&r.out, format, name)
	return nil
}

// valueOf renders the placeholder's value; in a static rewrite it only
// checks that the placeholder names a known variable and returns "".
func (r *shellRewrite) valueOf(m shellMark) (string, error) {
	if r.static {
		if err := m.ph.known(r.vars); err != nil {
			return "", r.errorf(m, "%w", err)
		}
		return "", nil
	}
	val, err := m.ph.value(r.vars)
	if err != nil {
		return "", r.errorf(m, "%w", err)
	}
	return val, nil
}

// envName returns the environment variable carrying the value of the
// placeholder text, allocating one per distinct placeholder.
func (r *shellRewrite) envName(m shellMark, val string) (string, error) {
	if name, ok := r.names[m.ph.text]; ok {
		return name, nil
	}
	if strings.IndexByte(val, 0) >= 0 {
		return "", r.errorf(m, "the value of %s contains a NUL byte, which cannot be passed to a shell", m.ph.text)
	}
	name := "__PRODIGY_V_" + strconv.Itoa(len(r.names))
	r.names[m.ph.text] = name
	r.values[name] = val
	if !r.static {
		r.env = append(r.env, name+"="+val)
	}
	return name, nil
}

func (r *shellRewrite) errorf(m shellMark, format string, args ...any) error {
	line, col := lineColAt(r.src, m.src)
	return &ScriptError{Line: line, Col: col, Err: fmt.Errorf(format, args...)}
}
