package interp

import "strings"

type heredoc struct {
	delim     string
	quoted    bool
	stripTabs bool
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
