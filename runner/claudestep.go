package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/spend"
)

func (s *stepRunner) claude(ctx context.Context, st config.Step, sc *stepContext) (string, *stepFailure) {
	prompt, err := interp.Interpolate(st.Claude, sc.vars)
	if err != nil {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate claude step: %v", err), Permanent: true}
	}
	if err := os.MkdirAll(filepath.Dir(sc.transcript), 0o755); err != nil {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Message: fmt.Sprintf("create log dir: %v", err)}
	}
	tf, err := os.OpenFile(sc.transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Message: fmt.Sprintf("open transcript: %v", err)}
	}
	start, _ := tf.Seek(0, io.SeekEnd)
	settings := s.claudeSettings(st)
	args := s.claudeArgv(settings, sc.spend.BudgetArgs(), prompt)
	if len(prompt) > maxArgLen {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true,
			Message: fmt.Sprintf("%s: the interpolated prompt is %d bytes, more than the %d bytes one command-line argument can hold; "+
				"write large values to a file (write_file) and refer to it in the prompt", sc.label, len(prompt), maxArgLen)}
	}
	stepEnv, f := interpolateEnv(st, sc.vars)
	if f != nil {
		return "", f
	}
	env := withEnv(sc.env, stepEnv)
	env = append(env, "PRODIGY_AUTOMATION=true")
	env, cleanup, f := s.passLargeValues(env, nil, sc.owner)
	if f != nil {
		return "", f
	}
	defer cleanup()
	tw := s.red.JSONLinesWriter(tf)
	lim := newTranscriptLimiter(tw, maxTranscriptBytes)
	errTail := procsup.NewTailBuffer(procsup.TailSize)
	res := procsup.Run(ctx, procsup.Spec{Path: s.claudeCmd, Args: args, Dir: sc.dir, Env: env, Stdout: lim, Stderr: io.MultiWriter(sc.log, errTail), Grace: s.grace, User: credentialOf(sc.owner)})
	lim.Close()
	tw.Close()
	tf.Close()
	what := sc.label
	if f := processFailure(what, res, st.Timeout); f != nil {
		f.LogPath = sc.transcript
		if res.Cause == nil && res.StartErr == nil && res.ExitCode != 0 {
			var final *claudeResult
			if r, ok, err := finalClaudeResult(sc.transcript, start); err == nil && ok {
				final = &r
				noteClaudeResult(sc.log, r)
			}
			f.Message = claudeExitMessage(what, res.ExitCode, final, errTail.String())
			if final != nil && final.Subtype == subtypeMaxTurns {
				mt := claudeReportedError(what, *final, sc.transcript)
				f.Type, f.Message = mt.Type, fmt.Sprintf("%s [exited with code %d]", mt.Message, res.ExitCode)
			}
		}
		return "", f
	}
	result, ok, err := finalClaudeResult(sc.transcript, start)
	switch {
	case err != nil:
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: fmt.Sprintf("%s: read transcript: %v", what, err), LogPath: sc.transcript}
	case !ok:
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: what + ": transcript has no final result event", LogPath: sc.transcript, Tail: string(res.Tail)}
	}
	noteClaudeResult(sc.log, result)
	switch {
	case result.IsError || (result.Subtype != "" && result.Subtype != "success"):
		return "", claudeReportedError(what, result, sc.transcript)
	case len(result.PermissionDenials) > 0 && settings.FailOnDenial():
		return "", claudeDenied(what, result, settings, sc.transcript)
	}
	return result.Result, nil
}

// claudeSettings resolves the Claude Code options of step st.
func (s *stepRunner) claudeSettings(st config.Step) config.ClaudeSettings {
	return s.claudeWF.For(st, s.claudeOver)
}

// claudeArgv is the argument list of a claude step: the resolved options,
// the caller's extra arguments, the budget cap, the fixed stream-json
// flags, then "--" and the prompt, so a prompt starting with '-' (item
// data) is never read as an option.
func (s *stepRunner) claudeArgv(settings config.ClaudeSettings, budget []string, prompt string) []string {
	args := settings.CommandArgs()
	args = append(args, s.claudeArgs...)
	args = append(args, budget...)
	return append(args, "--print", "--output-format", "stream-json", "--verbose", "--", prompt)
}

// ClaudeCommandLine is the command line claude step st runs with the given
// options, the prompt shown as <prompt> (for validate).
func ClaudeCommandLine(command string, extra []string, wf *config.Workflow, st config.Step, over config.ClaudeSettings) []string {
	s := &stepRunner{claudeArgs: extra, claudeWF: wf.Claude, claudeOver: over}
	return append([]string{command}, s.claudeArgv(s.claudeSettings(st), nil, "<prompt>")...)
}

// claudeResult is the final `{"type":"result"}` event of a stream-json
// transcript (SDKResultMessage of @anthropic-ai/claude-agent-sdk).
type claudeResult struct {
	Type              string             `json:"type"`
	Subtype           string             `json:"subtype"`
	IsError           bool               `json:"is_error"`
	Result            string             `json:"result"`
	Errors            []string           `json:"errors"`
	TerminalReason    string             `json:"terminal_reason"`
	NumTurns          int                `json:"num_turns"`
	PermissionDenials []permissionDenial `json:"permission_denials"`
}

// permissionDenial is one entry of a result's permission_denials.
type permissionDenial struct {
	ToolName  string         `json:"tool_name"`
	ToolInput map[string]any `json:"tool_input"`
}

// finalClaudeResult returns the last result event written after offset.
func finalClaudeResult(path string, offset int64) (claudeResult, bool, error) {
	var (
		last  claudeResult
		found bool
	)
	err := spend.EachTranscriptLine(path, offset, func(line []byte) {
		var ev claudeResult
		if json.Unmarshal(line, &ev) == nil && ev.Type == "result" {
			last, found = ev, true
		}
	})
	return last, found, err
}

// claudeOverrides encodes the caller's Claude options for the checkpoint
// (nil when there are none).
func claudeOverrides(s config.ClaudeSettings) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil || string(b) == "{}" {
		return nil
	}
	return b
}

// restoreClaudeOverrides decodes what claudeOverrides wrote; anything it
// cannot read is no override.
func restoreClaudeOverrides(raw json.RawMessage) config.ClaudeSettings {
	var s config.ClaudeSettings
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil || s.Validate() != nil {
		return config.ClaudeSettings{}
	}
	return s
}
