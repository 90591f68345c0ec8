package runner

import (
	"context"
	"io"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
)

// Engine runs jobs. It is built once from the long-lived dependencies of
// a process (the CLI's Factory, the Action) and has one method per
// operation — Run, Resume, Redrive — each taking a spec of exactly what
// that operation reads; SetupJob and OpenJob hand out a Job for
// operations built on the engine (the shard package). Zero fields mean the
// documented defaults. An Engine is not changed by its operations; several
// may run at once on different jobs.
type Engine struct {
	// Home is the state directory ($PRODIGY_HOME or ~/.prodigy).
	Home string
	// Git configures every git process of the engine (environment, extra
	// configuration such as safe.directory, hooks); the zero value is
	// gitops' default: a minimal environment without secrets, hooks off.
	Git gitops.Options
	// Clock drives backoff sleeps and timestamps; nil means retry.SystemClock.
	Clock retry.Clock
	// Rand returns uniform values in [0,1) for jitter; nil means math/rand.
	Rand func() float64
	// Redactor removes secrets from everything the engine writes: DLQ
	// records and index, events, checkpoint, session file, workflow copy,
	// Claude transcripts, stderr lines and hook logs and warnings. nil
	// means redact.New over Environ. Either way the values of the
	// workflow's `secrets:` names (and of secret-looking names in its
	// `env:`) are added.
	Redactor *redact.Redactor
	// Tracer receives each job's spans (job → phase → item → attempt →
	// step); nil traces nothing. Its trace id is in the job_started (or
	// job_resumed) event and Result.TraceID.
	Tracer Tracer
	// Stderr receives human logs and progress; nil discards them.
	Stderr io.Writer
	// Hooks receive lifecycle callbacks (GitHub log groups, annotations);
	// nil ignores them.
	Hooks Hooks
	// Getenv reads the process environment; nil means os.Getenv.
	Getenv func(string) string
	// Environ is the base environment of child processes; nil means
	// os.Environ().
	Environ []string
	// ClaudeCommand is the Claude Code executable; "" means
	// $PRODIGY_CLAUDE_COMMAND or "claude" (for resume and redrive: the
	// first run's, when it was not "claude").
	ClaudeCommand string
	// ClaudeArgs are extra arguments passed before the fixed
	// `--print --output-format stream-json --verbose` flags and the prompt.
	ClaudeArgs []string
	// InterruptGrace is how long running agents may take to finish after
	// an interrupt before they are killed; 0 means 30s.
	InterruptGrace time.Duration
	// KillGrace is how long a stopped step's process group has between
	// SIGTERM and SIGKILL (an interrupt after InterruptGrace, a step or
	// agent timeout); 0 means 5s. The GitHub Action shortens it to fit
	// GitHub's cancel sequence.
	KillGrace time.Duration
	// ProgressInterval is the period of non-terminal progress lines; 0
	// means 10s.
	ProgressInterval time.Duration
	// DeferTeardown leaves the deletion of the pool worktrees' files to the
	// caller: at the end of a job they are only moved aside (one rename
	// each) and unregistered from git, and Result.Teardown deletes them, so
	// a caller reports the result (prints it, uploads the DLQ, comments)
	// before paying for deleting max_parallel checkouts. The caller must
	// call Result.Teardown. Without it the files are deleted before the
	// operation returns. (The shard package's shards always delete their
	// own.)
	DeferTeardown bool
}

// Agents is how an operation runs its agents: the caller's choice for this
// operation (command-line flags, Action inputs). Zero values keep the
// defaults — for a resume or a redrive, the job's first run's.
type Agents struct {
	// MaxParallel overrides map.max_parallel when > 0 (a redrive's default
	// is 10).
	MaxParallel int
	// User, when set ("NAME", "UID" or "UID:GID"; --agent-user), runs every
	// map step as that user in a worktree handed to them, with HOME a
	// directory of the job's of theirs: agents can then write nothing of
	// the repository's git directory or the engine's state, by git or by
	// path (package runner/agentuser). "FIRST-LAST" gives every agent running at once a
	// uid of its own; "auto" is 70000-(70000+max_parallel-1) when the
	// engine runs as root and "" otherwise. The engine must run as root;
	// root and negative ids are refused. "" runs agents as the engine's
	// user.
	User string
	// Claude overrides the Claude Code options of the workflow's `claude:`
	// block and every step's claude_options.
	Claude config.ClaudeSettings
}

// RunSpec is what Engine.Run reads: a new job of a workflow.
type RunSpec struct {
	// Workflow is the parsed workflow (config.Load, validate.File).
	Workflow *config.Workflow
	// RepoDir is any directory inside the user's git checkout.
	RepoDir string
	// JobID names the job; "" generates mapreduce-<UTC timestamp>-<random>.
	JobID string
	// Branch is the results branch; "" means prodigy/<job_id>.
	Branch string
	// Isolation selects how agent worktrees are provided: IsolationPool
	// (default) reuses max_parallel worktrees, IsolationFresh creates and
	// removes one worktree per item.
	Isolation Isolation
	// Merge selects how agent branches are merged: MergeTree (default)
	// merges without touching a working tree, MergeWorktree runs
	// `git merge --no-ff` in the parent worktree.
	Merge MergeMode
	// Sparse, when not empty, makes the parent and agent worktrees cone-mode
	// sparse checkouts of these directories (--sparse), replacing the
	// workflow's worktree.sparse. Merges keep every file.
	Sparse []string
	// Agents says how agents run (parallelism, user, Claude settings).
	Agents Agents
	// MaxCostUSD is the job's spend budget in US dollars (--max-cost-usd):
	// it overrides the workflow's budget.max_cost_usd and is kept in the
	// checkpoint for later resumes; 0 keeps the workflow's.
	MaxCostUSD float64
	// RequireItems makes a map input that selects zero items an input
	// error (*UsageError, the job is rolled back) instead of a warning.
	RequireItems bool
	// NoItems creates the job with no map items: setup runs, the workflow's
	// map input is not read and reduce does not run. A redrive of imported
	// DLQ records (the Action's retry-from-run) starts this way; the items
	// then come from the records.
	NoItems bool
}

// ResumeSpec is what Engine.Resume reads: an interrupted, failed or
// completed job continued. Its workflow, repository, branch, isolation
// and merge mode come from the checkpoint.
type ResumeSpec struct {
	// JobID is the job (Latest or "" as FindJob takes them).
	JobID string
	// IncludeDLQ adds the job's reprocess-eligible DLQ items to the pending
	// items (de-duplicated by item id).
	IncludeDLQ bool
	// WorkflowFile (--workflow) is the workflow file to run instead of the
	// job's original path in the checkout.
	WorkflowFile string
	// Onto (--onto) is a branch or revision merged into the results branch
	// before anything runs, e.g. main with a fix.
	Onto string
	// MaxCostUSD replaces the job's budget when > 0 (kept for later
	// resumes).
	MaxCostUSD float64
	// Agents overrides how agents run; zero values keep the first run's.
	Agents Agents
}

// RedriveSpec is what Engine.Redrive reads (`dlq retry`): the selected DLQ
// records of a job run again through its workflow in its results branch.
type RedriveSpec struct {
	// JobID is the job whose DLQ is redriven.
	JobID string
	// Filter is an expression over item.* (record fields merged with
	// item_data); "" selects all.
	Filter string
	// Items, when not nil, restricts the selection to these item ids (a
	// canary's sample or the rest of its cluster).
	Items []string
	// MaxRetries is the number of attempts per item; 0 means 3.
	MaxRetries int
	// Force includes records that are not reprocess_eligible.
	Force bool
	// DryRun lists what would run and changes nothing; it needs neither
	// bash nor the Claude command.
	DryRun bool
	// Selected, when set with DryRun, receives each selected item as the
	// DLQ is streamed, in store order, instead of the Result listing them:
	// the dry run then holds no record or item in memory (Result.Items is
	// empty, Result.Pending counts the selection). An error it returns
	// stops the dry run and is returned.
	Selected func(ItemOutcome) error
	// Signature restricts the redrive to the records whose error_signature
	// is exactly this (one failure cluster); "" selects every signature.
	Signature string
	// Sample, with Signature, runs that many records of the cluster first
	// (the first by item id) and stops when all of them fail again with the
	// same signature; 0 redrives the whole cluster at once.
	Sample int
	// SkipReduce leaves reduce to a later redrive of the same job (a
	// canary's sample: reduce runs once, with the rest of the cluster).
	SkipReduce bool
	// BatchSize is how many selected records are paged into the job at a
	// time (the next page is read when the previous one is done); 0 means
	// DefaultRedriveBatch.
	BatchSize int
	// WorkflowFile, Onto and MaxCostUSD are as in ResumeSpec.
	WorkflowFile string
	Onto         string
	MaxCostUSD   float64
	// Agents overrides how agents run; Agents.MaxParallel 0 means 10.
	Agents Agents
}

// options are the engine's settings for one operation: the Engine's
// dependencies with the spec's choices.
func (e *Engine) options(a Agents) options {
	return options{
		Home: e.Home, Git: e.Git, Clock: e.Clock, Rand: e.Rand, Redactor: e.Redactor, Tracer: e.Tracer,
		Stderr: e.Stderr, Hooks: e.Hooks, Getenv: e.Getenv, Environ: e.Environ,
		ClaudeCommand: e.ClaudeCommand, ClaudeArgs: e.ClaudeArgs,
		InterruptGrace: e.InterruptGrace, KillGrace: e.KillGrace, ProgressInterval: e.ProgressInterval,
		DeferTeardown: e.DeferTeardown,
		MaxParallel:   a.MaxParallel, AgentUser: a.User, Claude: a.Claude,
	}
}

// Run runs a new job: setup → map → merge → reduce (see RunSpec). The
// result is non-nil whenever the job was created, also with an error.
func (e *Engine) Run(ctx context.Context, s RunSpec) (*Result, error) {
	o := e.options(s.Agents)
	o.Workflow, o.RepoDir, o.JobID, o.Branch = s.Workflow, s.RepoDir, s.JobID, s.Branch
	o.Isolation, o.Merge, o.Sparse = s.Isolation, s.Merge, s.Sparse
	o.MaxCostUSD, o.RequireItems, o.NoItems = s.MaxCostUSD, s.RequireItems, s.NoItems
	return runJob(ctx, o)
}

// Resume continues a job (see ResumeSpec): every item not finished runs,
// nothing finished runs again.
func (e *Engine) Resume(ctx context.Context, s ResumeSpec) (*Result, error) {
	o := e.options(s.Agents)
	o.WorkflowFile, o.Onto, o.MaxCostUSD = s.WorkflowFile, s.Onto, s.MaxCostUSD
	return resumeJob(ctx, resumeOptions{Home: e.Home, JobID: s.JobID, IncludeDLQ: s.IncludeDLQ, Run: o})
}

// Redrive re-runs the selected DLQ records of a job (see RedriveSpec and
// retryDLQ).
func (e *Engine) Redrive(ctx context.Context, s RedriveSpec) (*Result, error) {
	o := e.options(s.Agents)
	o.WorkflowFile, o.Onto, o.MaxCostUSD = s.WorkflowFile, s.Onto, s.MaxCostUSD
	ro := retryOptions{Home: e.Home, JobID: s.JobID, Filter: s.Filter, MaxRetries: s.MaxRetries, Parallel: s.Agents.MaxParallel,
		Force: s.Force, DryRun: s.DryRun, Signature: s.Signature, BatchSize: s.BatchSize, Sample: s.Sample,
		Selected: s.Selected, SkipReduce: s.SkipReduce, Run: o}
	if s.Items != nil {
		ro.Items = make(map[string]bool, len(s.Items))
		for _, id := range s.Items {
			ro.Items[id] = true
		}
	}
	return retryDLQ(ctx, ro)
}
