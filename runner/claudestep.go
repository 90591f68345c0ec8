package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/interp"
)

// claude runs claude step st: the command claudecode builds, without a
// shell, its stream-json transcript appended to sc.transcript through the
// redactor and claudecode's size limits; the step fails as the exit, the
// final result event or its permission denials say (claudecode).
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
	settings := s.claudeCode.Settings(st)
	args := s.claudeCode.Argv(settings, sc.spend.BudgetArgs(), prompt)
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
	lim := claudecode.LimitTranscript(tw)
	errTail := procsup.NewTailBuffer(procsup.TailSize)
	res := procsup.Run(ctx, procsup.Spec{Path: s.claudeCode.Path, Args: args, Dir: sc.dir, Env: env, Stdout: lim, Stderr: io.MultiWriter(sc.log, errTail), Grace: s.grace, User: credentialOf(sc.owner)})
	lim.Close()
	tw.Close()
	tf.Close()
	what := sc.label
	if f := processFailure(what, res, st.Timeout); f != nil {
		f.LogPath = sc.transcript
		if res.Cause == nil && res.StartErr == nil && res.ExitCode != 0 {
			var final *claudecode.Result
			if r, ok, err := claudecode.FinalResult(sc.transcript, start); err == nil && ok {
				final = &r
				r.Note(sc.log)
			}
			f.Message = claudecode.ExitMessage(what, res.ExitCode, final, errTail.String())
			if final != nil && final.Subtype == claudecode.SubtypeMaxTurns {
				mt := claudecode.ReportedError(what, *final)
				f.Type, f.Message = mt.Type, fmt.Sprintf("%s [exited with code %d]", mt.Message, res.ExitCode)
			}
		}
		return "", f
	}
	result, ok, err := claudecode.FinalResult(sc.transcript, start)
	switch {
	case err != nil:
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: fmt.Sprintf("%s: read transcript: %v", what, err), LogPath: sc.transcript}
	case !ok:
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: what + ": transcript has no final result event", LogPath: sc.transcript, Tail: string(res.Tail)}
	}
	result.Note(sc.log)
	switch {
	case result.IsError || (result.Subtype != "" && result.Subtype != "success"):
		return "", claudeFailure(claudecode.ReportedError(what, result), sc.transcript)
	case len(result.PermissionDenials) > 0 && settings.FailOnDenial():
		return "", claudeFailure(claudecode.Denied(what, result, settings), sc.transcript)
	}
	return result.Result, nil
}

// claudeFailure is the step failure of a claude step that failed as f
// says, its transcript at transcript.
func claudeFailure(f claudecode.Failure, transcript string) *stepFailure {
	return &stepFailure{Type: f.Type, Message: f.Message, Tail: f.Tail, Permanent: f.Permanent, LogPath: transcript}
}
