package interp

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

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
