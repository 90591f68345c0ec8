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
	"syscall"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/spend"
)

// stepRunner executes workflow steps (shell, claude, write_file) with
// their own retries, timeouts, commit checks and output captures. Its only
// state is the job's directory for value files (closed when the job ends):
// the working directory, scope and logs come in a stepContext.
type stepRunner struct {
	git        *gitops.Client
	bash       string   // bash for shell steps
	claudeCmd  string   // the Claude Code executable
	claudeArgs []string // extra arguments before the fixed flags
	// claudeWF is the workflow's `claude:` block and claudeOver the
	// caller's overrides (CLI flags, Action inputs): with a step's
	// claude_options they resolve to the step's Claude Code options.
	claudeWF, claudeOver config.ClaudeSettings
	grace                time.Duration
	clock                retry.Clock
	rand                 func() float64
	red                  *redact.Redactor // claude transcripts are redacted as they are written
	values               valueFiles       // the job's files for step values (PRODIGY_ITEM_FILE, large values)
}

// stepContext is what the steps of one phase or agent attempt share.
type stepContext struct {
	dir  string      // working directory (a worktree)
	vars interp.Vars // interpolation scope; captures are added as steps run
	env  []string    // process environment
	log  io.Writer   // the agent's or phase's log
	// transcript is where claude steps append their stream-json output.
	transcript string
	// label names the running step in messages: `shell step 2` or `step "lint"`.
	label string
	// first and total number the steps when run gets a part of a sequence
	// (reduce runs its steps one at a time); 0 means run's own numbering.
	first, total int
	// spend accounts the cost and rate-limit signals of an item's steps
	// (claudecost.go); nil outside items.
	spend *spend.ItemSpend
	// span is the parent of the steps' spans (an attempt or a phase); nil
	// traces nothing. index is the running step's 1-based position and
	// claude what the last claude step's transcript said (tracing.go).
	span   Span
	index  int
	claude *spend.ClaudeRun
	// owner is the user the steps run as, and own what they write (map
	// steps with Agents.User); nil: the engine's user.
	owner *gitops.Owner
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
	first, total := sc.first, sc.total
	sc.first, sc.total = 0, 0 // on_failure handlers number their own steps
	if total == 0 {
		total = len(steps)
	}
	for i, st := range steps {
		fmt.Fprintf(sc.log, "--- step %d/%d: %s\n", first+i+1, total, oneLine(st.Describe(), 200))
		sc.label, sc.index = stepLabel(st, first+i), first+i+1
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
		return s.tracedOne(ctx, st, sc)
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
		last = s.tracedOne(ctx, st, sc)
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
		out, f = s.accountedClaude(ctx, st, sc)
	default:
		out, f = s.shell(ctx, st, sc)
		noteShellFailure(sc.spend, f)
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
func processFailure(what string, res procsup.Result, timeout time.Duration) *stepFailure {
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
	case res.StartErr != nil && errors.Is(res.StartErr, syscall.E2BIG):
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true, Tail: tail,
			Message: fmt.Sprintf("%s could not run: its arguments and environment are too large for the system (%v); "+
				"pass large values through files", what, res.StartErr)}
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
	prep, err := interp.PrepareShell(st.Shell, sc.vars, interp.ShellOptions{AllowNestedShell: st.AllowNestedShell})
	if err != nil {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate shell step: %v", err), Permanent: true}
	}
	stepEnv, f := interpolateEnv(st, sc.vars)
	if f != nil {
		return "", f
	}
	env := withEnv(sc.env, stepEnv)
	env = append(env, prep.Env...)
	env, cleanup, f := s.passLargeValues(env, prep.Files, sc.owner)
	if f != nil {
		return "", f
	}
	defer cleanup()
	stdout := io.Writer(sc.log)
	var capture *captureBuffer
	if st.CaptureOutput != "" {
		capture = &captureBuffer{max: maxCapturedOutput}
		stdout = io.MultiWriter(sc.log, capture)
	}
	res := procsup.Run(ctx, procsup.Spec{Path: s.bash, Args: []string{"-c", prep.Script}, Dir: sc.dir, Env: env, Stdout: stdout, Stderr: sc.log, Grace: s.grace, User: credentialOf(sc.owner)})
	if f := processFailure(sc.label, res, st.Timeout); f != nil {
		return "", f
	}
	if capture == nil {
		return string(res.Stdout), nil
	}
	if capture.over {
		return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Permanent: true,
			Message: fmt.Sprintf("%s: the captured output (capture_output: %s) is larger than %d MiB; write it to a file instead", sc.label, st.CaptureOutput, maxCapturedOutput>>20)}
	}
	return capture.buf.String(), nil
}

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
	rel, err := interp.Interpolate(wf.Path, sc.vars)
	if err != nil {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate write_file path: %v", err), Permanent: true}
	}
	if !filepath.IsLocal(rel) {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("write_file path %q leaves the worktree", rel), Permanent: true}
	}
	content, err := interp.Interpolate(wf.Content, sc.vars)
	if err != nil {
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate write_file content: %v", err), Permanent: true}
	}
	mode := wf.Mode
	if mode == 0 {
		mode = 0o644
	}
	if err := writeInside(sc.dir, rel, []byte(content), mode, wf.CreateDirs, sc.owner); err != nil {
		if errors.Is(err, errEscapes) {
			return &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("write_file %s: %v", rel, err), Permanent: true}
		}
		return &stepFailure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: 1}, Message: fmt.Sprintf("write_file %s: %v", rel, err)}
	}
	fmt.Fprintf(sc.log, "wrote %s (%d bytes)\n", rel, len(content))
	return nil
}

// errEscapes marks a write_file path that resolves outside the worktree.
var errEscapes = errors.New("the path leaves the worktree (through .., an absolute path or a symbolic link)")

// writeInside writes data to rel under dir through an os.Root, which
// resolves every component (symbolic links included) inside dir: nothing
// outside the worktree can be created, truncated or followed.
//
// With an owner the file, and directories it created, become theirs.
func writeInside(dir, rel string, data []byte, mode os.FileMode, createDirs bool, owner *gitops.Owner) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open worktree: %w", err)
	}
	defer root.Close()
	escapes := func(err error) error {
		var pe *os.PathError
		if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes from parent") {
			return fmt.Errorf("%w: %v", errEscapes, err)
		}
		return err
	}
	if createDirs {
		if d := filepath.Dir(rel); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return escapes(err)
			}
		}
	}
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return escapes(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil || owner == nil {
		return err
	}
	for p := rel; p != "." && p != ""; p = filepath.Dir(p) {
		if err := root.Lchown(p, owner.UID, owner.GID); err != nil {
			return err
		}
	}
	return nil
}

// interpolateEnv renders a step's env block: placeholders in the values
// are replaced by their values as plain data (the variable receives the
// text; nothing is evaluated).
func interpolateEnv(st config.Step, vars interp.Vars) ([]string, *stepFailure) {
	out := make([]string, 0, len(st.Env))
	for _, k := range sortedKeys(st.Env) {
		v, err := interp.Interpolate(st.Env[k], vars)
		if err != nil {
			return nil, &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate env %s: %v", k, err), Permanent: true}
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("env %s: the value contains a NUL byte, which an environment variable cannot hold", k), Permanent: true}
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// maxCapturedOutput bounds a captured step output (capture_output).
const maxCapturedOutput = 64 << 20

// captureBuffer keeps up to max bytes and notes whether more came.
type captureBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *captureBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); len(p) > room {
		c.over = true
		c.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.buf.Write(p)
}

// maxArgLen is the longest single argument or environment string Linux
// accepts (MAX_ARG_STRLEN, 32 pages).
const maxArgLen = 128<<10 - 1

// passLargeValues makes env fit the system's limits: every value file of
// the shell script is written to the job's private directory (valueFiles)
// and its variable set to the path; the item is always written there too,
// as PRODIGY_ITEM_FILE, and PRODIGY_ITEM itself is dropped when it is larger
// than interp.DefaultMaxEnvValue (read the file instead). A step env value
// too large for the environment is a permanent failure. cleanup removes
// the step's files.
func (s *stepRunner) passLargeValues(env []string, files []interp.ValueFile, owner *gitops.Owner) ([]string, func(), *stepFailure) {
	nothing := func() {}
	for _, kv := range env {
		if len(kv) > maxArgLen && !strings.HasPrefix(kv, "PRODIGY_ITEM=") {
			name, _, _ := strings.Cut(kv, "=")
			return nil, nothing, &stepFailure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true,
				Message: fmt.Sprintf("environment variable %s is %d bytes, more than the %d bytes the system allows for one variable; "+
					"pass large values through a placeholder in the script or a file", name, len(kv), maxArgLen)}
		}
	}
	item := -1
	for i, kv := range env {
		if strings.HasPrefix(kv, "PRODIGY_ITEM=") {
			item = i
		}
	}
	if item < 0 && len(files) == 0 {
		return env, nothing, nil
	}
	run := s.values.seq.Add(1)
	var written []string
	cleanup := func() {
		for _, p := range written {
			_ = os.Remove(p)
		}
	}
	write := func(name, content string) (string, *stepFailure) {
		path, err := s.values.write(run, name, content, owner)
		if err != nil {
			cleanup()
			return "", &stepFailure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Message: fmt.Sprintf("write a step value: %v", err)}
		}
		written = append(written, path)
		return path, nil
	}
	out := make([]string, 0, len(env)+len(files)+1)
	for i, kv := range env {
		if i == item {
			val := strings.TrimPrefix(kv, "PRODIGY_ITEM=")
			path, f := write("item.json", val)
			if f != nil {
				return nil, nothing, f
			}
			out = append(out, "PRODIGY_ITEM_FILE="+path)
			if len(val) > interp.DefaultMaxEnvValue {
				continue
			}
		}
		out = append(out, kv)
	}
	for _, vf := range files {
		path, f := write(vf.EnvName, vf.Content)
		if f != nil {
			return nil, nothing, f
		}
		out = append(out, vf.EnvName+"="+path)
	}
	return out, cleanup, nil
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
