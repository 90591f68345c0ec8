package runner

import (
	"io"
	"time"

	"github.com/prodigy-action/prodigy-action/config"
	"github.com/prodigy-action/prodigy-action/gitops"
	"github.com/prodigy-action/prodigy-action/redact"
	"github.com/prodigy-action/prodigy-action/retry"
)

// options are every setting of one operation, built by Engine.options
// from the Engine (Home, Git, Clock, Rand, Redactor, Tracer, Stderr,
// Hooks, Getenv, Environ, ClaudeCommand, ClaudeArgs, the graces,
// ProgressInterval, DeferTeardown: documented there) and the operation's
// spec (Workflow, RepoDir, JobID, Branch, Isolation, Merge, Sparse,
// MaxCostUSD, RequireItems, NoItems: RunSpec; WorkflowFile, Onto:
// ResumeSpec; MaxParallel, AgentUser, Claude: Agents). Zero values mean
// the documented defaults.
type options struct {
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
	Hooks            Hooks
	Getenv           func(string) string
	Environ          []string
	Clock            retry.Clock
	Rand             func() float64
	Isolation        Isolation
	Sparse           []string
	Merge            MergeMode
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
	Tracer           Tracer
	// noTools skips looking up bash and the Claude command (dry runs).
	noTools bool
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

// retryOptions configures retryDLQ (`dlq retry`): the fields are
// RedriveSpec's (Items as a set, Parallel its Agents.MaxParallel); Run
// carries the remaining settings (Stderr, Hooks, Clock, Claude command,
// …), whose Workflow, RepoDir, JobID and Branch are taken from the job's
// checkpoint.
type retryOptions struct {
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
	Items      map[string]bool
	SkipReduce bool
	Selected   func(ItemOutcome) error
	Run        options
}
