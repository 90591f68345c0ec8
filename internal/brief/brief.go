// Package brief shortens values for one-line messages: log lines,
// warnings and error texts that name what they are about without
// repeating all of it.
package brief

import (
	"fmt"
	"strings"
)

// OneLine is s on one line (runs of white space, newlines included, become
// one space) of at most n runes, the last one "…" when it was cut.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// FirstN is s, or its first n elements and a count of the rest ("and 3
// more") as the last element.
func FirstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
}

// LastLines is the last n lines of s (trailing newlines dropped).
func LastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SHA is an object id cut to its first 12 hex digits, as messages name
// commits; shorter text is returned as it is.
func SHA(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
