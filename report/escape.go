package report

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// zwsp is a zero-width space: placed after @ and # it stops GitHub from
// turning the text into a mention or an issue reference.
const zwsp = "\u200b"

// Escape makes untrusted text safe to embed in markdown inline content
// (paragraphs, list items, table cells): HTML is neutralised (& < > as
// entities), markdown syntax is backslash-escaped, backticks and pipes
// become entities, @ and # get a zero-width space so nobody is pinged and
// no issue is cross-referenced, and line breaks and control characters
// become single spaces. Unicode format characters (category Cf: bidi
// overrides and isolates U+202A–202E, U+2066–2069, zero-width characters
// U+200B–U+200F, U+2060, U+FEFF, …), which can make text display
// differently from what it is, are shown as a visible ⟨U+XXXX⟩.
func Escape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) || r == '\u2028' || r == '\u2029' {
			if !space {
				b.WriteByte(' ')
				space = true
			}
			continue
		}
		space = false
		if IsFormatChar(r) {
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
			continue
		}
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '`':
			b.WriteString("&#96;")
		case '|':
			b.WriteString("&#124;")
		case '@':
			b.WriteString("@" + zwsp)
		case '#':
			b.WriteString("#" + zwsp)
		case '\\', '*', '_', '[', ']', '(', ')', '~', '!', '$', '{', '}', ':':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Truncate shortens s to at most max runes, ending with "…" when cut.
// max ≤ 0 returns s unchanged.
func Truncate(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	if max == 1 {
		return "…"
	}
	i, n := 0, 0
	for i = range s {
		if n == max-1 {
			break
		}
		n++
	}
	return s[:i] + "…"
}

// Cell returns untrusted text for a table cell: whitespace collapsed,
// truncated to max runes, escaped; "" becomes "—".
func Cell(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "—"
	}
	return Escape(Truncate(s, max))
}

// IsFormatChar reports whether r is an invisible Unicode format character
// (category Cf, plus the bidi marks and zero-width characters named in
// Escape), which untrusted text must never carry into rendered markdown.
func IsFormatChar(r rune) bool {
	return unicode.Is(unicode.Cf, r) || r >= '\u200b' && r <= '\u200f' || r >= '\u202a' && r <= '\u202e' ||
		r >= '\u2066' && r <= '\u2069' || r == '\u2060' || r == '\ufeff'
}
