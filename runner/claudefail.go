package runner

import (
	"fmt"
	"strings"

	"github.com/prodigy-action/prodigy-action/dlq"
)

// claudeExitMessage is the one message of a claude step that exited with
// a non-zero code: the final result event's text when the transcript has
// one, else the last line Claude wrote to stderr that is not a JSON event,
// else the bare exit. It depends only on what Claude wrote, never on how
// stdout and stderr interleaved, so one cause gives one error signature.
func claudeExitMessage(what string, code int, transcript string, start int64, stderr string) string {
	exit := fmt.Sprintf("%s exited with code %d", what, code)
	if r, ok, err := finalClaudeResult(transcript, start); err == nil && ok {
		if text := oneLine(r.Result, 300); text != "" {
			return fmt.Sprintf("%s [%s]", text, exit)
		}
		if r.Subtype != "" && r.Subtype != "success" {
			return fmt.Sprintf("%s [%s]", r.Subtype, exit)
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
	text := r.Result
	if strings.TrimSpace(text) == "" {
		text = r.Subtype
	}
	if strings.TrimSpace(text) == "" {
		text = "is_error without a message"
	}
	t := dlq.Classify(text)
	if t.Kind == dlq.CommandFailed {
		t = dlq.ErrorType{Kind: dlq.Unknown}
	}
	return &stepFailure{Type: t, Message: fmt.Sprintf("%s reported an error: %s", what, oneLine(text, 300)), LogPath: transcript}
}
