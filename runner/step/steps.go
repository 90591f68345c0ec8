package step

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prodigy-action/prodigy-action/claudecode"
	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/internal/brief"
	"github.com/prodigy-action/prodigy-action/internal/procsup"
	"github.com/prodigy-action/prodigy-action/interp"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner/trace"
	"github.com/prodigy-action/prodigy-action/spend"
	"github.com/prodigy-action/prodigy-action/validate"
)

// Runner executes workflow steps (shell, claude, write_file) with their
// own retries, timeouts, commit checks and output captures. Its only state
// is the job's directory for value files (Close removes it): the working
// directory, scope and logs come in a Context. Set its fields before the
// first Run; it is safe for concurrent use after that.
type Runner struct {
	Git  *gitops.Client
	Bash string // bash for shell steps
	// Claude is how claude steps run Claude Code: the executable, the
	// extra arguments, the workflow's `claude:` block and the caller's
	// overrides (CLI flags, Action inputs).
	Claude claudecode.Command
	Grace  time.Duration // a step process's time between SIGTERM and SIGKILL
	Clock  retry.Clock
	Rand   func() float64
	Red    *redact.Redactor // claude transcripts are redacted as they are written
	// Fault, when set, is called at the named moments of a step (crash
	// tests: FaultClaudeDone).
	Fault  func(ctx context.Context, point, detail string)
	values valueFiles // the job's files for step values (PRODIGY_ITEM_FILE, large values)
}

// Close removes the job's value files (when its steps have all ended).
func (s *Runner) Close() { s.values.close() }

// fault calls s.Fault, if set.
func (s *Runner) fault(ctx context.Context, point, detail string) {
	if s.Fault != nil {
		s.Fault(ctx, point, detail)
	}
}

// FaultClaudeDone: a claude step's process ended (what it spent is not
// yet checkpointed): Runner.Fault's point.
const FaultClaudeDone = "claude-done"

// Causes attached to contexts so a killed process can be classified
// (procsup.Result.Cause): a step's timeout, the agent's timeout (the
// engine's attempt), an interrupt (the engine's grace ended).
var (
	ErrStepTimeout  = errors.New("step timeout")
	ErrAgentTimeout = errors.New("agent timeout")
	ErrInterrupted  = errors.New("interrupted")
)

// Context is what the steps of one phase or agent attempt share.
type Context struct {
	Dir  string      // working directory (a worktree)
	Vars interp.Vars // interpolation scope; captures are added as steps run
	Env  []string    // process environment
	Log  io.Writer   // the agent's or phase's log
	// Transcript is where claude steps append their stream-json output.
	Transcript string
	// label names the running step in messages: `shell step 2` or `step "lint"`.
	label string
	// First and Total number the steps when Run gets a part of a sequence
	// (reduce runs its steps one at a time); 0 means Run's own numbering.
	First, Total int
	// Spend accounts the cost and rate-limit signals of an item's steps
	// (claudecost.go); nil outside items.
	Spend *spend.ItemSpend
	// Span is the parent of the steps' spans (an attempt or a phase); nil
	// traces nothing. index is the running step's 1-based position and
	// claude what the last claude step's transcript said (trace.go).
	Span   trace.Span
	index  int
	claude *spend.ClaudeRun
	// Owner is the user the steps run as, and own what they write (map
	// steps with Agents.User); nil: the engine's user.
	Owner *gitops.Owner
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

// Failure describes why a step (and so the item attempt or phase) failed.
type Failure struct {
	Type        dlq.ErrorType
	Message     string
	Step        string
	Tail        string
	LogPath     string
	Interrupted bool
	// Permanent failures are not retried (bad interpolation, unsafe path).
	Permanent bool
}

func (f *Failure) Error() string { return f.Message }

// run runs steps in order. A failing step fails the sequence unless
// its on_failure handler succeeds, in which case the next step runs.
func (s *Runner) Run(ctx context.Context, steps []config.Step, sc *Context) *Failure {
	first, total := sc.First, sc.Total
	sc.First, sc.Total = 0, 0 // on_failure handlers number their own steps
	if total == 0 {
		total = len(steps)
	}
	for i, st := range steps {
		fmt.Fprintf(sc.Log, "--- step %d/%d: %s\n", first+i+1, total, brief.OneLine(st.Describe(), 200))
		sc.label, sc.index = stepLabel(st, first+i), first+i+1
		f := s.runWithRetry(ctx, st, sc)
		if f == nil {
			continue
		}
		if f.Interrupted || len(st.OnFailure) == 0 {
			return f
		}
		fmt.Fprintf(sc.Log, "--- step failed (%s); running its on_failure handler\n", f.Message)
		if hf := s.Run(ctx, st.OnFailure, sc); hf != nil {
			if hf.Interrupted {
				return hf
			}
			f.Message = fmt.Sprintf("%s; on_failure handler failed: %s", f.Message, hf.Message)
			return f
		}
		fmt.Fprintf(sc.Log, "--- on_failure handler succeeded; continuing\n")
	}
	return nil
}

// runWithRetry applies the step's own `retry:` block, if any.
func (s *Runner) runWithRetry(ctx context.Context, st config.Step, sc *Context) *Failure {
	if st.Retry == nil {
		return s.tracedOne(ctx, st, sc)
	}
	pol, err := validate.RetryPolicy(st.Retry)
	if err != nil {
		return &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: err.Error(), Step: st.Describe(), Permanent: true}
	}
	var last *Failure
	_ = retry.Do(ctx, pol, retry.Options{Clock: s.Clock, Rand: s.Rand, OnAttempt: func(a retry.Attempt) {
		if !a.Final {
			fmt.Fprintf(sc.Log, "--- step attempt %d failed; retrying in %s\n", a.Number, a.Delay)
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
		return &Failure{Message: "interrupted", Step: st.Describe(), Interrupted: true}
	}
	return last
}

// runOne runs one step with its timeout, commit check and capture.
func (s *Runner) runOne(ctx context.Context, st config.Step, sc *Context) *Failure {
	if st.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, st.Timeout, ErrStepTimeout)
		defer cancel()
	}
	var before string
	if st.CommitRequired {
		h, err := s.Git.Head(ctx, sc.Dir)
		if err != nil {
			return &Failure{Type: dlq.ErrorType{Kind: dlq.WorktreeError}, Message: fmt.Sprintf("read HEAD before step: %v", err), Step: st.Describe()}
		}
		before = h
	}
	var (
		f   *Failure
		out string
	)
	switch {
	case st.WriteFile != nil:
		f = s.writeFile(st, sc)
	case st.Claude != "":
		out, f = s.accountedClaude(ctx, st, sc)
	default:
		out, f = s.shell(ctx, st, sc)
		noteShellFailure(sc.Spend, f)
	}
	if f != nil {
		f.Step = st.Describe()
		return f
	}
	if st.CaptureOutput != "" {
		sc.Vars[st.CaptureOutput] = strings.TrimRight(out, "\r\n")
	}
	if st.CommitRequired {
		after, err := s.Git.Head(ctx, sc.Dir)
		if err != nil {
			return &Failure{Type: dlq.ErrorType{Kind: dlq.WorktreeError}, Message: fmt.Sprintf("read HEAD after step: %v", err), Step: st.Describe()}
		}
		if after == before {
			f := &Failure{
				Type:    dlq.ErrorType{Kind: dlq.CommitValidationFailed},
				Message: "commit required but no commit was created by step " + brief.OneLine(st.Describe(), 120),
				Step:    st.Describe(),
			}
			if st.Claude != "" {
				f.LogPath = sc.Transcript // what Claude did instead is in its transcript
			}
			return f
		}
	}
	return nil
}

// processFailure classifies a finished process.
func processFailure(what string, res procsup.Result, timeout time.Duration) *Failure {
	tail := string(res.Tail)
	switch {
	case res.Cause != nil && errors.Is(res.Cause, ErrInterrupted):
		return &Failure{Message: "interrupted", Tail: tail, Interrupted: true}
	case res.Cause != nil && (errors.Is(res.Cause, ErrStepTimeout) || errors.Is(res.Cause, ErrAgentTimeout) || errors.Is(res.Cause, context.DeadlineExceeded)):
		msg := fmt.Sprintf("%s timed out", what)
		if errors.Is(res.Cause, ErrAgentTimeout) {
			msg = fmt.Sprintf("%s killed: agent timeout exceeded", what)
		} else if timeout > 0 {
			msg = fmt.Sprintf("%s timed out after %s", what, timeout)
		}
		return &Failure{Type: dlq.ErrorType{Kind: dlq.Timeout}, Message: msg, Tail: tail}
	case res.Cause != nil:
		return &Failure{Message: "interrupted", Tail: tail, Interrupted: true}
	case res.StartErr != nil && errors.Is(res.StartErr, syscall.E2BIG):
		return &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true, Tail: tail,
			Message: fmt.Sprintf("%s could not run: its arguments and environment are too large for the system (%v); "+
				"pass large values through files", what, res.StartErr)}
	case res.StartErr != nil:
		return &Failure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: res.ExitCode}, Message: fmt.Sprintf("%s could not run: %v", what, res.StartErr), Tail: tail}
	case res.ExitCode != 0:
		msg := fmt.Sprintf("%s exited with code %d", what, res.ExitCode)
		if last := lastOutputLine(tail); last != "" {
			// The output's last line leads, so similar failures share a signature.
			msg = fmt.Sprintf("%s [%s]", last, msg)
		}
		return &Failure{Type: dlq.ErrorType{Kind: dlq.CommandFailed, ExitCode: res.ExitCode}, Message: msg, Tail: tail}
	}
	return nil
}

// lastOutputLine is the last non-empty line of a process's output, shortened.
func lastOutputLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\r\n\t "), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return brief.OneLine(l, 200)
		}
	}
	return ""
}

func (s *Runner) shell(ctx context.Context, st config.Step, sc *Context) (string, *Failure) {
	prep, err := interp.PrepareShell(st.Shell, sc.Vars, interp.ShellOptions{AllowNestedShell: st.AllowNestedShell})
	if err != nil {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate shell step: %v", err), Permanent: true}
	}
	stepEnv, f := interpolateEnv(st, sc.Vars)
	if f != nil {
		return "", f
	}
	env := WithEnv(sc.Env, stepEnv)
	env = append(env, prep.Env...)
	env, cleanup, f := s.passLargeValues(env, prep.Files, sc.Owner)
	if f != nil {
		return "", f
	}
	defer cleanup()
	stdout := io.Writer(sc.Log)
	var capture *captureBuffer
	if st.CaptureOutput != "" {
		capture = &captureBuffer{max: maxCapturedOutput}
		stdout = io.MultiWriter(sc.Log, capture)
	}
	res := procsup.Run(ctx, procsup.Spec{Path: s.Bash, Args: []string{"-c", prep.Script}, Dir: sc.Dir, Env: env, Stdout: stdout, Stderr: sc.Log, Grace: s.Grace, User: Credential(sc.Owner)})
	if f := processFailure(sc.label, res, st.Timeout); f != nil {
		return "", f
	}
	if capture == nil {
		return string(res.Stdout), nil
	}
	if capture.over {
		return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Permanent: true,
			Message: fmt.Sprintf("%s: the captured output (capture_output: %s) is larger than %d MiB; write it to a file instead", sc.label, st.CaptureOutput, maxCapturedOutput>>20)}
	}
	return capture.buf.String(), nil
}

// interpolateEnv renders a step's env block: placeholders in the values
// are replaced by their values as plain data (the variable receives the
// text; nothing is evaluated).
func interpolateEnv(st config.Step, vars interp.Vars) ([]string, *Failure) {
	out := make([]string, 0, len(st.Env))
	for _, k := range slices.Sorted(maps.Keys(st.Env)) {
		v, err := interp.Interpolate(st.Env[k], vars)
		if err != nil {
			return nil, &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("interpolate env %s: %v", k, err), Permanent: true}
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Message: fmt.Sprintf("env %s: the value contains a NUL byte, which an environment variable cannot hold", k), Permanent: true}
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
func (s *Runner) passLargeValues(env []string, files []interp.ValueFile, owner *gitops.Owner) ([]string, func(), *Failure) {
	nothing := func() {}
	for _, kv := range env {
		if len(kv) > maxArgLen && !strings.HasPrefix(kv, "PRODIGY_ITEM=") {
			name, _, _ := strings.Cut(kv, "=")
			return nil, nothing, &Failure{Type: dlq.ErrorType{Kind: dlq.ValidationFailed}, Permanent: true,
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
	write := func(name, content string) (string, *Failure) {
		path, err := s.values.write(run, name, content, owner)
		if err != nil {
			cleanup()
			return "", &Failure{Type: dlq.ErrorType{Kind: dlq.ResourceExhausted}, Message: fmt.Sprintf("write a step value: %v", err)}
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

// EnvPairs turns an env block (a step's, the workflow's) into NAME=value
// pairs, sorted by name.
func EnvPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// WithEnv returns base with the given NAME=value pairs appended (later wins
// for exec.Cmd, which keeps the last duplicate).
func WithEnv(base []string, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	out = append(out, base...)
	return append(out, extra...)
}
