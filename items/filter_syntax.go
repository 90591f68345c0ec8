package items

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file adapts Prodigy's filter spelling to expr-lang syntax with a
// lexical pass (no parsing): string literals are recognised so nothing inside
// them is touched, and a handful of words are renamed.
//
//   - 'single quoted' literals are raw: only \' and \\ are escapes, so the
//     Prodigy example `path matches '\.rs$'` is a regular expression as
//     written. "double quoted" and `backtick` literals keep expr's rules.
//   - AND, OR, NOT → &&, ||, ! ; null → nil ; a lone = → ==.
//   - infix starts_with / ends_with → startsWith / endsWith.
//   - member access a.b becomes a?.b, so a missing field is nil;
//   - function forms contains(a, b) and matches(s, re) (which expr reserves as
//     operators) call the package's helpers.

// rewriteFilter returns the expr source for a Prodigy-style filter and, for
// every rune of the output, the rune offset in src it came from (used to
// point error messages at the user's text).
func rewriteFilter(src string) (string, []int) {
	var out strings.Builder
	var pos []int
	emit := func(s string, from int) {
		for range utf8.RuneCountInString(s) {
			pos = append(pos, from)
		}
		out.WriteString(s)
	}
	toks := lexFilter(src)
	hasLet := false
	for _, t := range toks {
		if t.kind == tokWord && t.text == "let" {
			hasLet = true
		}
	}
	for i, t := range toks {
		prev := prevSignificant(toks, i)
		next := nextSignificant(toks, i)
		afterDot := prev != nil && prev.text == "." || prev != nil && prev.text == "?."
		switch {
		case t.kind == tokSingle:
			if v, ok := decodeSingle(t.text); ok {
				emit(strconv.Quote(v), t.runeAt)
			} else {
				emit(t.text, t.runeAt) // unterminated: let expr report it
			}
		case t.kind == tokWord && !afterDot:
			emit(rewriteWord(t.text, prev, next), t.runeAt)
		case t.kind == tokOther && t.text == "=" && !hasLet:
			emit("==", t.runeAt)
		case t.text == "." && i > 0 && i+1 < len(toks) && toks[i+1].kind == tokWord &&
			(toks[i-1].kind == tokWord || toks[i-1].text == ")" || toks[i-1].text == "]"):
			emit("?.", t.runeAt) // nil-safe member access: a missing field is nil, not an error
		default:
			emit(t.text, t.runeAt)
		}
	}
	pos = append(pos, utf8.RuneCountInString(src))
	return out.String(), pos
}

// rewriteWord renames Prodigy keywords; prev and next are the neighbouring
// significant tokens (nil at either end).
func rewriteWord(w string, prev, next *filterToken) string {
	call := next != nil && next.text == "(" && !isOperand(prev)
	switch w {
	case "AND":
		return "&&"
	case "OR":
		return "||"
	case "NOT":
		return "!"
	case "null", "NULL":
		return "nil"
	case "starts_with":
		if !call {
			return "startsWith"
		}
	case "ends_with":
		if !call {
			return "endsWith"
		}
	case "contains", "matches":
		if call {
			return "__" + w
		}
	}
	return w
}

// isOperand reports whether t ends an operand, so a following word is an
// infix operator rather than the start of a function call.
func isOperand(t *filterToken) bool {
	if t == nil {
		return false
	}
	switch t.kind {
	case tokSingle, tokString, tokNumber:
		return true
	case tokWord:
		switch t.text {
		case "and", "or", "not", "in", "matches", "contains", "startsWith", "endsWith",
			"starts_with", "ends_with", "AND", "OR", "NOT":
			return false
		}
		return true
	}
	return t.text == ")" || t.text == "]"
}

type tokenKind int

const (
	tokOther  tokenKind = iota // punctuation / operators, one rune (or "?.")
	tokSpace                   // whitespace run
	tokWord                    // identifier or keyword
	tokNumber                  // numeric literal
	tokSingle                  // '…' literal (raw)
	tokString                  // "…" or `…` literal (expr rules)
)

type filterToken struct {
	kind   tokenKind
	text   string
	runeAt int
}

// lexFilter splits src into tokens. An unterminated literal runs to the end
// of src; expr then reports it.
func lexFilter(src string) []filterToken {
	var toks []filterToken
	runeAt := 0
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRuneInString(src[i:])
		end := i + size
		kind := tokOther
		switch {
		case r == '\'' || r == '"' || r == '`':
			end = literalEnd(src, i, byte(r))
			kind = tokString
			if r == '\'' {
				kind = tokSingle
			}
		case unicode.IsSpace(r):
			end = scanWhile(src, i, unicode.IsSpace)
			kind = tokSpace
		case r == '_' || r == '$' || unicode.IsLetter(r):
			end = scanWhile(src, i, func(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r) })
			kind = tokWord
		case unicode.IsDigit(r):
			end = scanWhile(src, i, func(r rune) bool { return r == '.' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) })
			kind = tokNumber
		case r == '=' || r == '!' || r == '<' || r == '>':
			if end < len(src) && src[end] == '=' {
				end++
			}
		case r == '?' && end < len(src) && src[end] == '.':
			end++
		}
		text := src[i:end]
		toks = append(toks, filterToken{kind: kind, text: text, runeAt: runeAt})
		runeAt += utf8.RuneCountInString(text)
		i = end
	}
	return toks
}

// literalEnd returns the end offset of the quoted literal starting at i.
func literalEnd(src string, i int, q byte) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j + 1
		}
	}
	return len(src)
}

func scanWhile(src string, i int, ok func(rune) bool) int {
	for i < len(src) {
		r, size := utf8.DecodeRuneInString(src[i:])
		if !ok(r) {
			break
		}
		i += size
	}
	return i
}

// decodeSingle returns the value of a raw single-quoted literal (\' and \\
// are escapes, every other backslash is kept) and whether it was terminated.
func decodeSingle(lit string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(lit); i++ {
		switch {
		case lit[i] == '\\' && i+1 < len(lit) && (lit[i+1] == '\'' || lit[i+1] == '\\'):
			i++
		case lit[i] == '\'':
			return b.String(), true
		}
		b.WriteByte(lit[i])
	}
	return b.String(), false
}

func prevSignificant(toks []filterToken, i int) *filterToken {
	for j := i - 1; j >= 0; j-- {
		if toks[j].kind != tokSpace {
			return &toks[j]
		}
	}
	return nil
}

func nextSignificant(toks []filterToken, i int) *filterToken {
	for j := i + 1; j < len(toks); j++ {
		if toks[j].kind != tokSpace {
			return &toks[j]
		}
	}
	return nil
}
