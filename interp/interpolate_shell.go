package interp

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// InterpolateShell returns a bash script in which every placeholder is
// replaced by a reference to an environment variable that carries its
// rendered value, so bash sees the value literally whatever quoting
// surrounds the placeholder; env lists the NAME=value pairs to add to the
// process environment. Item data is therefore never parsed as shell code.
//
// The reference depends on the quoting context, found by a scanner of
// bash's quoting rules:
//   - unquoted (also inside $( ), <( ), backticks, a here-string's word
//     after <<<, and unquoted ${x:-…}): "${__PRODIGY_V_n}";
//   - inside "…" and in unquoted here-documents: ${__PRODIGY_V_n};
//   - inside '…': '"${__PRODIGY_V_n}"' (close, insert, reopen), and
//     likewise for $'…';
//   - inside $(( )) and (( )): the value itself, which must be an integer
//     (bash evaluates arithmetic operands as code, so anything else is an
//     error);
//   - inside a quoted here-document (<<'EOF'): an error, because bash
//     expands nothing there.
//
// Which ${…} are placeholders: names that resolve in vars, names whose first
// segment is a variable or one of item, item_id, item_index, item_total,
// attempt, map, shell, and any dotted path — these must resolve
// (or carry a :-default) or the call fails naming the placeholder. Other
// plain names (${HOME}, ${arr[0]}) and bash forms such as ${#x} or
// ${x//a/b} are left to bash. $${ becomes ${ for bash to expand; a
// backslash-escaped \${ is left as written, as bash prints it literally;
// comments are left as written.
//
// The scanner misreads two constructs: a `case` pattern's ")" inside $( )
// closes the substitution early, and a $( ) inside an unquoted
// here-document is taken for part of the document. The value is never
// executed either way, and after the substitution the script is parsed
// with bash's grammar (mvdan.cc/sh): every reference the scanner left bare
// that bash would expand unquoted gets its double quotes there
// (quoteUnprotected), so no value is ever word-split or globbed. Then
// every reference is checked against the contexts where bash evaluates a
// value (see CheckShell): there the value must be a plain integer, and inside
// the script of a second shell the placeholder is refused unless
// opts.AllowNestedShell is set.
func InterpolateShell(s string, vars Vars, opts ShellOptions) (script string, env []string, err error) {
	opts.MaxEnvValue = -1
	p, err := PrepareShell(s, vars, opts)
	return p.Script, p.Env, err
}

// DefaultMaxEnvValue is the largest value PrepareShell passes in an
// environment variable (Linux refuses a single environment string over
// 128 KiB, and all of them share the argument space).
const DefaultMaxEnvValue = 32 << 10

// ShellScript is a prepared shell step.
type ShellScript struct {
	// Script is the bash script to run with bash -c.
	Script string
	// Env lists NAME=value pairs to add to the process environment.
	Env []string
	// Files are values too large for the environment: the caller writes
	// each Content to a file and adds EnvName=<path> to the environment;
	// the script reads the file into its variable before anything else.
	Files []ValueFile
}

// ValueFile is one value passed through a file.
type ValueFile struct {
	EnvName string
	Content string
}

// PrepareShell is InterpolateShell for values of any size: values longer
// than opts.MaxEnvValue (0 = DefaultMaxEnvValue, negative = no limit) are
// passed through files (see ShellScript.Files) and read by a prelude put
// on the script's first line, so line numbers are unchanged.
func PrepareShell(s string, vars Vars, opts ShellOptions) (ShellScript, error) {
	sc := newShellScanner(s, vars, false)
	if err := sc.run(); err != nil {
		return ShellScript{}, err
	}
	script, refs := quoteUnprotected(sc.out.String(), sc.refs)
	sc.refs = refs
	if len(sc.refs) > 0 {
		uses, err := analyseShell(script, sc.refs)
		if err != nil {
			return ShellScript{}, fmt.Errorf("shell script: %w", err)
		}
		for _, u := range uses {
			if err := u.check(sc.values[u.ref.name], opts); err != nil {
				se := asScriptError(err)
				se.Line, se.Col = lineColAt(s, u.ref.src)
				return ShellScript{}, se
			}
		}
	}
	limit := opts.MaxEnvValue
	if limit == 0 {
		limit = DefaultMaxEnvValue
	}
	out := ShellScript{Script: script}
	var prelude strings.Builder
	for _, kv := range sc.env {
		name, val, _ := strings.Cut(kv, "=")
		if limit < 0 || len(val) <= limit {
			out.Env = append(out.Env, kv)
			continue
		}
		file := strings.Replace(name, "_V_", "_F_", 1)
		out.Files = append(out.Files, ValueFile{EnvName: file, Content: val})
		// read -d '' keeps every byte (trailing newlines included) up to
		// the end of the file; values never hold NUL.
		fmt.Fprintf(&prelude, `IFS= read -r -d '' %s < "$%s"; `, name, file)
	}
	if prelude.Len() > 0 {
		out.Script = prelude.String() + script
	}
	return out, nil
}

func newShellScanner(s string, vars Vars, static bool) *shellScanner {
	return &shellScanner{src: s, vars: vars, static: static, names: map[string]string{},
		values: map[string]string{}, stack: []shFrame{{kind: frTop}}}
}

// shellRoots are the variable roots that always denote placeholders in
// shell steps, even when the scope lacks them (so a typo is an error rather
// than an empty bash expansion).
var shellRoots = map[string]bool{
	"item": true, "item_id": true, "item_index": true, "item_total": true,
	"attempt": true, "map": true, "shell": true,
}

type frameKind int

const (
	frTop      frameKind = iota // the script itself (unquoted)
	frCmdSub                    // $( … ), <( … ), >( … ) (unquoted inside)
	frBacktick                  // ` … ` (unquoted inside)
	frDouble                    // " … "
	frParam                     // a bash ${ … } that is not a placeholder
	frArith                     // $(( … )) or (( … ))
)

type shFrame struct {
	kind  frameKind
	depth int  // nested ( in unquoted frames, { in frParam, ( in frArith
	dq    bool // frParam: the expansion itself is inside double quotes
}

type heredoc struct {
	delim     string
	quoted    bool
	stripTabs bool
}

type shellScanner struct {
	src      string
	i        int
	out      strings.Builder
	vars     Vars
	stack    []shFrame
	names    map[string]string // placeholder text → env var name
	env      []string
	heredocs []heredoc // pending bodies, read at the next unquoted newline
	// static scans without values (validation): placeholders must only
	// name known variables; every one becomes a reference.
	static bool
	values map[string]string // env var name → value (not static)
	refs   []shellRef        // every reference emitted, in output order
}

// shellRef is one reference to a placeholder's variable in the output.
type shellRef struct {
	name string // __PRODIGY_V_n
	text string // the placeholder as written
	out  int    // offset of its '$' in the output script
	src  int    // offset of the placeholder in the source
}

func (s *shellScanner) top() *shFrame          { return &s.stack[len(s.stack)-1] }
func (s *shellScanner) push(k frameKind)       { s.stack = append(s.stack, shFrame{kind: k, dq: s.dqLike()}) }
func (s *shellScanner) has(prefix string) bool { return strings.HasPrefix(s.src[s.i:], prefix) }

func (s *shellScanner) pop() {
	if len(s.stack) > 1 {
		s.stack = s.stack[:len(s.stack)-1]
	}
}

// emit copies n source bytes to the output.
func (s *shellScanner) emit(n int) {
	n = min(n, len(s.src)-s.i)
	s.out.WriteString(s.src[s.i : s.i+n])
	s.i += n
}

// dqLike reports whether the current frame expands like double quotes.
func (s *shellScanner) dqLike() bool {
	t := s.top()
	return t.kind == frDouble || t.kind == frParam && t.dq
}

func (s *shellScanner) run() error {
	for s.i < len(s.src) {
		var err error
		switch s.top().kind {
		case frDouble:
			err = s.stepDouble()
		case frArith:
			err = s.stepArith()
		case frParam:
			if s.top().dq {
				err = s.stepParamDQ()
			} else {
				err = s.stepUnquoted()
			}
		default:
			err = s.stepUnquoted()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// stepDollar handles a '$' in any expanding context; it reports false when
// the byte at s.i is not a '$' construct it knows.
func (s *shellScanner) stepDollar() (bool, error) {
	switch {
	case s.has("$${"):
		s.out.WriteString("${")
		s.i += 3
		s.push(frParam)
	case s.has("${"):
		return true, s.placeholder()
	case s.has("$(("):
		s.emit(3)
		s.push(frArith)
	case s.has("$("):
		s.emit(2)
		s.push(frCmdSub)
	default:
		return false, nil
	}
	return true, nil
}

func (s *shellScanner) stepUnquoted() error {
	if ok, err := s.stepDollar(); ok || err != nil {
		return err
	}
	t := s.top()
	c := s.src[s.i]
	switch {
	case c == '\\':
		s.emit(2)
	case s.has("$'"):
		return s.ansiC()
	case c == '\'':
		return s.single()
	case c == '"':
		s.emit(1)
		s.push(frDouble)
	case c == '`':
		s.emit(1)
		if t.kind == frBacktick {
			s.pop()
		} else {
			s.push(frBacktick)
		}
	case t.kind == frParam:
		s.paramBrace(c)
	case c == '#' && s.wordStart():
		end := strings.IndexByte(s.src[s.i:], '\n')
		if end < 0 {
			end = len(s.src) - s.i
		}
		s.emit(end)
	case s.has("((") && s.wordStart():
		s.emit(2)
		s.push(frArith)
	case s.has("<(") || s.has(">("):
		s.emit(2)
		s.push(frCmdSub)
	case c == '(':
		t.depth++
		s.emit(1)
	case c == ')':
		s.emit(1)
		if t.depth > 0 {
			t.depth--
		} else if t.kind == frCmdSub {
			s.pop()
		}
	case s.has("<<<"): // a here-string: its word is scanned like any other
		s.emit(3)
	case s.has("<<"):
		s.heredocOperator()
	case c == '\n':
		s.emit(1)
		return s.heredocBodies()
	default:
		s.emit(1)
	}
	return nil
}

// paramBrace tracks braces inside a bash ${ … } expansion.
func (s *shellScanner) paramBrace(c byte) {
	t := s.top()
	s.emit(1)
	switch c {
	case '{':
		t.depth++
	case '}':
		if t.depth == 0 {
			s.pop()
		} else {
			t.depth--
		}
	}
}

func (s *shellScanner) stepDouble() error {
	if ok, err := s.stepDollar(); ok || err != nil {
		return err
	}
	switch s.src[s.i] {
	case '\\':
		if s.i+1 < len(s.src) && strings.IndexByte("$`\"\\\n", s.src[s.i+1]) >= 0 {
			s.emit(2)
		} else {
			s.emit(1)
		}
	case '"':
		s.emit(1)
		s.pop()
	case '`':
		s.emit(1)
		s.push(frBacktick)
	default:
		s.emit(1)
	}
	return nil
}

// stepParamDQ scans a bash ${ … } inside double quotes: quotes nest as new
// double-quoted frames, single quotes are literal.
func (s *shellScanner) stepParamDQ() error {
	if ok, err := s.stepDollar(); ok || err != nil {
		return err
	}
	switch c := s.src[s.i]; c {
	case '\\':
		s.emit(2)
	case '"':
		s.emit(1)
		s.push(frDouble)
	case '`':
		s.emit(1)
		s.push(frBacktick)
	default:
		s.paramBrace(c)
	}
	return nil
}

func (s *shellScanner) stepArith() error {
	if ok, err := s.stepDollar(); ok || err != nil {
		return err
	}
	t := s.top()
	switch {
	case s.src[s.i] == '(':
		t.depth++
		s.emit(1)
	case s.has("))") && t.depth == 0:
		s.emit(2)
		s.pop()
	case s.src[s.i] == ')' && t.depth > 0:
		t.depth--
		s.emit(1)
	default:
		s.emit(1)
	}
	return nil
}

// single copies a '…' literal, splicing placeholders in as
// '"${V}"' (close the quote, insert the variable, reopen).
func (s *shellScanner) single() error { return s.quoted(1, false, `'"${%s}"'`) }

// ansiC copies a $'…' literal (backslash escapes, \' does not close it),
// splicing placeholders in as '"${V}"$'.
func (s *shellScanner) ansiC() error { return s.quoted(2, true, `'"${%s}"$'`) }

// quoted copies a single-quoted literal whose opening quote is open bytes
// long, up to its closing quote; escapes says whether a backslash escapes
// the next byte ($'…'). A placeholder is spliced in with splice.
func (s *shellScanner) quoted(open int, escapes bool, splice string) error {
	s.emit(open)
	for s.i < len(s.src) {
		switch {
		case escapes && s.src[s.i] == '\\':
			s.emit(2)
		case s.src[s.i] == '\'':
			s.emit(1)
			return nil
		case s.has("$${"):
			s.out.WriteString("${")
			s.i += 3
		case s.has("${"):
			ok, err := s.reference(splice)
			if err != nil {
				return err
			}
			if !ok {
				s.emit(2)
			}
		default:
			s.emit(1)
		}
	}
	return nil
}

// placeholder handles ${ in an expanding context: a placeholder becomes a
// variable reference quoted for the context; anything else opens a bash
// parameter expansion.
func (s *shellScanner) placeholder() error {
	if s.top().kind == frArith {
		return s.arithPlaceholder()
	}
	format := `"${%s}"`
	if s.dqLike() {
		format = "${%s}"
	}
	ok, err := s.reference(format)
	if err != nil || ok {
		return err
	}
	s.emit(2)
	s.push(frParam)
	return nil
}

// reference replaces the placeholder at s.i, if it is one, with
// fmt.Sprintf(format, envName) and reports whether it did.
func (s *shellScanner) reference(format string) (bool, error) {
	ph, end, ours, err := s.ours()
	if err != nil || !ours {
		return false, err
	}
	val, err := s.valueOf(ph)
	if err != nil {
		return false, err
	}
	name, err := s.envName(ph.text, val)
	if err != nil {
		return false, err
	}
	before, _, _ := strings.Cut(format, "%s")
	s.refs = append(s.refs, shellRef{name: name, text: ph.text, out: s.out.Len() + strings.Index(before, "$"), src: s.i})
	fmt.Fprintf(&s.out, format, name)
	s.i = end
	return true, nil
}

// valueOf renders the placeholder's value; in a static scan it only checks
// that the placeholder names a known variable and returns "".
func (s *shellScanner) valueOf(ph varPlaceholder) (string, error) {
	if s.static {
		if err := ph.known(s.vars); err != nil {
			return "", s.errorf("%w", err)
		}
		return "", nil
	}
	val, err := ph.value(s.vars)
	if err != nil {
		return "", s.errorf("%w", err)
	}
	return val, nil
}

var integerRE = regexp.MustCompile(`^[+-]?[0-9]+$`)

// arithPlaceholder inserts an integer value inside $(( )) / (( )).
func (s *shellScanner) arithPlaceholder() error {
	ph, end, ours, err := s.ours()
	if err != nil {
		return err
	}
	if !ours {
		s.emit(2)
		s.push(frParam)
		return nil
	}
	if s.static {
		_, err := s.reference("${%s}")
		return err
	}
	val, err := s.valueOf(ph)
	if err != nil {
		return err
	}
	v := strings.TrimSpace(val)
	if !integerRE.MatchString(v) {
		return s.errorf("%s is used in shell arithmetic, where bash would evaluate its value as code, but the value %q is not an integer "+
			"(use \"$PRODIGY_ITEM_…\"-style variables outside arithmetic, or compare as strings)", ph.text, clipForError(val, 60))
	}
	s.out.WriteString(v)
	s.i = end
	return nil
}

// ours parses the ${…} at s.i and decides whether it is a placeholder.
func (s *shellScanner) ours() (varPlaceholder, int, bool, error) {
	ph, end, ok := scanVarPlaceholder(s.src, s.i)
	if end < 0 || !ok {
		return ph, end, false, nil
	}
	if ph.dotted() || shellRoots[ph.root] {
		return ph, end, true, nil
	}
	for k := range s.vars {
		if k == ph.root || strings.HasPrefix(k, ph.root+".") {
			return ph, end, true, nil
		}
	}
	return ph, end, false, nil
}

// envName returns the environment variable carrying the value of the
// placeholder text, allocating one per distinct placeholder.
func (s *shellScanner) envName(text, val string) (string, error) {
	if name, ok := s.names[text]; ok {
		return name, nil
	}
	if strings.IndexByte(val, 0) >= 0 {
		return "", s.errorf("the value of %s contains a NUL byte, which cannot be passed to a shell", text)
	}
	name := "__PRODIGY_V_" + strconv.Itoa(len(s.names))
	s.names[text] = name
	s.values[name] = val
	if !s.static {
		s.env = append(s.env, name+"="+val)
	}
	return name, nil
}

func (s *shellScanner) errorf(format string, args ...any) error {
	line, col := lineColAt(s.src, s.i)
	return &ScriptError{Line: line, Col: col, Err: fmt.Errorf(format, args...)}
}

// ScriptError is a problem at a place in a step's text (1-based line and
// byte column within the text).
type ScriptError struct {
	Line, Col int
	Err       error
}

func (e *ScriptError) Error() string { return fmt.Sprintf("shell script line %d: %v", e.Line, e.Err) }
func (e *ScriptError) Unwrap() error { return e.Err }

// lineColAt returns the 1-based line and column of offset i in s.
func lineColAt(s string, i int) (line, col int) {
	i = min(max(i, 0), len(s))
	line = strings.Count(s[:i], "\n") + 1
	return line, i - (strings.LastIndexByte(s[:i], '\n') + 1) + 1
}

// wordStart reports whether s.i begins a shell word (for # comments and
// the (( arithmetic command).
func (s *shellScanner) wordStart() bool {
	return s.i == 0 || strings.IndexByte(" \t\n;&|()", s.src[s.i-1]) >= 0
}

// heredocOperator copies << or <<- and its delimiter word and queues the
// here-document body.
func (s *shellScanner) heredocOperator() {
	s.emit(2)
	h := heredoc{}
	if s.has("-") {
		h.stripTabs = true
		s.emit(1)
	}
	for s.i < len(s.src) && (s.src[s.i] == ' ' || s.src[s.i] == '\t') {
		s.emit(1)
	}
	var delim strings.Builder
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case strings.IndexByte(" \t\n;&|()<>", c) >= 0:
			goto done
		case c == '\\' && s.i+1 < len(s.src):
			h.quoted = true
			delim.WriteByte(s.src[s.i+1])
			s.emit(2)
		case c == '\'' || c == '"':
			h.quoted = true
			end := strings.IndexByte(s.src[s.i+1:], c)
			if end < 0 {
				end = len(s.src) - s.i - 1
			}
			delim.WriteString(s.src[s.i+1 : s.i+1+end])
			s.emit(end + 2)
		default:
			delim.WriteByte(c)
			s.emit(1)
		}
	}
done:
	if delim.Len() > 0 {
		h.delim = delim.String()
		s.heredocs = append(s.heredocs, h)
	}
}

// heredocBodies copies the bodies of the pending here-documents, which
// start right after the newline just emitted.
func (s *shellScanner) heredocBodies() error {
	pending := s.heredocs
	s.heredocs = nil
	for _, h := range pending {
		for s.i < len(s.src) {
			end := strings.IndexByte(s.src[s.i:], '\n')
			if end < 0 {
				end = len(s.src) - s.i
			}
			line := s.src[s.i : s.i+end]
			check := line
			if h.stripTabs {
				check = strings.TrimLeft(line, "\t")
			}
			if check == h.delim {
				s.emit(end + 1)
				break
			}
			if err := s.heredocLine(h, end); err != nil {
				return err
			}
			s.emit(1) // the newline
		}
	}
	return nil
}

// heredocLine copies one body line of n bytes: placeholders become ${V}
// in an unquoted here-document and are an error in a quoted one.
func (s *shellScanner) heredocLine(h heredoc, n int) error {
	stop := s.i + n
	for s.i < stop {
		switch {
		case !h.quoted && s.src[s.i] == '\\':
			s.emit(min(2, stop-s.i))
		case s.has("$${"):
			s.out.WriteString("${")
			s.i += 3
		case s.has("${"):
			ph, end, ours, _ := s.ours()
			if !ours || end > stop {
				s.emit(2)
				continue
			}
			if h.quoted {
				return s.errorf("%s is inside a quoted here-document (<<'%s'), where bash expands nothing; "+
					"use an unquoted delimiter (<<%s) and the value is inserted literally", ph.text, h.delim, h.delim)
			}
			if _, err := s.reference("${%s}"); err != nil {
				return err
			}
		default:
			s.emit(1)
		}
	}
	return nil
}
