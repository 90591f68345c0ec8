package step

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
// shell, its stream-json transcript appended to sc.Transcript through the
// redactor and claudecode's size limits; the step fails as the exit, the
// final result event or its permission denials say (claudecode).
func (s *Runner) claude(ctx context.Context, st config.Step, sc *Context) (string, *Failure) {
	prompt, err := interp.Interpolate(st.Claude, sc.Vars)
	if err != nil {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate claude step: %v", err), Permanent: true}
	}
	if err := os.MkdirAll(filepath.Dir(sc.Transcript), 0o755); err != nil {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Message: fmt.Sprintf("create log dir: %v", err)}
	}
	tf, err := os.OpenFile(sc.Transcript, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Message: fmt.Sprintf("open transcript: %v", err)}
	}
	start, _ := tf.Seek(0, io.SeekEnd)
	settings := s.Claude.Settings(st)
	args := s.Claude.Argv(settings, sc.Spend.BudgetArgs(), prompt)
	if len(prompt) > maxArgLen {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true,
			Message: fmt.Sprintf("%s: the interpolated prompt is %d bytes, more than the %d bytes one command-line argument can hold; "+
				"write large values to a file (write_file) and refer to it in the prompt", sc.label, len(prompt), maxArgLen)}
	}
	stepEnv, f := interpolateEnv(st, sc.Vars)
	if f != nil {
		return "", f
	}
	env := WithEnv(sc.Env, stepEnv)
	env = append(env, "PRODIGY_AUTOMATION=true")
	env, cleanup, f := s.passLargeValues(env, nil, sc.Owner)
	if f != nil {
		return "", f
	}
	defer cleanup()
	tw := s.Red.JSONLinesWriter(tf)
	lim := claudecode.LimitTranscript(tw)
	errTail := procsup.NewTailBuffer(procsup.TailSize)
	res := procsup.Run(ctx, procsup.Spec{Path: s.Claude.Path, Args: args, Dir: sc.Dir, Env: env, Stdout: lim, Stderr: io.MultiWriter(sc.Log, errTail), Grace: s.Grace, User: Credential(sc.Owner)})
	lim.Close()
	tw.Close()
	tf.Close()
	what := sc.label
	if f := processFailure(what, res, st.Timeout); f != nil {
		f.LogPath = sc.Transcript
		if res.Cause == nil && res.StartErr == nil && res.ExitCode != 0 {
			var final *claudecode.Result
			if r, ok, err := claudecode.FinalResult(sc.Transcript, start); err == nil && ok {
				final = &r
				r.Note(sc.Log)
			}
			f.Message = claudecode.ExitMessage(what, res.ExitCode, final, errTail.String())
			if final != nil && final.Subtype == claudecode.SubtypeMaxTurns {
				mt := claudecode.ReportedError(what, *final)
				f.Type, f.Message = mt.Type, fmt.Sprintf("%s [exited with code %d]", mt.Message, res.ExitCode)
			}
		}
		return "", f
	}
	result, ok, err := claudecode.FinalResult(sc.Transcript, start)
	switch {
	case err != nil:
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: fmt.Sprintf("%s: read transcript: %v", what, err), LogPath: sc.Transcript}
	case !ok:
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: what + ": transcript has no final result event", LogPath: sc.Transcript, Tail: string(res.Tail)}
	}
	result.Note(sc.Log)
	switch {
	case result.IsError || (result.Subtype != "" && result.Subtype != "success"):
		return "", claudeFailure(claudecode.ReportedError(what, result), sc.Transcript)
	case len(result.PermissionDenials) > 0 && settings.FailOnDenial():
		return "", claudeFailure(claudecode.Denied(what, result, settings), sc.Transcript)
	}
	return result.Result, nil
}

// claudeFailure is the step failure of a claude step that failed as f
// says, its transcript at transcript.
func claudeFailure(f claudecode.Failure, transcript string) *Failure {
	return &Failure{Type: f.Type, Message: f.Message, Tail: f.Tail, Permanent: f.Permanent, LogPath: transcript}
}
