package claudecode

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/spend"
)

// SubtypeMaxTurns is the result subtype of a run stopped by --max-turns.
const SubtypeMaxTurns = "error_max_turns"

// Result is the final `{"type":"result"}` event of a stream-json
// transcript (SDKResultMessage of @anthropic-ai/claude-agent-sdk).
type Result struct {
	Type              string             `json:"type"`
	Subtype           string             `json:"subtype"`
	IsError           bool               `json:"is_error"`
	Result            string             `json:"result"`
	Errors            []string           `json:"errors"`
	TerminalReason    string             `json:"terminal_reason"`
	NumTurns          int                `json:"num_turns"`
	PermissionDenials []PermissionDenial `json:"permission_denials"`
}

// PermissionDenial is one entry of a result's permission_denials.
type PermissionDenial struct {
	ToolName  string         `json:"tool_name"`
	ToolInput map[string]any `json:"tool_input"`
}

// FinalResult returns the last result event of the transcript at path
// written after offset; ok is false when there is none.
func FinalResult(path string, offset int64) (r Result, ok bool, err error) {
	err = spend.EachTranscriptLine(path, offset, func(line []byte) {
		var ev Result
		if json.Unmarshal(line, &ev) == nil && ev.Type == "result" {
			r, ok = ev, true
		}
	})
	return r, ok, err
}

// Note writes what the result says about the run to an item's log (one
// line): turns, terminal reason, denied tools.
func (r Result) Note(log io.Writer) {
	fmt.Fprintf(log, "--- claude result: subtype %s, %d turn(s)", r.Subtype, r.NumTurns)
	if r.TerminalReason != "" {
		fmt.Fprintf(log, ", terminal_reason %s", r.TerminalReason)
	}
	if tools := r.deniedTools(); len(tools) > 0 {
		fmt.Fprintf(log, ", denied: %s", strings.Join(tools, ", "))
	}
	fmt.Fprintln(log)
}

// text is what the result says in words: its errors (error results carry
// their text there and have no result field), else its result text.
func (r Result) text() string {
	var errs []string
	for _, e := range r.Errors {
		if e = strings.TrimSpace(e); e != "" {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return r.Result
}

// details names the result's subtype, terminal reason and turns, for
// messages (", subtype x, terminal_reason y, 3 turn(s)"; "" when the run
// ended normally).
func (r Result) details() string {
	var b strings.Builder
	if r.Subtype != "" && r.Subtype != "success" {
		fmt.Fprintf(&b, ", subtype %s", r.Subtype)
	}
	if r.TerminalReason != "" && r.TerminalReason != "completed" {
		fmt.Fprintf(&b, ", terminal_reason %s", r.TerminalReason)
	}
	if r.NumTurns > 0 && b.Len() > 0 {
		fmt.Fprintf(&b, ", %d turn(s)", r.NumTurns)
	}
	return b.String()
}

// deniedTools names each denied tool once, in order, with a short view of
// its input: `Write (hello.txt)`, `Bash (git commit -m x)`.
func (r Result) deniedTools() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range r.PermissionDenials {
		name := d.ToolName
		if name == "" {
			name = "(unnamed tool)"
		}
		if arg := denialArg(d.ToolInput); arg != "" {
			name += " (" + brief.OneLine(arg, 80) + ")"
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// denialArg is the input field that says what a denied call wanted.
func denialArg(in map[string]any) string {
	for _, k := range []string{"command", "file_path", "notebook_path", "url", "query", "path", "pattern"} {
		if v, ok := in[k].(string); ok && v != "" {
			return v
		}
	}
	return ""
}
