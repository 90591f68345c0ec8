package config

import (
	"os"
	"strings"
	"time"
)

// Workflow is a parsed and validated MapReduce workflow file.
type Workflow struct {
	// Path is the file the workflow was read from (as given to Parse/Load).
	Path string
	// Name is `name`; it defaults to the file name without extension.
	Name string
	// Mode is always "mapreduce" (the default; any other mode is an error).
	Mode string
	// Env is the top-level `env`; numbers and booleans are kept as written.
	Env map[string]string
	// Secrets is the top-level `secrets`: environment variable names whose
	// values are redacted from every output.
	Secrets []string
	// Setup runs in the parent worktree before the map phase.
	Setup []Step
	// Map is the map phase.
	Map MapPhase
	// Reduce runs in the parent worktree after the map phase.
	Reduce []Step
	// ErrorPolicy is the map phase's resolved error policy: map-level
	// settings (map.X or map.error_policy.X) beat top-level ones
	// (X or error_policy.X), then defaults apply.
	ErrorPolicy ErrorPolicy
	// PreserveFailedWorktrees keeps the worktrees of failed items
	// (`preserve_failed_worktrees`, top level or under map).
	PreserveFailedWorktrees bool
	// Budget is the `budget:` block; nil when absent (no spend caps).
	Budget *Budget
	// RateLimit is the `rate_limit:` block with defaults applied.
	RateLimit RateLimit
	// Worktree is the `worktree:` block (sparse agent checkouts).
	Worktree WorktreeConfig
	// Claude is the `claude:` block: options of every claude step (a
	// step's claude_options override them; ClaudeFor resolves).
	Claude ClaudeSettings
	// Warnings lists deprecations and suspicious settings, each prefixed
	// with "file:line:col: key:".
	Warnings []string
}

// MapPhase is the `map:` block.
type MapPhase struct {
	// Input is a JSON file (relative to the repository) or a command.
	Input string
	// JSONPath selects items from the input (RFC 9535); "" = the input array.
	JSONPath string
	// Filter is an expression keeping the items for which it is true.
	Filter string
	// FilterPos is where the filter expression's text starts.
	FilterPos Position
	// SortBy is "field DESC, other ASC".
	SortBy string
	// Distinct names a field whose first occurrence is kept.
	Distinct string
	// IDField names a field whose value is each item's id (unique,
	// non-empty); "" means Prodigy's item_<index>.
	IDField string
	// Offset skips that many items after sorting.
	Offset int
	// MaxItems limits the items processed; 0 = no limit.
	MaxItems int
	// AgentTemplate is the steps run for every item (never empty).
	AgentTemplate []Step
	// MaxParallel is the raw `max_parallel`: "10" by default, a number, or
	// "${VAR}"/"$VAR" resolved by Workflow.ResolveMaxParallel.
	MaxParallel string
	// AgentTimeout limits one agent (one item); 0 = none. From
	// agent_timeout_secs or timeout_config.agent_timeout_secs.
	AgentTimeout time.Duration
	// Pos is where the `map:` key is.
	Pos Position
}

// On-item-failure actions (ErrorPolicy.OnItemFailure).
const (
	OnFailureDLQ    = "dlq"
	OnFailureRetry  = "retry"
	OnFailureSkip   = "skip"
	OnFailureStop   = "stop"
	OnFailureCustom = "custom"
)

// ErrorPolicy says what happens when an item still fails after its
// attempts.
type ErrorPolicy struct {
	// OnItemFailure is "dlq" (default), "retry" (dlq with the default retry
	// config when none is given), "skip", "stop" or "custom".
	OnItemFailure string
	// CustomHandler holds the steps of `on_item_failure: {custom: [steps]}`
	// (set exactly when OnItemFailure is "custom").
	CustomHandler []Step
	// ContinueOnFailure defaults to true; false stops the job at the first
	// item that exhausts its attempts.
	ContinueOnFailure bool
	// MaxFailures stops the job when that many items failed; 0 = unlimited.
	MaxFailures int
	// FailureThreshold stops the job when, after at least 10 finished
	// items, failed/finished exceeds it (Prodigy §4.6); 0 = no threshold.
	FailureThreshold float64
	// CircuitBreaker stops launching items when this many finished items
	// in a row failed with one error signature (a failure storm: a broken
	// dependency, prompt or key); the rest stay pending. 0 = off; default
	// DefaultCircuitBreaker. Rate limits and overloads do not count (the
	// fleet cool-down holds them).
	CircuitBreaker int
	// Retry is the per-item retry config; nil when none was given anywhere.
	Retry *RetryConfig
}

// DefaultCircuitBreaker is error_policy.circuit_breaker's default: the
// breaker trips after 10 consecutive finished items failed with one error
// signature.
const DefaultCircuitBreaker = 10

// Backoff kinds (BackoffConfig.Kind).
const (
	BackoffFixed       = "fixed"
	BackoffLinear      = "linear"
	BackoffExponential = "exponential"
	BackoffFibonacci   = "fibonacci"
	BackoffCustom      = "custom"
)

// RetryConfig is a `retry_config` (or step `retry:`) block with defaults
// applied: attempts 3, exponential base 2, initial_delay 1s, max_delay
// 30s, jitter off, jitter_factor 0.3, retry every error, no budget.
type RetryConfig struct {
	// Attempts counts executions including the first (>= 1); alias
	// max_attempts.
	Attempts int
	// Backoff is the delay strategy.
	Backoff BackoffConfig
	// InitialDelay is the base delay (also set by an explicit
	// `initial`/`delay` inside backoff).
	InitialDelay time.Duration
	// MaxDelay caps every wait (> 0).
	MaxDelay time.Duration
	// Jitter spreads each wait by ±JitterFactor.
	Jitter bool
	// JitterFactor is within [0, 1].
	JitterFactor float64
	// RetryOn lists the retryable errors; empty = every error.
	RetryOn []MatcherConfig
	// RetryBudget is the total backoff sleep allowed per item; 0 = none.
	RetryBudget time.Duration
}

// BackoffConfig is a backoff strategy.
type BackoffConfig struct {
	// Kind is fixed, linear, exponential, fibonacci or custom.
	Kind string
	// Increment is the linear step.
	Increment time.Duration
	// Base is the exponential base (`base` or `multiplier`, default 2).
	Base float64
	// Delays is the custom list (may be empty: every wait is max_delay).
	Delays []time.Duration
}

// MatcherConfig is one retry_on entry: Kind network, timeout,
// server_error, rate_limit, or pattern with Pattern (a valid Go regexp).
type MatcherConfig struct {
	Kind    string
	Pattern string
}

// Step is one command of setup, agent_template, reduce, on_failure or a
// custom handler. Exactly one of Shell, Claude and WriteFile is set.
type Step struct {
	Shell     string
	Claude    string
	WriteFile *WriteFile
	// Name is the optional `name:`.
	Name string
	// Timeout limits the step; from `timeout: 300` (seconds) or "5m". 0 = none.
	Timeout time.Duration
	// OnFailure runs when the step fails; if it succeeds the item goes on
	// with the next step. Normalised: a string is one step (claude when it
	// starts with "/", else shell), a mapping is one step, a list is steps.
	OnFailure []Step
	// CommitRequired fails the step when it created no commit.
	CommitRequired bool
	// CaptureOutput names the variable receiving the step's stdout: ""
	// (not captured), "shell.output" for `capture_output: true`, or the
	// name given as a string.
	CaptureOutput string
	// Env adds environment variables to the step's process.
	Env map[string]string
	// Retry retries this one step; nil = no step-level retry.
	Retry *RetryConfig
	// ClaudeOptions is a claude step's `claude_options:`, overriding the
	// workflow's `claude:` block.
	ClaudeOptions ClaudeSettings
	// AllowNestedShell (`allow_nested_shell: true`) lets placeholders sit
	// inside the script of a second shell (bash -c, eval, ssh …), which
	// parses their values as code; refused by default.
	AllowNestedShell bool
	// Pos is where the step starts.
	Pos Position
	// TextPos is where the step's text (shell script, claude prompt or
	// write_file path) starts; TextBlock is true for a literal or folded
	// block scalar (| or >), whose lines start at column TextPos.Col.
	TextPos   Position
	TextBlock bool
	// EnvPos is where each `env` value is.
	EnvPos map[string]Position
}

// Describe returns "shell: <cmd>", "claude: <prompt>" or
// "write_file: <path>" (first line only, at most 200 characters): the
// step_failed text of DLQ records.
func (s Step) Describe() string {
	switch {
	case s.Shell != "":
		return "shell: " + oneLine(s.Shell)
	case s.Claude != "":
		return "claude: " + oneLine(s.Claude)
	case s.WriteFile != nil:
		return "write_file: " + oneLine(s.WriteFile.Path)
	}
	return "empty step"
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// WriteFile is a `write_file:` step.
type WriteFile struct {
	// Path is relative to the worktree (interpolated at run time).
	Path string
	// Content is written as is (after interpolation).
	Content string
	// Mode is the file mode (octal in YAML: 644, "0644", 0o644); 0 = 0644.
	Mode os.FileMode
	// CreateDirs creates missing parent directories.
	CreateDirs bool
}
