package ghaction

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The runner reads workflow commands from every line an action prints on
// stdout or stderr: `::name k=v::msg` at the start of a line (after
// leading white space) and the legacy `##[name k=v]msg` anywhere in a
// line, unless commands are stopped by `::stop-commands::TOKEN`, which
// lasts until a line `::TOKEN::`. Untrusted text (agent and step output,
// item data, error messages) must never reach the runner as a command:
// EchoUntrusted brackets it between stop-commands and a fresh random
// token; NeutralizeWriter rewrites the lines that could act as commands.
// See https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands#stopping-and-starting-workflow-commands

// EchoUntrusted writes text to w with workflow commands stopped: it prints
// `::stop-commands::TOKEN`, the text (ending with a newline), then
// `::TOKEN::`, where TOKEN is 128 fresh random bits the text cannot have
// guessed (a text that holds it anyway gets another token). w must be at
// the start of a line; commands are enabled again when it returns, so
// annotations, masks and outputs printed after it work.
func EchoUntrusted(w io.Writer, text string) error {
	if text == "" {
		return nil
	}
	var token string
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("stop-commands token: %w", err)
		}
		token = "prodigy-" + hex.EncodeToString(b[:])
		if !strings.Contains(text, token) {
			break
		}
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	_, err := fmt.Fprintf(w, "::stop-commands::%s\n%s::%s::\n", token, text, token)
	return err
}

// NeutralizeWriter returns a writer that passes text to w with every line
// made unable to act as a workflow command: a line whose first non-blank
// characters are "::" gets a space between the colons (": :"), and every
// "##[" becomes "## [". Other text is unchanged and nothing is held back; it is
// safe for concurrent use (the engine's stderr in Action mode).
func NeutralizeWriter(w io.Writer) io.Writer { return &neutralizer{w: w, atStart: true} }

type neutralizer struct {
	mu      sync.Mutex
	w       io.Writer
	atStart bool // the next byte starts a line
	blank   bool // the current line holds only white space so far
	hashes  int  // '#' bytes just before the next byte
}

func (n *neutralizer) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]byte, 0, len(p)+8)
	for i := 0; i < len(p); {
		c := p[i]
		if n.atStart {
			n.atStart, n.blank = false, true
		}
		if n.blank {
			r, size := utf8.DecodeRune(p[i:])
			if unicode.IsSpace(r) && r != '\n' {
				out = append(out, p[i:i+size]...)
				i += size
				continue
			}
			n.blank = false
			if bytes.HasPrefix(p[i:], []byte("::")) || (c == ':' && i == len(p)-1) {
				out = append(out, ':', ' ')
				i++
				continue
			}
		}
		switch {
		case c == '[' && n.hashes >= 2: // "##[", possibly split across writes
			out = append(out, ' ')
		case c == '\n':
			n.atStart = true
		}
		if c == '#' {
			n.hashes++
		} else {
			n.hashes = 0
		}
		out = append(out, c)
		i++
	}
	if _, err := n.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}
