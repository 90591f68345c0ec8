package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/retry"
)

// stepRunner executes workflow steps (shell, claude, write_file) with
// their own retries, timeouts, commit checks and output captures. It holds
// no per-run state: the working directory, scope and logs come in a
// stepContext.
type stepRunner struct {
	git        *gitops.Client
	bash       string   // bash for shell steps
	claudeCmd  string   // the Claude Code executable
	claudeArgs []string // extra arguments before the fixed flags
	grace      time.Duration
	clock      retry.Clock
	rand       func() float64
}

// stepContext is what the steps of one phase or agent attempt share.
type stepContext struct {
	dir  string    // working directory (a worktree)
	vars Vars      // interpolation scope; captures are added as steps run
	env  []string  // process environment
	log  io.Writer // the agent's or phase's log
	// transcript is where claude steps append their stream-json output.
	transcript string
	// label names the running step in messages: `shell step 2` or `step "lint"`.
	label string
}

// stepLabel names step i (0-based) of a sequence for error messages; the
// full command is in step_failed.
func stepLabel(st config.Step, i int) string {
	if st.Name != "" {
		return fmt.Sprintf("step %q", st.Name)
	}
	kind := "shell"
	switch {
	case st.Claude != "":
		kind = "claude"
	case st.WriteFile != nil:
		kind = "write_file"
	}
	return fmt.Sprintf("%s step %d", kind, i+1)
}

// stepFailure describes why a step (and so the item attempt or phase) failed.
type stepFailure struct {
	Type        dlq.ErrorType
	Message     string
	Step        string
	Tail        string
	LogPath     string
	Interrupted bool
	// Permanent failures are not retried (bad interpolation, unsafe path).
	Permanent bool
}

func (f *stepFailure) Error() string { return f.Message }

// run runs steps in order. A failing step fails the sequence unless
// its on_failure handler succeeds, in which case the next step runs.
func (s *stepRunner) run(ctx context.Context, steps []config.Step, sc *stepContext) *stepFailure {
	for i, st := range steps {
		fmt.Fprintf(sc.log, "--- step %d/%d: %s\n", i+1, len(steps), oneLine(st.Describe(), 200))
		sc.label = stepLabel(st, i)
		f := s.runWithRetry(ctx, st, sc)
		if f == nil {
			continue
		}
		if f.Interrupted || len(st.OnFailure) == 0 {
			return f
		}
		fmt.Fprintf(sc.log, "--- step failed (%s); running its on_failure handler\n", f.Message)
		if hf := s.run(ctx, st.OnFailure, sc); hf != nil {
			if hf.Interrupted {
				return hf
			}
			f.Message = fmt.Sprintf("%s; on_failure handler failed: %s", f.Message, hf.Message)
			return f
		}
		fmt.Fprintf(sc.log, "--- on_failure handler succeeded; continuing\n")
	}
	return nil
}

// runWithRetry applies the step's own `retry:` block, if any.
func (s *stepRunner) runWithRetry(ctx context.Context, st config.Step, sc *stepContext) *stepFailure {
	if st.Retry == nil {
		return s.runOne(ctx, st, sc)
	}
	pol, err := RetryPolicy(st.Retry)
	if err != nil {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: err.Error(), Step: st.Describe(), Permanent: true}
	}
	var last *stepFailure
	_ = retry.Do(ctx, pol, retry.Options{Clock: s.clock, Rand: s.rand, OnAttempt: func(a retry.Attempt) {
		if !a.Final {
			fmt.Fprintf(sc.log, "--- step attempt %d failed; retrying in %s\n", a.Number, a.Delay)
		}
	}}, func(ctx context.Context, attempt int) error {
		last = s.runOne(ctx, st, sc)
		if last == nil {
			return nil
		}
		if last.Interrupted || last.Permanent {
			return retry.Permanent(last)
		}
		return last
	})
	if last == nil && ctx.Err() != nil {
		return &stepFailure{Message: "interrupted", Step: st.Describe(), Interrupted: true}
	}
	return last
}

// runOne runs one step with its timeout, commit check and capture.
func (s *stepRunner) runOne(ctx context.Context, st config.Step, sc *stepContext) *stepFailure {
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, st.Timeout, errStepTimeout)
		defer cancel()
	}
	var before string
	if st.CommitRequired {
		h, err := s.git.Head(ctx, sc.dir)
		if err != nil {
			return &stepFailure{Type: dlq.ErrorType{Kind: dlq.WorktreeError}, Message: fmt.Sprintf("read HEAD before step: %v", err), Step: st.Describe()}
		}
		before = h
	}
	var (
		f   *stepFailure
		out string
	)
	switch {
	case st.WriteFile != nil:
		f = s.writeFile(st, sc)
	case st.Claude != "":
		out, f = s.claude(ctx, st, sc)
	default:
		out, f = s.shell(ctx, st, sc)
	}
	if f != nil {
		f.Step = st.Describe()
		return f
	}
	if st.CaptureOutput != "" {
		sc.vars[st.CaptureOutput] = strings.TrimRight(out, "\r\n")
	}
	if st.CommitRequired {
		after, err := s.git.Head(ctx, sc.dir)
		if err != nil {
			return &stepFailure{Type: dlq.ErrorType{Kind: dlq.WorktreeError}, Message: fmt.Sprintf("read HEAD after step: %v", err), Step: st.Describe()}
		}
		if after == before {
			f := &stepFailure{
				Type:    dlq.ErrorType{Kind: dlq.CommitValidationFailed},
				Message: "commit required but no commit was created by step " + oneLine(st.Describe(), 120),
				Step:    st.Describe(),
			}
			if st.Claude != "" {
				f.LogPath = sc.transcript // what Claude did instead is in its transcript
			}
			return f
		}
	}
	return nil
}

// processFailure classifies a finished process.
func processFailure(what string, res procResult, timeout time.Duration) *stepFailure {
	tail := string(res.Tail)
	switch {
	case res.Cause != nil && errors.Is(res.Cause, errInterrupted):
		return &stepFailure{Message: "interrupted", Tail: tail, Interrupted: true}
	case res.Cause != nil && (errors.Is(res.Cause, errStepTimeout) || errors.Is(res.Cause, errAgentTimeout) || errors.Is(res.Cause, context.DeadlineExceeded)):
		msg := fmt.Sprintf("%s timed out", what)
		if errors.Is(res.Cause, errAgentTimeout) {
			msg = fmt.Sprintf("%s killed: agent timeout exceeded", what)
		} else if timeout > 0 {
			msg = fmt.Sprintf("%s timed out after %s", what, timeout)
		}
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.Timeout}, Message: msg, Tail: tail}
	case res.Cause != nil:
		return &stepFailure{Message: "interrupted", Tail: tail, Interrupted: true}
	case res.StartErr != nil:
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: res.ExitCode}, Message: fmt.Sprintf("%s could not run: %v", what, res.StartErr), Tail: tail}
	case res.ExitCode != 0:
		msg := fmt.Sprintf("%s exited with code %d", what, res.ExitCode)
		if last := lastOutputLine(tail); last != "" {
			// The output's last line leads, so similar failures share a signature.
			msg = fmt.Sprintf("%s [%s]", last, msg)
		}
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: res.ExitCode}, Message: msg, Tail: tail}
	}
	return nil
}

// lastOutputLine is the last non-empty line of a process's output, shortened.
func lastOutputLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\r\n\t "), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return oneLine(l, 200)
		}
	}
	return ""
}

func (s *stepRunner) shell(ctx context.Context, st config.Step, sc *stepContext) (string, *stepFailure) {
	script, extra, err := InterpolateShell(st.Shell, sc.vars)
	if err != nil {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate shell step: %v", err), Permanent: true}
	}
	env := withEnv(sc.env, envMap(st.Env))
	env = append(env, extra...)
	res := runProcess(ctx, procSpec{Path: s.bash, Args: []string{"-c", script}, Dir: sc.dir, Env: env, Stdout: sc.log, Stderr: sc.log, Grace: s.grace})
	if f := processFailure(sc.label, res, st.Timeout); f != nil {
		return "", f
	}
	return string(res.Stdout), nil
}

func (s *stepRunner) claude(ctx context.Context, st config.Step, sc *stepContext) (string, *stepFailure) {
	prompt, err := Interpolate(st.Claude, sc.vars)
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
	args := append(append([]string{}, s.claudeArgs...), "--print", "--output-format", "stream-json", "--verbose", prompt)
	env := withEnv(sc.env, envMap(st.Env))
	env = append(env, "PRODIGY_AUTOMATION=true")
	errTail := &tailBuffer{max: tailSize}
	res := runProcess(ctx, procSpec{Path: s.claudeCmd, Args: args, Dir: sc.dir, Env: env, Stdout: tf, Stderr: io.MultiWriter(sc.log, errTail), Grace: s.grace})
	tf.Close()
	what := sc.label
	if f := processFailure(what, res, st.Timeout); f != nil {
		f.LogPath = sc.transcript
		if res.Cause == nil && res.StartErr == nil && res.ExitCode != 0 {
			f.Message = claudeExitMessage(what, res.ExitCode, sc.transcript, start, errTail.String())
		}
		return "", f
	}
	result, ok, err := finalClaudeResult(sc.transcript, start)
	switch {
	case err != nil:
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: fmt.Sprintf("%s: read transcript: %v", what, err), LogPath: sc.transcript}
	case !ok:
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.Unknown}, Message: what + ": transcript has no final result event", LogPath: sc.transcript, Tail: string(res.Tail)}
	case result.IsError || (result.Subtype != "" && result.Subtype != "success"):
		return "", claudeReportedError(what, result, sc.transcript)
	}
	return result.Result, nil
}

// claudeResult is the final `{"type":"result"}` event of a stream-json transcript.
type claudeResult struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	IsError bool   `json:"is_error"`
	Result  string `json:"result"`
}

// finalClaudeResult returns the last result event written after offset.
func finalClaudeResult(path string, offset int64) (claudeResult, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return claudeResult{}, false, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return claudeResult{}, false, err
	}
	var (
		last  claudeResult
		found bool
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev claudeResult
		if json.Unmarshal(line, &ev) == nil && ev.Type == "result" {
			last, found = ev, true
		}
	}
	return last, found, sc.Err()
}

func (s *stepRunner) writeFile(st config.Step, sc *stepContext) *stepFailure {
	wf := st.WriteFile
	rel, err := Interpolate(wf.Path, sc.vars)
	if err != nil {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate write_file path: %v", err), Permanent: true}
	}
	if !filepath.IsLocal(rel) {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("write_file path %q leaves the worktree", rel), Permanent: true}
	}
	content, err := Interpolate(wf.Content, sc.vars)
	if err != nil {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate write_file content: %v", err), Permanent: true}
	}
	path := filepath.Join(sc.dir, rel)
	if wf.CreateDirs {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return &stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Message: fmt.Sprintf("write_file %s: %v", rel, err)}
		}
	}
	mode := wf.Mode
	if mode == 0 {
		mode = 0o644
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Message: fmt.Sprintf("write_file %s: %v", rel, err)}
	}
	fmt.Fprintf(sc.log, "wrote %s (%d bytes)\n", rel, len(content))
	return nil
}

// envMap turns a step env block into NAME=value pairs.
func envMap(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// withEnv returns base with the given NAME=value pairs appended (later wins
// for exec.Cmd, which keeps the last duplicate).
func withEnv(base []string, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	out = append(out, base...)
	return append(out, extra...)
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
