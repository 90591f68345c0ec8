package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/dlq"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/jobstore"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner/agentuser"
	"github.com/prodigy-action/prodigy-action/runner/event"
	"github.com/prodigy-action/prodigy-action/runner/guard"
	"github.com/prodigy-action/prodigy-action/runner/progress"
	"github.com/prodigy-action/prodigy-action/runner/step"
	"github.com/prodigy-action/prodigy-action/runner/worktree"
	"github.com/prodigy-action/prodigy-action/spend"
)

// job is one execution (run, resume or redrive) of a job: what it runs
// with, the services its items share and what it has done so far. The
// work of one item is an itemRunner's, step execution a step.Runner's.
type job struct {
	settings
	services
	tally
}

// settings are fixed when the job is built (vars also gets setup's
// captures before the map phase starts).
type settings struct {
	id             string
	paths          Paths
	wf             *config.Workflow
	branch         string // results branch
	parentDir      string
	maxParallel    int
	isolation      Isolation
	mergeMode      MergeMode
	itemPolicy     retry.Policy
	agentTO        time.Duration
	interruptGrace time.Duration     // how long agents may finish after an interrupt
	environ        []string          // the caller's environment
	baseEnv        []string          // environ plus git identity, workflow env and PRODIGY_* values
	vars           map[string]string // workflow env + setup captures
	clock          retry.Clock
	rand           func() float64
	red            *redact.Redactor    // the job's redactor (environment, secrets:, env:)
	redact         func(string) string // red.String
	started        time.Time
	maxCost        float64 // --max-cost-usd; 0 = the checkpoint's or workflow's
	requireItems   bool    // zero selected items is an input error (RunSpec.RequireItems)
	noItems        bool    // the job has no map items by design (RunSpec.NoItems)
	skipReduce     bool    // this execution leaves reduce to a later one (a canary's sample)
	tracer         Tracer  // Engine.Tracer; nil traces nothing
	traceParent    string  // the trace the job's span continues (a sharded job's plan)
	deferTeardown  bool    // Engine.DeferTeardown
}

// services are shared by the job's item runners; each is safe for
// concurrent use.
type services struct {
	git     *gitops.Client
	steps   *step.Runner
	state   *jobstore.State
	events  *event.Log
	store   *dlq.Store
	orphans *jobstore.OrphanRegistry
	trees   *worktree.Pool
	guard   *guard.Guard     // the results branch's and git configuration's integrity (package runner/guard)
	agents  *agentuser.Users // who agents run as (Agents.User); nil: the engine's user
	budget  *spend.Budget    // spend reservations (spend.Budget; budget.go admits items)
	cool    *spend.Cooldown  // the fleet-wide rate-limit cool-down (ratelimit.go)
	prog    *progress.Line
	stderr  io.Writer
	hooks   Hooks
	logMu   sync.Mutex // one log line at a time (and the progress line)
	mergeMu sync.Mutex // one merge at a time; guards the parent worktree
	// span is the job's root span while it runs (tracing.go), mapSpan the
	// map phase's (the parent of item spans); traceID is span's trace id.
	span, mapSpan Span
	traceID       string
}

// tally is what this execution has done so far.
type tally struct {
	// halt ends when nothing new may start: the operation's context was
	// cancelled (an interrupt). Waits for a next attempt or the end of a
	// cool-down end with it; what already runs uses the run context, which
	// outlives it by the interrupt grace (graceContext).
	halt         context.Context
	stopping     atomic.Bool
	stopWhy      atomic.Value    // string
	breaker      *spend.Breaker  // the failure-storm breaker (breakerhook.go)
	costAtOpen   float64         // the job's cost when this execution opened it
	stateErr     atomic.Value    // error: the first checkpoint write that failed (persisted)
	shardStorm   *Storm          // gather: the storm that stopped a shard
	failures     atomic.Int64    // items that ended failed in this execution
	finished     atomic.Int64    // items that ended (any state) in this execution
	agentSeq     atomic.Int64    // last agent number handed out
	inDLQ        map[string]bool // items with a DLQ record when the job started
	deadMu       sync.Mutex
	deadBranches []string // agent branches to delete when the job ends
	// rebase: a completed run of the job ended before this one, so the
	// results branch's tip as found is accepted as verified (the user may
	// have committed on it since).
	rebase bool
	// foundMerges are the merge commits mergedItems found by their
	// Prodigy-Item trailers (resume after a crash), by item id.
	foundMerges map[string]string
	// keepRows keeps every item of the checkpoint in memory while the
	// job runs (a Job's: a shard rewrites its output, every outcome,
	// after each item, and gather imports whole shards); other runs hold
	// only the items running (jobstore.State.EvictRows).
	keepRows bool
}

// defaults fills the zero values of o.
func (o *options) defaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Clock == nil {
		o.Clock = retry.SystemClock
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Hooks == nil {
		o.Hooks = nopHooks{}
	}
	if o.Redactor == nil {
		o.Redactor = redact.New(redact.Config{Environ: o.Environ})
	}
	if o.Isolation == "" {
		o.Isolation = IsolationPool
	}
	if o.Merge == "" {
		o.Merge = MergeTree
	}
	if o.ClaudeCommand == "" {
		o.ClaudeCommand = o.Getenv("PRODIGY_CLAUDE_COMMAND")
	}
	if o.ClaudeCommand == "" {
		o.ClaudeCommand = "claude"
	}
}

type nopHooks struct{}

func (nopHooks) ItemFinished(ItemOutcome, string) {}
func (nopHooks) Warning(string)                   {}

// logf prints a human log line to stderr.
func (j *job) logf(format string, args ...any) {
	j.logMu.Lock()
	defer j.logMu.Unlock()
	j.prog.ClearLine()
	fmt.Fprint(j.stderr, j.redact(fmt.Sprintf(format+"\n", args...)))
	j.prog.Redraw()
}

// warn logs a warning (WARN level), forwards it to the hooks and never fails the job.
func (j *job) warn(msg string) {
	j.logf("WARN %s", msg)
	j.hooks.Warning(j.redact(msg))
}

func (j *job) now() time.Time { return j.clock.Now() }

// stop asks the map phase to start no new items.
func (j *job) stop(why string) {
	if j.stopping.CompareAndSwap(false, true) {
		j.stopWhy.Store(why)
		j.logf("stopping: %s (running agents finish, the rest stay pending)", why)
	}
}

func (j *job) stopReason() string {
	if v, ok := j.stopWhy.Load().(string); ok {
		return v
	}
	return ""
}

// lookTools resolves bash and, when the workflow uses claude steps, the
// Claude command.
func lookTools(wf *config.Workflow, claude string) (bash, claudePath string, err error) {
	bash, err = exec.LookPath("bash")
	if err != nil {
		return "", "", fmt.Errorf("bash not found on PATH: %w", err)
	}
	if !usesClaude(wf) {
		return bash, claude, nil
	}
	claudePath, err = exec.LookPath(claude)
	if err != nil {
		return "", "", fmt.Errorf("the workflow has claude steps but the Claude command %q was not found (set PRODIGY_CLAUDE_COMMAND): %w", claude, err)
	}
	if !filepath.IsAbs(claudePath) {
		if abs, err := filepath.Abs(claudePath); err == nil {
			claudePath = abs
		}
	}
	return bash, claudePath, nil
}

func usesClaude(wf *config.Workflow) bool {
	var walk func([]config.Step) bool
	walk = func(steps []config.Step) bool {
		for _, s := range steps {
			if s.Claude != "" || walk(s.OnFailure) {
				return true
			}
		}
		return false
	}
	return walk(wf.Setup) || walk(wf.Map.AgentTemplate) || walk(wf.Reduce) || walk(wf.ErrorPolicy.CustomHandler)
}

// lock takes the job lock (jobstore.LockJob). A job held by another
// process is a *UsageError. The returned function releases the lock; a
// failure to release is a warning.
func (j *job) lock() (func(), error) {
	unlock, err := jobstore.LockJob(j.paths)
	if errors.Is(err, jobstore.ErrJobLocked) {
		return nil, usage(err)
	}
	if err != nil {
		return nil, err
	}
	return func() {
		if err := unlock(); err != nil {
			j.warn(fmt.Sprintf("release the job lock: %v", err))
		}
	}, nil
}

// jobRedactor is the job's redactor: base (or one over environ) plus the
// values of the workflow's `secrets:` names and of secret-looking names in
// its `env:`.
func jobRedactor(base *redact.Redactor, environ []string, wf *config.Workflow) *redact.Redactor {
	if base == nil {
		base = redact.New(redact.Config{Environ: environ})
	}
	var wfEnv []string
	for k, v := range wf.Env {
		wfEnv = append(wfEnv, k+"="+v)
	}
	all := append(append([]string{}, environ...), wfEnv...)
	return base.WithNames(all, wf.Secrets...).With(redact.New(redact.Config{Environ: wfEnv}).Values()...)
}

// persisted takes the error of a checkpoint write. A write that failed
// (a full or read-only disk) leaves the state on disk behind the job, so
// it is never dropped: the first one is kept, warned about and stops
// launching (running agents finish; their outcomes stay in memory and the
// next write that succeeds carries them), and the job ends failed naming
// it (stateError) so `resume` starts from what is on disk.
func (j *job) persisted(what string, err error) {
	if err == nil {
		return
	}
	err = fmt.Errorf("write the checkpoint (%s): %w", what, err)
	if j.stateErr.CompareAndSwap(nil, err) {
		j.warn(err.Error())
		j.stop("the checkpoint could not be written")
	}
}

// halted reports whether nothing new may start (see halt).
func (j *job) halted() bool { return j.halt != nil && j.halt.Err() != nil }

// haltContext is halt, or a context that never ends before graceContext
// set it.
func (j *job) haltContext() context.Context {
	if j.halt == nil {
		return context.Background()
	}
	return j.halt
}

// stateError is the first checkpoint write that failed, or nil.
func (j *job) stateError() error {
	err, _ := j.stateErr.Load().(error)
	return err
}
