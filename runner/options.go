package runner

import (
	"io"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
)

// options are every setting of one operation (Engine.options builds them
// from the Engine and the operation's spec). Zero values mean the
// documented defaults.
type options struct {
	// Workflow is the parsed workflow (config.Load).
	Workflow *config.Workflow
	// RepoDir is any directory inside the user's git checkout.
	RepoDir string
	// Home is the state directory ($PRODIGY_HOME or ~/.prodigy).
	Home string
	// JobID names the job; "" generates mapreduce-<UTC timestamp>-<random>.
	JobID string
	// Branch is the results branch; "" means prodigy/<job_id>.
	Branch string
	// MaxParallel overrides map.max_parallel when > 0.
	MaxParallel int
	// ClaudeCommand is the Claude Code executable; "" means $PRODIGY_CLAUDE_COMMAND or "claude".
	ClaudeCommand string
	// ClaudeArgs are extra arguments passed before the fixed
	// `--print --output-format stream-json --verbose` flags and the prompt.
	ClaudeArgs []string
	// Claude overrides the Claude Code options of the workflow's `claude:`
	// block and every step's claude_options (CLI flags, Action inputs).
	Claude config.ClaudeSettings
	// Stderr receives human logs and progress; nil discards them.
	Stderr io.Writer
	// Hooks receive lifecycle callbacks (GitHub log groups, annotations); nil ignores them.
	Hooks Hooks
	// Getenv reads the process environment; nil means os.Getenv.
	Getenv func(string) string
	// Environ is the base environment of child processes; nil means os.Environ().
	Environ []string
	// Clock drives backoff sleeps and timestamps; nil means retry.SystemClock.
	Clock retry.Clock
	// Rand returns uniform values in [0,1) for jitter; nil means math/rand.
	Rand func() float64
	// Isolation selects how agent worktrees are provided: IsolationPool
	// (default) reuses max_parallel worktrees, IsolationFresh creates and
	// removes one worktree per item.
	Isolation Isolation
	// Sparse, when not empty, makes the parent and agent worktrees cone-mode
	// sparse checkouts of these directories (--sparse), replacing the
	// workflow's worktree.sparse. Merges keep every file.
	Sparse []string
	// Merge selects how agent branches are merged: MergeTree (default)
	// merges without touching a working tree, MergeWorktree runs
	// `git merge --no-ff` in the parent worktree.
	Merge MergeMode
	// Redactor removes secrets from everything the runner writes: DLQ
	// records and index, events, checkpoint, session file, workflow copy,
	// Claude transcripts, stderr lines and hook logs and warnings. nil
	// means redact.New over Environ. Either way the values of the
	// workflow's `secrets:` names (and of secret-looking names in its
	// `env:`) are added.
	Redactor *redact.Redactor
	// InterruptGrace is how long running agents may take to finish after
	// an interrupt before they are killed; 0 means 30s.
	InterruptGrace time.Duration
	// KillGrace is how long a stopped step's process group has between
	// SIGTERM and SIGKILL (an interrupt after InterruptGrace, a step or
	// agent timeout); 0 means 5s. The GitHub Action shortens it to fit
	// GitHub's cancel sequence.
	KillGrace time.Duration
	// AgentUser, when set ("NAME", "UID" or "UID:GID"; --agent-user), runs
	// every map step as that user in a worktree handed to them, with HOME
	// a directory of the job's of theirs: agents can then write nothing of
	// the repository's git directory or the engine's state, by git or by
	// path (agentuser.go). "FIRST-LAST" gives every agent running at once
	// a uid of its own; "auto" is 70000-(70000+max_parallel-1) when the
	// engine runs as root and "" otherwise. The engine must run as root;
	// root and negative ids are refused. "" runs agents as the engine's
	// user.
	AgentUser string
	// Git configures every git process of the engine (environment, extra
	// configuration such as safe.directory, hooks); the zero value is
	// gitops' default: a minimal environment without secrets, hooks off.
	Git gitops.Options
	// WorkflowFile (Resume, RetryDLQ: --workflow) is the workflow file to
	// run instead of the job's original path in the checkout.
	WorkflowFile string
	// Onto (Resume, RetryDLQ: --onto) is a branch or revision merged into
	// the results branch before anything runs, e.g. main with a fix.
	Onto string
	// MaxCostUSD is the job's spend budget in US dollars (--max-cost-usd):
	// it overrides the workflow's budget.max_cost_usd and is kept in the
	// checkpoint for later resumes; 0 keeps the checkpoint's or workflow's.
	MaxCostUSD float64
	// RequireItems makes a map input that selects zero items an input
	// error (*UsageError, the job is rolled back) instead of a warning.
	RequireItems bool
	// NoItems creates the job with no map items: setup runs, the workflow's
	// map input is not read and reduce does not run. It is how a redrive
	// starts a job of the current checkout's workflow whose items then come
	// from imported DLQ records (RetryDLQ).
	NoItems bool
	// DeferTeardown leaves the deletion of the pool worktrees' files to the
	// caller: at the end of the job they are only moved aside (one rename
	// each) and unregistered from git, and Result.Teardown deletes them, so
	// a caller reports the result (prints it, uploads the DLQ, comments)
	// before paying for deleting max_parallel checkouts. The caller must
	// call Result.Teardown. Without it the files are deleted before Run
	// returns.
	DeferTeardown bool
	// noTools skips looking up bash and the Claude command (dry runs).
	noTools bool
	// ProgressInterval is the period of non-terminal progress lines; 0 means 10s.
	ProgressInterval time.Duration
	// Tracer receives the job's spans (job → phase → item → attempt →
	// step); nil traces nothing. Its trace id is in the job_started (or
	// job_resumed) event and Result.TraceID.
	Tracer Tracer
}

// Isolation is the agent worktree strategy.
type Isolation string

// Isolation strategies.
const (
	IsolationPool  Isolation = "pool"
	IsolationFresh Isolation = "fresh"
)

// MergeMode is the merge strategy of the merge worker.
type MergeMode string

// Merge modes.
const (
	MergeTree     MergeMode = "tree"
	MergeWorktree MergeMode = "worktree"
)

// Hooks receives lifecycle callbacks; every method may be called from
// several goroutines at once. The GitHub Action uses them for log groups
// per agent and error/warning annotations.
type Hooks interface {
	// ItemFinished is called once per item when it reaches a final state.
	ItemFinished(item ItemOutcome, log string)
	// Warning reports a non-fatal problem (cleanup failure, DLQ write failure).
	Warning(msg string)
}

// retryOptions configures retryDLQ (`dlq retry`).
type retryOptions struct {
	// Home is the state directory.
	Home string
	// JobID is the job whose DLQ is redriven.
	JobID string
	// Filter is an expression over item.* (record fields merged with item_data); "" selects all.
	Filter string
	// MaxRetries is the number of attempts per item; 0 means 3.
	MaxRetries int
	// Parallel is the number of concurrent agents; 0 means 10.
	Parallel int
	// Force includes records that are not reprocess_eligible.
	Force bool
	// DryRun lists what would run and changes nothing; it needs neither
	// bash nor the Claude command.
	DryRun bool
	// Signature restricts the redrive to the records whose error_signature
	// is exactly this (one failure cluster); "" selects every signature.
	Signature string
	// BatchSize is how many selected records are paged into the job at a
	// time (the next page is read when the previous one is done); 0 means
	// DefaultRedriveBatch.
	BatchSize int
	// Sample, with Signature, runs that many records of the cluster first
	// (the first by item id) and stops when all of them fail again with the
	// same signature; 0 redrives the whole cluster at once.
	Sample int
	// Items, when not nil, restricts the selection to these item ids (a
	// canary's sample or rest).
	Items map[string]bool
	// SkipReduce skips reduce in this call (a canary's sample: reduce
	// runs once, with the rest of the cluster).
	SkipReduce bool
	// Selected, when set with DryRun, receives each selected item as the
	// DLQ is streamed, in store order, instead of the Result listing them:
	// the dry run then holds no record or item in memory (Result.Items is
	// empty, Result.Pending counts the selection). An error it returns
	// stops the dry run and is returned.
	Selected func(ItemOutcome) error
	// Run carries the remaining settings (Stderr, Hooks, Clock, Claude command, …);
	// its Workflow, RepoDir, JobID and Branch are taken from the job's checkpoint.
	Run options
}
