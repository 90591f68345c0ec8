package claudecode

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/brief"
)

// Failure is why a claude step failed, in the DLQ's terms; the caller
// adds where the transcript is.
type Failure struct {
	Type    dlq.ErrorType
	Message string
	// Tail is the output to keep with the failure ("" for none).
	Tail string
	// Permanent says retrying with the same settings cannot help.
	Permanent bool
}

// ExitMessage is the one message of a claude step (what, e.g. "map step
// 2") that exited with a non-zero code: the final result event's text when
// the transcript has one (r, nil when it has none), else the last line
// Claude wrote to stderr that is not a JSON event, else the bare exit. It
// depends only on what Claude wrote, never on how stdout and stderr
// interleaved, so one cause gives one error signature.
func ExitMessage(what string, code int, r *Result, stderr string) string {
	exit := fmt.Sprintf("%s exited with code %d", what, code)
	if r != nil {
		if text := brief.OneLine(r.text(), 300); text != "" {
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
			return brief.OneLine(l, 200)
		}
	}
	return ""
}

// ReportedError is the failure of a claude step whose final result event
// has is_error or a non-success subtype. A run stopped at its turn limit
// (SubtypeMaxTurns) is ResourceExhausted. Otherwise there is no exit code
// to report (the process succeeded), so the type is what the message says
// (rate limits are ResourceExhausted, …) and else Unknown, never an
// invented CommandFailed exit code.
func ReportedError(what string, r Result) Failure {
	text := r.text()
	if strings.TrimSpace(text) == "" {
		text = r.Subtype
	}
	if strings.TrimSpace(text) == "" {
		text = "is_error without a message"
	}
	if r.Subtype == SubtypeMaxTurns {
		return Failure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted},
			Message: fmt.Sprintf("%s stopped at its turn limit (max_turns, %s): %s [%s]", what, SubtypeMaxTurns, brief.OneLine(text, 300), strings.TrimPrefix(r.details(), ", "))}
	}
	t := dlq.Classify(text)
	if t.Kind == dlq.CommandFailed {
		t = dlq.ErrorType{Kind: dlq.Unknown}
	}
	msg := fmt.Sprintf("%s reported an error: %s", what, brief.OneLine(text, 300))
	if d := strings.TrimPrefix(r.details(), ", "); d != "" {
		msg += " [" + d + "]"
	}
	return Failure{Type: t, Message: msg}
}

// Denied is the failure of a claude step whose run succeeded while Claude
// Code denied tools it asked for (permission_denials) under settings s:
// nothing answers a permission prompt under --print, so the work the model
// planned did not happen. Retrying with the same settings cannot help, so
// it is permanent; the message names the tools and the settings to change,
// the tail lists each denied call.
func Denied(what string, r Result, s config.ClaudeSettings) Failure {
	var tail strings.Builder
	tail.WriteString("permission_denials:\n")
	for _, d := range r.PermissionDenials {
		in, _ := json.Marshal(d.ToolInput)
		fmt.Fprintf(&tail, "  %s %s\n", d.ToolName, brief.OneLine(string(in), 300))
	}
	return Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true, Tail: tail.String(),
		Message: fmt.Sprintf("%s: Claude Code denied %d tool call(s): %s (permission_mode %s, allowed_tools [%s]); allow them with claude.allowed_tools "+
			"(or the step's claude_options, --claude-allowed-tools, the claude-allowed-tools input) or set claude.on_permission_denial: ignore",
			what, len(r.PermissionDenials), strings.Join(r.deniedTools(), ", "), s.PermissionMode, strings.Join(s.AllowedTools, ", "))}
}
