package runner_test

import (
	"context"
	"io"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
	"github.com/prodigy-action/prodigy-action/runner"
)

// Options is how the engine's tests describe a job: every setting in one
// value, the Engine's dependencies and an operation's choices together.
// The functions below split it as a caller does — the Engine (engine),
// how agents run (agents), the operation's spec — so every test drives the
// Engine's public methods.
type Options struct {
	Workflow         *config.Workflow
	RepoDir          string
	Home             string
	JobID            string
	Branch           string
	MaxParallel      int
	ClaudeCommand    string
	ClaudeArgs       []string
	Claude           config.ClaudeSettings
	Stderr           io.Writer
	Hooks            runner.Hooks
	Getenv           func(string) string
	Environ          []string
	Clock            retry.Clock
	Rand             func() float64
	Isolation        runner.Isolation
	Sparse           []string
	Merge            runner.MergeMode
	Redactor         *redact.Redactor
	InterruptGrace   time.Duration
	KillGrace        time.Duration
	AgentUser        string
	Git              gitops.Options
	WorkflowFile     string
	Onto             string
	MaxCostUSD       float64
	RequireItems     bool
	NoItems          bool
	DeferTeardown    bool
	ProgressInterval time.Duration
	Tracer           runner.Tracer
}

// engine is the Engine of o's dependencies, with its state under home.
func (o Options) engine(home string) *runner.Engine {
	return &runner.Engine{Home: home, Git: o.Git, Clock: o.Clock, Rand: o.Rand, Redactor: o.Redactor, Tracer: o.Tracer,
		Stderr: o.Stderr, Hooks: o.Hooks, Getenv: o.Getenv, Environ: o.Environ, ClaudeCommand: o.ClaudeCommand, ClaudeArgs: o.ClaudeArgs,
		InterruptGrace: o.InterruptGrace, KillGrace: o.KillGrace, ProgressInterval: o.ProgressInterval, DeferTeardown: o.DeferTeardown}
}

// agents is how o's agents run.
func (o Options) agents() runner.Agents {
	return runner.Agents{MaxParallel: o.MaxParallel, User: o.AgentUser, Claude: o.Claude}
}

// runJob is Engine.Run.
func runJob(ctx context.Context, o Options) (*runner.Result, error) {
	return o.engine(o.Home).Run(ctx, runner.RunSpec{Workflow: o.Workflow, RepoDir: o.RepoDir, JobID: o.JobID, Branch: o.Branch,
		Isolation: o.Isolation, Merge: o.Merge, Sparse: o.Sparse, Agents: o.agents(), MaxCostUSD: o.MaxCostUSD,
		RequireItems: o.RequireItems, NoItems: o.NoItems})
}

// ResumeOptions is a resume of job JobID under Home.
type ResumeOptions struct {
	Home       string
	JobID      string
	IncludeDLQ bool
	Run        Options
}

// resumeJob is Engine.Resume.
func resumeJob(ctx context.Context, ro ResumeOptions) (*runner.Result, error) {
	o := ro.Run
	return o.engine(ro.Home).Resume(ctx, runner.ResumeSpec{JobID: ro.JobID, IncludeDLQ: ro.IncludeDLQ, WorkflowFile: o.WorkflowFile,
		Onto: o.Onto, MaxCostUSD: o.MaxCostUSD, Agents: o.agents()})
}

// RetryOptions is a redrive of job JobID's DLQ under Home.
type RetryOptions struct {
	Home       string
	JobID      string
	Filter     string
	MaxRetries int
	Parallel   int
	Force      bool
	DryRun     bool
	Signature  string
	BatchSize  int
	Sample     int
	Selected   func(runner.ItemOutcome) error
	Run        Options
}

// retryDLQ is Engine.Redrive (Parallel, when set, is the redrive's
// parallelism; else Run.MaxParallel's).
func retryDLQ(ctx context.Context, ro RetryOptions) (*runner.Result, error) {
	o := ro.Run
	a := o.agents()
	if ro.Parallel > 0 {
		a.MaxParallel = ro.Parallel
	}
	return o.engine(ro.Home).Redrive(ctx, runner.RedriveSpec{JobID: ro.JobID, Filter: ro.Filter, MaxRetries: ro.MaxRetries,
		Force: ro.Force, DryRun: ro.DryRun, Selected: ro.Selected, Signature: ro.Signature, Sample: ro.Sample, BatchSize: ro.BatchSize,
		WorkflowFile: o.WorkflowFile, Onto: o.Onto, MaxCostUSD: o.MaxCostUSD, Agents: a})
}
