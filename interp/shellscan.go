package interp

import "strings"

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

// shellScanner rewrites a shell step's text for InterpolateShell and
// CheckShell in one pass: it follows bash's quoting contexts (this file),
// replaces each placeholder by a variable reference fit for its context
// (shellplaceholder.go) and copies here-document bodies (shellheredoc.go).
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

// wordStart reports whether s.i begins a shell word (for # comments and
// the (( arithmetic command).
func (s *shellScanner) wordStart() bool {
	return s.i == 0 || strings.IndexByte(" \t\n;&|()", s.src[s.i-1]) >= 0
}
