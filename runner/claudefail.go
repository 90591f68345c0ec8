package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
)

// subtypeMaxTurns is the result subtype of a run stopped by --max-turns.
const subtypeMaxTurns = "error_max_turns"

// claudeExitMessage is the one message of a claude step that exited with
// a non-zero code: the final result event's text when the transcript has
// one (r, nil when it has none), else the last line Claude wrote to stderr
// that is not a JSON event, else the bare exit. It depends only on what
// Claude wrote, never on how stdout and stderr interleaved, so one cause
// gives one error signature.
func claudeExitMessage(what string, code int, r *claudeResult, stderr string) string {
	exit := fmt.Sprintf("%s exited with code %d", what, code)
	if r != nil {
		if text := oneLine(r.text(), 300); text != "" {
			return fmt.Sprintf("%s [%s%s]", text, exit, r.details())
		}
		if r.Subtype != "" && r.Subtype != "success" {
			return fmt.Sprintf("%s [%s%s]", r.Subtype, exit, r.details())
		}
	}
	if last := lastTextLine(stderr); last != "" {
		return fmt.Sprintf("%s [%s]", last, exit)
	}
	return exit
}

// lastTextLine is the last non-empty line of out that is not a JSON event
// (a line starting with '{'), shortened to one line.
func lastTextLine(out string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "{") {
			return oneLine(l, 200)
		}
	}
	return ""
}

// claudeReportedError is the failure of a claude step whose process
// succeeded (exit 0) but whose final result event has is_error or a
// non-success subtype. There is no exit code to report, so the type is
// what the message says (rate limits are ResourceExhausted, …) and
// otherwise Unknown, never an invented CommandFailed exit code.
func claudeReportedError(what string, r claudeResult, transcript string) *stepFailure {
	text := r.text()
	if strings.TrimSpace(text) == "" {
		text = r.Subtype
	}
	if strings.TrimSpace(text) == "" {
		text = "is_error without a message"
	}
	if r.Subtype == subtypeMaxTurns {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, LogPath: transcript,
			Message: fmt.Sprintf("%s stopped at its turn limit (max_turns, %s): %s [%s]", what, subtypeMaxTurns, oneLine(text, 300), strings.TrimPrefix(r.details(), ", "))}
	}
	t := dlq.Classify(text)
	if t.Kind == dlq.CommandFailed {
		t = dlq.ErrorType{Kind: dlq.Unknown}
	}
	msg := fmt.Sprintf("%s reported an error: %s", what, oneLine(text, 300))
	if d := strings.TrimPrefix(r.details(), ", "); d != "" {
		msg += " [" + d + "]"
	}
	return &stepFailure{Type: t, Message: msg, LogPath: transcript}
}

// text is what the result says in words: its errors (error results carry
// their text there and have no result field), else its result text.
func (r claudeResult) text() string {
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
func (r claudeResult) details() string {
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
func (r claudeResult) deniedTools() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range r.PermissionDenials {
		name := d.ToolName
		if name == "" {
			name = "(unnamed tool)"
		}
		if arg := denialArg(d.ToolInput); arg != "" {
			name += " (" + oneLine(arg, 80) + ")"
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

// claudeDenied is the failure of a claude step whose run succeeded while
// Claude Code denied tools it asked for (permission_denials): nothing
// answers a permission prompt under --print, so the work the model planned
// did not happen. Retrying with the same settings cannot help, so it is
// permanent; the message names the tools and the settings to change.
func claudeDenied(what string, r claudeResult, s config.ClaudeSettings, transcript string) *stepFailure {
	var tail strings.Builder
	tail.WriteString("permission_denials:\n")
	for _, d := range r.PermissionDenials {
		in, _ := json.Marshal(d.ToolInput)
		fmt.Fprintf(&tail, "  %s %s\n", d.ToolName, oneLine(string(in), 300))
	}
	return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true, LogPath: transcript, Tail: tail.String(),
		Message: fmt.Sprintf("%s: Claude Code denied %d tool call(s): %s (permission_mode %s, allowed_tools [%s]); allow them with claude.allowed_tools "+
			"(or the step's claude_options, --claude-allowed-tools, the claude-allowed-tools input) or set claude.on_permission_denial: ignore",
			what, len(r.PermissionDenials), strings.Join(r.deniedTools(), ", "), s.PermissionMode, strings.Join(s.AllowedTools, ", "))}
}

// noteClaudeResult writes what the result says about the run to the
// item's log: turns, terminal reason, denied tools.
func noteClaudeResult(log io.Writer, r claudeResult) {
	fmt.Fprintf(log, "--- claude result: subtype %s, %d turn(s)", r.Subtype, r.NumTurns)
	if r.TerminalReason != "" {
		fmt.Fprintf(log, ", terminal_reason %s", r.TerminalReason)
	}
	if tools := r.deniedTools(); len(tools) > 0 {
		fmt.Fprintf(log, ", denied: %s", strings.Join(tools, ", "))
	}
	fmt.Fprintln(log)
}
